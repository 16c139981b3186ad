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
