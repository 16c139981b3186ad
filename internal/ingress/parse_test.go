package ingress

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		protocol sluice.Protocol
		give     string
		want     sluice.Request // Body is not compared
		wantCode sluice.Code    // "" = success
	}{
		{name: "chat", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"fast","messages":[]}`, want: sluice.Request{Model: "fast"}},
		{name: "stream", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"fast","stream":true}`, want: sluice.Request{Model: "fast", Stream: true}},
		{name: "stream usage", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, want: sluice.Request{Model: "m", Stream: true, IncludeUsage: true}},
		{name: "user", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"u-1"}`, want: sluice.Request{Model: "m", User: "u-1"}},
		{name: "embeddings", protocol: sluice.ProtocolOpenAIEmbeddings, give: `{"model":"e","input":"x"}`, want: sluice.Request{Model: "e"}},
		{name: "malformed", protocol: sluice.ProtocolOpenAIChat, give: `{"model":`, wantCode: sluice.CodeInvalidRequest},
		{name: "trailing garbage", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m"} x`, wantCode: sluice.CodeInvalidRequest},
		{name: "array", protocol: sluice.ProtocolOpenAIChat, give: `[1]`, wantCode: sluice.CodeInvalidRequest},
		{name: "empty", protocol: sluice.ProtocolOpenAIChat, give: ``, wantCode: sluice.CodeInvalidRequest},
		{name: "no model", protocol: sluice.ProtocolOpenAIChat, give: `{"messages":[]}`, wantCode: sluice.CodeInvalidRequest},
		{name: "model not a string", protocol: sluice.ProtocolOpenAIChat, give: `{"model":7}`, wantCode: sluice.CodeInvalidRequest},
		{name: "stream not a bool", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","stream":"yes"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "embedding stream", protocol: sluice.ProtocolOpenAIEmbeddings, give: `{"model":"e","stream":true}`, wantCode: sluice.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.protocol, []byte(tt.give))
			if tt.wantCode != "" {
				if !errors.Is(err, &sluice.Error{Code: tt.wantCode}) {
					t.Fatalf("Parse(%s) error = %v, want code %s", tt.give, err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s) error = %v", tt.give, err)
			}
			if got.Model != tt.want.Model || got.Stream != tt.want.Stream || got.IncludeUsage != tt.want.IncludeUsage || got.User != tt.want.User || string(got.Body) != tt.give {
				t.Errorf("Parse(%s) = %+v, want %+v with the body kept", tt.give, *got, tt.want)
			}
		})
	}
}

// FuzzParse checks the ingress parser never panics, and that it either
// accepts a body with a model or refuses it with invalid_request.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"model":"fast","messages":[]}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, `{"model":`, `[1]`, ``, `{"model":7}`, `{"model":"a","model":"b"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		req, err := Parse(sluice.ProtocolOpenAIChat, []byte(give))
		if err != nil {
			if !errors.Is(err, &sluice.Error{Code: sluice.CodeInvalidRequest}) {
				t.Fatalf("Parse(%q) error = %v, want invalid_request", give, err)
			}
			return
		}
		if req.Model == "" || string(req.Body) != give {
			t.Fatalf("Parse(%q) = %+v: accepted without a model or changed the body", give, req)
		}
	})
}

// TestScan checks which bodies the scan reads itself and which it leaves to
// encoding/json: the bodies clients send must not take the slow path.
func TestScan(t *testing.T) {
	tests := []struct {
		name string
		give string
		want fields // compared when the scan takes the body
		ok   bool
	}{
		{name: "chat", give: `{"model":"m","messages":[{"role":"user","content":"h\u00e9"}],"max_tokens":100,"user":"u"}`,
			want: fields{Model: "m", MaxTokens: 100, User: "u"}, ok: true},
		{name: "stream with usage", give: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":5}`,
			want: fields{Model: "m", Stream: true, IncludeUsage: true, MaxCompletionTokens: 5}, ok: true},
		{name: "null leaves a field", give: `{"model":"a","model":null,"stream":null,"user":null,"max_tokens":null}`, want: fields{Model: "a"}, ok: true},
		{name: "last duplicate wins", give: `{"model":"a","model":"b","stream":true,"stream":false}`, want: fields{Model: "b"}, ok: true},
		{name: "null options", give: `{"model":"m","stream_options":{"include_usage":true},"stream_options":null}`, want: fields{Model: "m"}, ok: true},
		{name: "options merge", give: `{"model":"m","stream_options":{"include_usage":true},"stream_options":{}}`, want: fields{Model: "m", IncludeUsage: true}, ok: true},
		{name: "options after null", give: `{"model":"m","stream_options":null,"stream_options":{}}`, want: fields{Model: "m"}, ok: true},
		{name: "upper case key", give: `{"Model":"m"}`},
		{name: "escaped key", give: `{"mod\u0065l":"m"}`},
		{name: "escaped model", give: `{"model":"\u006d"}`},
		{name: "invalid UTF-8 in model", give: "{\"model\":\"\xff\"}"},
		{name: "wrong type", give: `{"model":"m","stream":1}`},
		{name: "fractional max_tokens", give: `{"model":"m","max_tokens":1.0}`},
		{name: "options not an object", give: `{"model":"m","stream_options":[]}`},
		{name: "upper case option", give: `{"model":"m","stream_options":{"Include_usage":true}}`},
		{name: "invalid JSON", give: `{"model":"m",}`},
		{name: "not an object", give: `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := scan([]byte(tt.give))
			if ok != tt.ok || ok && got != tt.want {
				t.Errorf("scan(%s) = %+v, %v; want %+v, %v", tt.give, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzScanMatchesDecode checks the scan against encoding/json: a body the
// scan takes, encoding/json takes too, with the same fields.
func FuzzScanMatchesDecode(f *testing.F) {
	for _, s := range []string{`{"model":"fast","messages":[]}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"a","model":null,"stream_options":{"include_usage":true},"stream_options":{}}`, `{"model":"m","max_tokens":-9223372036854775808}`,
		`{"model":"m","max_tokens":1e2}`, `{"MODEL":"m"}`, `{"model":"m","user":"\u00e9"}`, `[1]`, ``, `{"model":7}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		got, ok := scan([]byte(give))
		if !ok {
			return
		}
		want, err := decode([]byte(give))
		if err != nil {
			t.Fatalf("scan(%q) = %+v, but encoding/json refuses it: %v", give, got, err)
		}
		if got != want {
			t.Fatalf("scan(%q) = %+v, encoding/json reads %+v", give, got, want)
		}
	})
}

func TestTokenEstimate(t *testing.T) {
	body := `{"model":"m","max_completion_tokens":100,"messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}]}`
	req, err := Parse(sluice.ProtocolOpenAIChat, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(body)/4 + 1 + 100; req.Tokens != want {
		t.Errorf("Tokens = %d, want %d (prompt bytes/4 + max_completion_tokens)", req.Tokens, want)
	}
	req, _ = Parse(sluice.ProtocolOpenAIChat, []byte(`{"model":"m"}`))
	if req.Tokens != 13/4+1+defaultOutputTokens {
		t.Errorf("Tokens without max_tokens = %d, want the default output reserved", req.Tokens)
	}
}

func BenchmarkParse(b *testing.B) {
	body := []byte(`{"model":"fast","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Tell me about the weather in Paris today, please."}],"stream":true,"temperature":0.2}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(sluice.ProtocolOpenAIChat, body); err != nil {
			b.Fatal(err)
		}
	}
}
