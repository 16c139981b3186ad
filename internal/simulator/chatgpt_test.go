package simulator_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// codexPost posts body to the ChatGPT backend's path with a bearer key
// and an account ("" sends none).
func codexPost(t *testing.T, srv *httptest.Server, key, account, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if account != "" {
		req.Header.Set("chatgpt-account-id", account)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

func TestChatGPTBackend(t *testing.T) {
	_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{
		"limited": {FailStatus: 429, RetryAfter: 2 * time.Second},
		"owned":   {ChatGPTAccount: "acct-1"},
	}})
	const path = "/backend-api/codex/responses"
	const good = `{"model":"gpt-5","instructions":"","stream":true,"store":false,"input":[{"role":"user","content":"hi"}]}`
	resp, body := codexPost(t, srv, "owned", "acct-1", path, good)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(body), "event: response.completed") {
		t.Errorf("a request the backend takes: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, body := codexPost(t, srv, "k", "acct-9", path+"/compact", `{"model":"gpt-5","input":"hi"}`); resp.StatusCode != 200 {
		t.Errorf("a compaction: %d %s", resp.StatusCode, body)
	}
	tests := []struct {
		name, key, account, body string
		wantStatus               int
		wantDetail               string
	}{
		{"no token", "", "acct-1", good, 401, ""},
		{"no account", "k", "", good, 403, "Missing chatgpt-account-id header"},
		{"another account", "owned", "acct-2", good, 403, "The chatgpt-account-id header does not name the token's account"},
		{"no instructions", "k", "a", `{"model":"gpt-5","stream":true,"store":false,"input":"hi"}`, 400, "Instructions are required"},
		{"an output cap", "k", "a", `{"model":"gpt-5","instructions":"","max_output_tokens":9,"stream":true,"store":false,"input":"hi"}`, 400, "Unsupported parameter: max_output_tokens"},
		{"a system message", "k", "a", `{"model":"gpt-5","instructions":"","stream":true,"store":false,"input":[{"role":"system","content":"s"}]}`, 400, "System messages are not allowed"},
		{"store defaults to true", "k", "a", `{"model":"gpt-5","instructions":"","stream":true,"input":"hi"}`, 400, "Store must be set to false"},
		{"not streamed", "k", "a", `{"model":"gpt-5","instructions":"","store":false,"input":"hi"}`, 400, "Stream must be set to true"},
	}
	for _, tt := range tests {
		resp, body := codexPost(t, srv, tt.key, tt.account, path, tt.body)
		var e struct {
			Detail string `json:"detail"`
		}
		json.Unmarshal(body, &e)
		if resp.StatusCode != tt.wantStatus || e.Detail != tt.wantDetail {
			t.Errorf("%s: %d %s, want %d %q", tt.name, resp.StatusCode, body, tt.wantStatus, tt.wantDetail)
		}
	}

	resp, body = codexPost(t, srv, "limited", "a", path, good)
	var limit struct {
		Error struct {
			Type            string `json:"type"`
			ResetsInSeconds int    `json:"resets_in_seconds"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &limit); err != nil || resp.StatusCode != 429 || limit.Error.Type != "usage_limit_reached" ||
		limit.Error.ResetsInSeconds != 2 || resp.Header.Get("Retry-After") != "" {
		t.Errorf("a usage limit: %d %s, Retry-After %q; want usage_limit_reached resetting in 2s, said in the body alone", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
}
