package simulator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestOAuthTokenEndpointRotatesAndIssuesKeys(t *testing.T) {
	sim := New(Options{RejectUnknownKeys: true})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	rt := sim.NewRefreshToken(Behavior{}, time.Hour)

	refresh := func(token string) (int, map[string]any) {
		t.Helper()
		resp, err := http.PostForm(srv.URL+OAuthTokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {"c"}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	status, got := refresh(rt)
	access, _ := got["access_token"].(string)
	next, _ := got["refresh_token"].(string)
	if status != 200 || access == "" || next == "" || next == rt || got["expires_in"] != 3600.0 || got["token_type"] != "Bearer" {
		t.Fatalf("refresh = %d %v", status, got)
	}
	if status, got := refresh(rt); status != 400 || got["error"] != "invalid_grant" {
		t.Errorf("a spent refresh token = %d %v, want 400 invalid_grant", status, got)
	}
	if status, got := refresh("unknown"); status != 400 || got["error"] != "invalid_grant" {
		t.Errorf("an unknown refresh token = %d %v, want 400 invalid_grant", status, got)
	}
	if n := sim.Refreshes(); n != 1 {
		t.Errorf("Refreshes() = %d, want 1", n)
	}
	sim.FailTokenEndpoint(503)
	if status, _ := refresh(next); status != 503 {
		t.Errorf("a failing token endpoint answered %d", status)
	}
	sim.FailTokenEndpoint(0)

	call := func(path, body string, header http.Header) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	messages := `{"model":"claude-haiku-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	bearer := http.Header{"Authorization": {"Bearer " + access}, "Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
	if s := call("/v1/chat/completions", chat, bearer); s != 200 {
		t.Errorf("chat with the access token = %d, want 200", s)
	}
	if s := call("/v1/messages", messages, bearer); s != 401 {
		t.Errorf("Messages with the access token and no oauth beta = %d, want 401", s)
	}
	withBeta := bearer.Clone()
	withBeta.Set("Anthropic-Beta", "claude-code-20250219,"+oauthBeta)
	if s := call("/v1/messages", messages, withBeta); s != 200 {
		t.Errorf("Messages with the access token and the oauth beta = %d, want 200", s)
	}
	sim.RevokeAccessToken(access)
	if s := call("/v1/chat/completions", chat, bearer); s != 401 {
		t.Errorf("chat with a revoked access token = %d, want 401", s)
	}
}
