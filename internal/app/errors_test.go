package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// envelope is the OpenAI error body every refusal must use.
type envelope struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

func TestErrorCodes(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name   string
		path   string
		key    string
		body   string
		setup  func()
		status int
		code   sluice.Code
	}{
		{name: "missing key", path: "/v1/chat/completions", body: chatBody, status: 401, code: sluice.CodeNoCredentials},
		{name: "unknown key", path: "/v1/chat/completions", key: "sk-sluice-unknown", body: chatBody, status: 401, code: sluice.CodeNoCredentials},
		{name: "malformed JSON", path: "/v1/chat/completions", key: keyWeb, body: `{"model":"fast",`, status: 400, code: sluice.CodeInvalidRequest},
		{name: "no model", path: "/v1/chat/completions", key: keyWeb, body: `{"messages":[]}`, status: 400, code: sluice.CodeInvalidRequest},
		{name: "body over the limit", path: "/v1/chat/completions", key: keyWeb, body: `{"model":"fast","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, status: 413, code: sluice.CodeRequestTooLarge},
		{name: "unknown model", path: "/v1/chat/completions", key: keyWeb, body: `{"model":"nope","messages":[]}`, status: 404, code: sluice.CodeModelNotFound},
		{name: "embedding alias on chat", path: "/v1/chat/completions", key: keyWeb, body: `{"model":"embed","messages":[]}`, status: 404, code: sluice.CodeModelNotFound},
		{name: "model outside the key's scope", path: "/v1/chat/completions", key: keyScoped, body: `{"model":"only-a","messages":[]}`, status: 403, code: sluice.CodeScopeDenied},
		{name: "unknown path", path: "/v1/nothing", key: keyWeb, body: `{}`, status: 404, code: sluice.CodeNotFound},
		{name: "every upstream down", path: "/v1/chat/completions", key: keyWeb, body: chatBody, status: 503, code: sluice.CodeNoUpstreamAvailable,
			setup: func() { h.failAll(simulator.Behavior{FailStatus: 502}) }},
		{name: "every upstream too slow", path: "/v1/chat/completions", key: keyWeb, body: chatBody, status: 504, code: sluice.CodeUpstreamTimeout,
			setup: func() { h.failAll(simulator.Behavior{Latency: 2e9}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.failAll(simulator.Behavior{})
			if tt.setup != nil {
				tt.setup()
			}
			status, hdr, body := h.post(t.Context(), tt.path, tt.key, tt.body)
			var e envelope
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("body %q is not an OpenAI error envelope: %v", body, err)
			}
			if status != tt.status || e.Error.Code != string(tt.code) || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("%s = %d %+v, want %d with code %s", tt.name, status, e.Error, tt.status, tt.code)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
		})
	}
	h.failAll(simulator.Behavior{})
	// A path served for another method is a 405, any other a 404.
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/v1/chat/completions", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/v1/embeddings", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/models", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/v1beta/models/gemini-2.5-flash:generateContent", http.StatusMethodNotAllowed},
		{http.MethodPatch, "/v1/responses/resp_1", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/chat/completion", http.StatusNotFound},
		{http.MethodPost, "/v1beta/models/a/b", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, h.url(tc.path), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
}

// failAll gives every upstream credential the same behaviour.
func (h *harness) failAll(b simulator.Behavior) {
	h.simA.SetKey(secretA1, b)
	h.simA.SetKey(secretA2, b)
	h.simB.SetKey(secretB1, b)
}

func TestUpstreamRequestErrorPassesThroughWithoutFailover(t *testing.T) {
	h := newHarness(t)
	h.simA.SetKey(secretA1, simulator.Behavior{FailStatus: 400, FailBody: `{"error":{"message":"context_length_exceeded: too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`})
	h.simA.SetKey(secretA2, simulator.Behavior{FailStatus: 400, FailBody: `{"error":{"message":"context_length_exceeded: too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`})
	status, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
	if status != 400 || !strings.Contains(body, "context_length_exceeded") {
		t.Errorf("answer = %d %s, want the upstream's 400 as is", status, body)
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 1 {
		t.Errorf("upstream calls = %d, want 1 (a bad request is not retried)", n)
	}
}

// TestRateLimitedEverywhereWaitsThenTimesOut: every credential answers 429
// with a long Retry-After, so every unit cools; the request waits instead of
// hammering them, and gets capacity_wait_timeout with a Retry-After when the
// wait deadline passes. Each credential was called exactly once.
func TestRateLimitedEverywhereWaitsThenTimesOut(t *testing.T) {
	h := newHarness(t)
	h.failAll(simulator.Behavior{FailStatus: 429, RetryAfter: 7e9})
	status, hdr, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
	var e envelope
	json.Unmarshal([]byte(body), &e)
	if status != 429 || e.Error.Code != string(sluice.CodeCapacityWaitTimeout) || hdr.Get("Retry-After") == "" {
		t.Errorf("answer = %d (Retry-After %q) %s, want 429 capacity_wait_timeout with a Retry-After", status, hdr.Get("Retry-After"), body)
	}
	for _, k := range []string{secretA1, secretA2} {
		if n := h.simA.Count(k); n != 1 {
			t.Errorf("calls on a cooled credential = %d, want 1", n)
		}
	}
	if n := h.simB.Count(secretB1); n != 1 {
		t.Errorf("calls on cred-b1 = %d, want 1", n)
	}
}
