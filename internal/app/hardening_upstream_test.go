package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// containsSecret reports whether s holds an upstream secret of the catalog.
func containsSecret(s string) bool {
	return strings.Contains(s, secretA1) || strings.Contains(s, secretA2) || strings.Contains(s, secretB1)
}

// TestUpstreamEchoOfTheCredentialIsScrubbed (issue #9 item 11): an upstream
// that quotes the request's Authorization header back, in a request error
// passed on to the caller (body and header) or in a model's answer (JSON
// or stream), never shows the caller the edge's secret; an error answer
// loses any other key-shaped text too.
func TestUpstreamEchoOfTheCredentialIsScrubbed(t *testing.T) {
	tests := []struct {
		name       string
		give       simulator.Behavior
		stream     bool
		wantStatus int
		wantText   string // what the caller still reads
		wantGone   string // key-shaped text that must not reach the caller
	}{
		{name: "400 echoing the header", give: simulator.Behavior{FailStatus: 400, EchoAuth: true}, wantStatus: 400, wantText: "Authorization: Bearer ****"},
		{name: "400 quoting other keys", give: simulator.Behavior{FailStatus: 400, FailBody: `{"error":{"message":"key sk-proj-Zx81Qa0123456789 and x-api-key: hunter2hunter2 rejected","type":"invalid_request_error"}}`},
			wantStatus: 400, wantText: "rejected", wantGone: "hunter2hunter2"},
		{name: "answer echoing the header", give: simulator.Behavior{EchoAuth: true}, wantStatus: 200, wantText: "Bearer ****"},
		{name: "stream echoing the header", give: simulator.Behavior{EchoAuth: true}, stream: true, wantStatus: 200, wantText: "Bearer ****"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.failAll(tt.give)
			var status int
			var header http.Header
			var body string
			if tt.stream {
				resp := h.stream(t.Context(), "fast")
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				status, header, body = resp.StatusCode, resp.Header, string(b)
			} else {
				status, header, body = h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
			}
			if status != tt.wantStatus || !strings.Contains(body, tt.wantText) {
				t.Fatalf("answer = %d %s; want %d with %q", status, body, tt.wantStatus, tt.wantText)
			}
			if containsSecret(body) || (tt.wantGone != "" && strings.Contains(body, tt.wantGone)) || strings.Contains(body, "sk-proj-Zx81") {
				t.Errorf("the caller read a credential: %s", body)
			}
			for k, v := range header {
				if containsSecret(strings.Join(v, " ")) {
					t.Errorf("header %s = %q carries a secret", k, v)
				}
			}
			if containsSecret(h.logs.String()) {
				t.Errorf("a secret reached the logs")
			}
		})
	}
}

// TestLongAnswerPassesThroughWithBoundedMemory (issue #9 item 13): a JSON
// answer of tens of MB reaches the caller whole with its usage measured,
// while the gateway holds a bounded part of it, not all of it.
func TestLongAnswerPassesThroughWithBoundedMemory(t *testing.T) {
	const pad = 40 << 20
	h := newHarness(t)
	h.failAll(simulator.Behavior{Pad: pad})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp := h.postStream(t, chatBody)
	var tail tailWriter
	n, err := io.Copy(&tail, resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	if err != nil || resp.StatusCode != 200 || n < pad || !bytes.Contains(tail.b, []byte(`"usage":{"prompt_tokens":`)) {
		t.Fatalf("answer = %d, %d bytes, %v, ending %q; want 200 with the whole answer", resp.StatusCode, n, err, tail.b)
	}
	// Everything this process allocated meanwhile: the simulator writes
	// its padding from one shared piece, the client reads through small
	// buffers, so this is the gateway's share plus a little.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB relaying %d MiB", alloc>>10, n>>20)
	if alloc > 16<<20 {
		t.Errorf("the process allocated %d MiB relaying a %d MiB answer; want it bounded well below the answer", alloc>>20, n>>20)
	}
	rec := h.usage(t, 1)[0]
	if !rec.Usage.Measured || rec.Usage.CompletionTokens == 0 || rec.Executions[0].Status != sluice.ExecutionOK {
		t.Errorf("usage record = %+v, want a measured success", rec)
	}
}

// TestLongAnswerCutAfterTheCommit (issue #9 item 13): an answer that breaks
// after it began reaching the caller cannot fail over: the caller's
// response is cut (it never reads a truncated answer as whole), and the
// execution is recorded as an endpoint failure.
func TestLongAnswerCutAfterTheCommit(t *testing.T) {
	h := newHarness(t)
	h.failAll(simulator.Behavior{Pad: 8 << 20, CutBodyAfter: 4 << 20})
	resp := h.postStream(t, chatBody)
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil {
		t.Fatalf("answer = %d, read %d bytes, err %v; want 200 whose body fails to read", resp.StatusCode, n, err)
	}
	rec := h.usage(t, 1)[0]
	if len(rec.Executions) != 1 || rec.Executions[0].Status != sluice.ExecutionEndpoint {
		t.Errorf("executions = %+v, want one endpoint failure", rec.Executions)
	}
	if n := len(h.simB.Requests()); n != 0 {
		t.Errorf("ep-b calls = %d, want 0: a committed answer never fails over", n)
	}
}

// postStream sends a chat request and returns the response unread.
func (h *harness) postStream(t *testing.T, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url("/v1/chat/completions"), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// tailWriter keeps the last KiB written to it.
type tailWriter struct{ b []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p[max(0, len(p)-1024):]...)
	w.b = w.b[max(0, len(w.b)-1024):]
	return len(p), nil
}

// TestAnswerNotInTheRoutesFormatFailsOver (issue #9 item 14): a 2xx that is
// not what the route speaks (HTML for JSON, a stream that is not SSE of
// JSON chunks) is an endpoint failure before the first byte: the caller
// gets the next endpoint's answer, the breaker counts it, and the usage
// record shows it.
func TestAnswerNotInTheRoutesFormatFailsOver(t *testing.T) {
	const html = "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"
	tests := []struct {
		name   string
		give   simulator.Behavior
		stream bool
	}{
		{name: "HTML page", give: simulator.Behavior{Answer: html}},
		{name: "HTML labelled JSON", give: simulator.Behavior{Answer: html, AnswerType: "application/json"}},
		{name: "stream answered with HTML", give: simulator.Behavior{Answer: html}, stream: true},
		{name: "stream whose first event is not JSON", give: simulator.Behavior{Answer: "data: " + html + "\n\n", AnswerType: "text/event-stream"}, stream: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.simA.SetKey(secretA1, tt.give)
			h.simA.SetKey(secretA2, tt.give)
			// ep-a's breaker opens at its third failure: two requests (two
			// credentials each) see three failures, and the fourth is spared.
			for range 2 {
				var status int
				var body string
				if tt.stream {
					resp := h.stream(t.Context(), "fast")
					data := readStream(t, resp)
					resp.Body.Close()
					status, body = resp.StatusCode, strings.Join(data, "\n")
					if len(data) == 0 || data[len(data)-1] != "[DONE]" {
						t.Errorf("stream = %q, want ep-b's whole stream", data)
					}
				} else {
					status, _, body = h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
					if !json.Valid([]byte(body)) {
						t.Errorf("answer = %s, want ep-b's JSON", body)
					}
				}
				if status != 200 || strings.Contains(body, "<html>") {
					t.Fatalf("answer = %d %s; want ep-b's 200", status, body)
				}
			}
			if n := len(h.simA.Requests()); n != 3 {
				t.Errorf("ep-a calls = %d, want 3: its breaker opens on the third failure", n)
			}
			if _, body := h.adminGet("/metrics"); !strings.Contains(body, `sluice_endpoint_breaker_state{endpoint="ep-a"} 1`) {
				t.Errorf("metrics do not show ep-a's breaker open")
			}
			rec := h.usage(t, 1)[0]
			var got []string
			for _, e := range rec.Executions {
				got = append(got, e.EndpointID+":"+string(e.Status))
			}
			if strings.Join(got, " ") != "ep-a:endpoint ep-a:endpoint ep-b:ok" {
				t.Errorf("executions = %v, want two endpoint failures on ep-a, then ep-b ok", got)
			}
		})
	}
}

// TestMalformedEventEndsTheStream (issue #9 item 14): a data event that is
// not JSON after the stream was committed ends it with the error event
// (the bad event is not passed on), and the execution is an endpoint
// failure, not ok.
func TestMalformedEventEndsTheStream(t *testing.T) {
	h := newHarness(t)
	h.failAll(simulator.Behavior{GarbleAfter: 2})
	resp := h.stream(t.Context(), "fast")
	data := readStream(t, resp)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(data) < 2 {
		t.Fatalf("stream = %d with %q, want 200 and the events before the bad one", resp.StatusCode, data)
	}
	if last := data[len(data)-1]; !strings.Contains(last, string(sluice.CodeUpstreamStreamFailed)) || strings.Contains(strings.Join(data, "\n"), "garbled") {
		t.Errorf("stream = %q, want the bad event dropped and the error event last", data)
	}
	rec := h.usage(t, 1)[0]
	if len(rec.Executions) != 1 || rec.Executions[0].Status != sluice.ExecutionEndpoint {
		t.Errorf("executions = %+v, want one endpoint failure", rec.Executions)
	}
}
