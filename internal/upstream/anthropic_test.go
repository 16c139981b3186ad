package upstream

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/sse"
)

func TestAnthropicEvents(t *testing.T) {
	start := sluice.Usage{PromptTokens: 117, CompletionTokens: 1, CachedTokens: 100, CacheWriteTokens: 5, TotalTokens: 118, Measured: true}
	tests := []struct {
		name    string
		give    string
		from    sluice.Usage
		want    sluice.Usage
		done    bool
		wantErr error
	}{
		{name: "message_start", give: `{"type":"message_start","message":{"id":"m","usage":{"input_tokens":12,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}`,
			want: start},
		{name: "message_delta keeps the prompt", give: `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":95}}`, from: start,
			want: sluice.Usage{PromptTokens: 117, CompletionTokens: 95, CachedTokens: 100, CacheWriteTokens: 5, TotalTokens: 212, Measured: true}},
		{name: "message_delta replaces the prompt", give: `{"type":"message_delta","usage":{"input_tokens":20,"output_tokens":3}}`, from: start,
			want: sluice.Usage{PromptTokens: 20, CompletionTokens: 3, TotalTokens: 23, Measured: true}},
		{name: "text delta", give: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"usage"}}`, from: start, want: start},
		{name: "unknown event", give: `{"type":"something_new"}`, from: start, want: start},
		{name: "message_stop", give: `{"type":"message_stop"}`, from: start, want: start, done: true},
		{name: "error", give: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, wantErr: errUpstreamErrorEvent},
		{name: "not JSON", give: `Overloaded`, wantErr: errMalformedEvent},
		{name: "usage not an object", give: `{"type":"message_delta","usage":7}`, from: start, want: start},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, drop, done, err := anthropicEvent(sse.Event{Data: []byte(tt.give)}, &sluice.Request{}, tt.from)
			if err != tt.wantErr || tt.wantErr == nil && (got != tt.want || drop || done != tt.done) {
				t.Errorf("anthropicEvent(%s) = %+v, drop %v, done %v, %v; want %+v, done %v, %v", tt.give, got, drop, done, err, tt.want, tt.done, tt.wantErr)
			}
		})
	}
}

func TestAnthropicAnswerUsage(t *testing.T) {
	got := AnthropicMessages.Usage([]byte(`{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":95,"service_tier":"standard"}`))
	want := sluice.Usage{PromptTokens: 1812, CompletionTokens: 95, CachedTokens: 1800, TotalTokens: 1907, Measured: true}
	if got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
	if u := AnthropicMessages.Usage(nil); u.Measured {
		t.Errorf("usage of nothing = %+v, want unmeasured", u)
	}
}

// FuzzAnthropicEvent checks that reading any event never panics.
func FuzzAnthropicEvent(f *testing.F) {
	for _, s := range []string{`{"type":"message_start","message":{"usage":{"input_tokens":1}}}`, `{"type":"message_delta","usage":{"output_tokens":95}}`,
		`{"type":"message_delta","usage":{"input_tokens":1e2}}`, `{}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		_, _, _, _ = anthropicEvent(sse.Event{Data: []byte(give)}, &sluice.Request{}, sluice.Usage{})
	})
}

// An Anthropic stream whose first event is an error (an overload or a rate
// limit after the 200) has reached no caller: it is classified as the
// error answer it stands for, and the request can fail over.
func TestAnthropicStreamThatStartsWithAnError(t *testing.T) {
	tests := []struct {
		name, event string
		want        Class
	}{
		{"overloaded", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, ClassEndpoint},
		{"rate limited", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, ClassRate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Api-Key") != testSecret || r.Header.Get("Anthropic-Version") != "2023-06-01" || r.Header.Get("Authorization") != "" {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: error\ndata: "+tt.event+"\n\n")
			}))
			t.Cleanup(srv.Close)
			c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), testProtocols, func(string) BreakerSettings { return BreakerSettings{Failures: 5, Open: time.Second} }, nil)
			t.Cleanup(c.Close)
			edge := testEdge(srv.URL)
			edge.Protocol = sluice.ProtocolAnthropic
			req := &sluice.Request{ID: "r", Protocol: sluice.ProtocolAnthropic, Model: "m", Stream: true, Body: []byte(`{"model":"m","stream":true}`)}
			w := httptest.NewRecorder()
			a := c.Execute(t.Context(), w, req, edge, time.Now(), Hooks{})
			if a.Class != tt.want || a.Committed || w.Body.Len() != 0 {
				t.Errorf("Execute = class %v, committed %v, wrote %q; want %v, nothing written", a.Class, a.Committed, w.Body, tt.want)
			}
		})
	}
}

func TestAnthropicTokenAuthAddsTheOAuthBetaOnce(t *testing.T) {
	for _, tc := range []struct{ caller, want []string }{
		{nil, []string{"oauth-2025-04-20"}},
		{[]string{"claude-code-20250219"}, []string{"claude-code-20250219,oauth-2025-04-20"}},
		{[]string{"a, oauth-2025-04-20"}, []string{"a, oauth-2025-04-20"}},
	} {
		caller := http.Header{}
		if tc.caller != nil {
			caller["Anthropic-Beta"] = slices.Clone(tc.caller)
		}
		h := http.Header{}
		anthropicTokenAuth(h, caller, "tok")
		if got := h["Anthropic-Beta"]; !slices.Equal(got, tc.want) || h.Get("Authorization") != "Bearer tok" || h.Get("X-Api-Key") != "" {
			t.Errorf("caller betas %q: sent %v", tc.caller, h)
		}
		if tc.caller != nil && !slices.Equal(caller["Anthropic-Beta"], tc.caller) {
			t.Errorf("the caller's header changed: %v", caller)
		}
	}
}
