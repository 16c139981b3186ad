package simulator

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A client of RequireClientSecret refreshes only with its secret, and its
// refresh token is not rotated, as at Google's token endpoint.
func TestTokenEndpointRequiresTheClientSecret(t *testing.T) {
	sim := New(Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.RequireClientSecret("cli-client", "cli-secret")
	rt := sim.NewRefreshToken(Behavior{}, time.Hour)
	refresh := func(secret string) (int, map[string]any) {
		t.Helper()
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"cli-client"}}
		if secret != "" {
			form.Set("client_secret", secret)
		}
		resp, err := http.PostForm(srv.URL+OAuthTokenPath, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if status, got := refresh(""); status != 400 || got["error"] != "invalid_request" {
		t.Errorf("without the secret: %d %v, want 400 invalid_request", status, got)
	}
	if status, got := refresh("other"); status != 401 || got["error"] != "invalid_client" {
		t.Errorf("another secret: %d %v, want 401 invalid_client", status, got)
	}
	for range 2 {
		status, got := refresh("cli-secret")
		if status != 200 || got["access_token"] == nil || got["refresh_token"] != nil {
			t.Fatalf("with the secret: %d %v, want an access token and no new refresh token", status, got)
		}
	}
}

// Code Assist: the bearer check, the Gemini request in its envelope, and
// the answers and stream events in theirs; a count's answer as Gemini's.
func TestCodeAssistRoutes(t *testing.T) {
	sim := New(Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.SetKey("ya29.test", Behavior{})
	post := func(method, token, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1internal:"+method, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	const gen = `{"model":"gemini-2.5-flash","project":"p-1","request":{"contents":[{"role":"user","parts":[{"text":"hello there"}]}]}}`
	for _, tt := range []struct {
		name, method, token, body string
		status                    int
		has                       string
	}{
		{"no token", "generateContent", "", gen, 401, `"UNAUTHENTICATED"`},
		{"unknown token", "generateContent", "ya29.other", gen, 401, `"UNAUTHENTICATED"`},
		{"unknown method", "embedContent", "ya29.test", gen, 404, `"NOT_FOUND"`},
		{"not wrapped", "generateContent", "ya29.test", `{"contents":[{"parts":[{"text":"hi"}]}]}`, 400, `"INVALID_ARGUMENT"`},
		{"no project", "generateContent", "ya29.test", strings.Replace(gen, `"p-1"`, `""`, 1), 400, "project is required"},
		{"whole", "generateContent", "ya29.test", gen, 200, `{"response":{"candidates":`},
		{"count", "countTokens", "ya29.test", `{"request":{"model":"models/gemini-2.5-flash","contents":[{"parts":[{"text":"hello there"}]}]}}`, 200, `{"totalTokens":`},
	} {
		status, _, body := post(tt.method, tt.token, tt.body)
		if status != tt.status || !strings.Contains(body, tt.has) {
			t.Errorf("%s: %d %s, want %d with %s", tt.name, status, body, tt.status, tt.has)
		}
	}
	_, _, whole := post("generateContent", "ya29.test", gen)
	var answer struct {
		Response struct {
			UsageMetadata struct{ PromptTokenCount int }
		}
		TraceID string
	}
	if err := json.Unmarshal([]byte(whole), &answer); err != nil || answer.Response.UsageMetadata.PromptTokenCount == 0 || answer.TraceID == "" {
		t.Errorf("whole answer %s: %v", whole, err)
	}

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1internal:streamGenerateContent?alt=sse", strings.NewReader(gen))
	req.Header.Set("Authorization", "Bearer ya29.test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	events := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		events++
		var ev struct {
			Response *struct{ Candidates []json.RawMessage }
			TraceID  string
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Response == nil || len(ev.Response.Candidates) == 0 || ev.TraceID == "" {
			t.Errorf("stream event %s: %v", data, err)
		}
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || events < 2 {
		t.Errorf("stream: %d %s, %d events:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), events, b)
	}
	if r := sim.HostedRequests(); len(r) == 0 || r[len(r)-1].Path != "/v1internal:streamGenerateContent" || r[len(r)-1].Query != "alt=sse" {
		t.Errorf("hosted requests: %+v", r)
	}
}
