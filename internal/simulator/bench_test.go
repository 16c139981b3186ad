package simulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

func newRequest(path, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer k")
	r.Header.Set("Content-Type", "application/json")
	return r
}

// benchmark serves body over and over. The request is built once: building
// it per iteration (httptest.NewRequest) costs more than serving it.
func benchmark(b *testing.B, path, body string) {
	sim := simulator.New(simulator.Options{MaxRecords: -1}) // a long benchmark must not grow memory
	req := newRequest(path, body)
	rd := strings.NewReader(body)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		w := httptest.NewRecorder()
		sim.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status = %d: %s", w.Code, w.Body)
		}
	}
}

func BenchmarkChatJSON(b *testing.B) {
	benchmark(b, "/v1/chat/completions", chatBody)
}

func BenchmarkChatSSE(b *testing.B) {
	benchmark(b, "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello to the world"}]}`)
}

func BenchmarkEmbeddings(b *testing.B) {
	benchmark(b, "/v1/embeddings", `{"model":"text-embedding-3-small","input":["the quick fox","lazy dog"]}`)
}

// FuzzChat checks that any body gets a well-formed answer: 200 with JSON or
// SSE, or an OpenAI error envelope; never a panic.
func FuzzChat(f *testing.F) {
	for _, seed := range []string{
		chatBody,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"a b"},{"type":"image_url","image_url":{"url":"x"}}]}]}`,
		`{"model":"\u0000\"<>","messages":[{"role":"user","content":null}]}`,
		`{"model":"m","messages":[{}],"max_completion_tokens":-1}`,
		`{"model":7}`,
		`[]`,
		``,
	} {
		f.Add(seed)
	}
	sim := simulator.New(simulator.Options{MaxRecords: -1})
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		sim.ServeHTTP(w, newRequest("/v1/chat/completions", body))
		out := w.Body.Bytes()
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") == "application/json" {
			if !json.Valid(out) {
				t.Fatalf("status %d body is not JSON: %s", w.Code, out)
			}
			return
		}
		for ev := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
			data, ok := bytes.CutPrefix(ev, []byte("data: "))
			if !ok || (!json.Valid(data) && string(data) != "[DONE]") {
				t.Fatalf("bad event %q", ev)
			}
		}
	})
}
