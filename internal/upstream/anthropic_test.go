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
)

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
		passOn(h, caller, AnthropicMessages.Pass, &sluice.HeaderRules{}) // as execute does, before the credential
		anthropicTokenAuth(h, caller, "tok")
		if got := h["Anthropic-Beta"]; !slices.Equal(got, tc.want) || h.Get("Authorization") != "Bearer tok" || h.Get("X-Api-Key") != "" {
			t.Errorf("caller betas %q: sent %v", tc.caller, h)
		}
		if tc.caller != nil && !slices.Equal(caller["Anthropic-Beta"], tc.caller) {
			t.Errorf("the caller's header changed: %v", caller)
		}
	}
}
