package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// oauthCatalog serves every request kind through an oauth credential
// (cred-oauth, on sim) with static headers: chat, Messages and count_tokens,
// Responses, video jobs. "fast" falls back to a static credential with
// static headers of its own (cred-static, on other).
const oauthCatalog = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  secret_key_file: %[1]s/secret-key
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
  jobs: {poll_interval: 10ms}
database: {url: "sqlite://%[1]s/sluice.db"}
endpoints:
  - {id: sim, base_url: %[2]s, protocols: [openai.chat, anthropic.messages, openai.responses, openai.videos]}
  - {id: other, base_url: %[3]s, protocols: [openai.chat]}
credentials:
  - id: cred-oauth
    oauth: {token_url: %[2]s/oauth/token, client_id: sluice-test, refresh_token_file: %[1]s/refresh-token}
    headers: {chatgpt-account-id: acct-HEADER-7c1d, X-Trace-Mark: mark-HEADER-2b9e}
    endpoints: [sim]
  - id: cred-static
    secret_env: UP_B1
    headers: {X-Trace-Mark: static-HEADER-4f0a}
    endpoints: [other]
models:
  - alias: fast
    deployments:
      - {model: gpt-4o-mini, endpoints: [sim], priority: 0}
      - {model: gpt-4o-mini, endpoints: [other], priority: 1}
  - alias: claude
    protocol: anthropic.messages
    deployments: [{model: claude-haiku-4-5, endpoints: [sim]}]
  - alias: codex
    protocol: openai.responses
    deployments: [{model: gpt-5-codex, endpoints: [sim]}]
  - alias: sora
    protocol: openai.videos
    deployments: [{model: sora-2, endpoints: [sim]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// oauthGateway is a gateway whose cred-oauth trades refreshToken(sim) at
// sim's token endpoint.
type oauthGateway struct {
	*harness
	sim, other *simulator.Simulator
}

func startOAuthGateway(t *testing.T, refreshToken func(sim *simulator.Simulator) string, opts ...func(*app.Options)) *oauthGateway {
	t.Helper()
	return startOAuthGatewayWith(t, refreshToken, "", opts...)
}

// startOAuthGatewayWith is startOAuthGateway with more top-level sections
// (YAML) at the end of its catalog. opts change the gateway's options.
func startOAuthGatewayWith(t *testing.T, refreshToken func(sim *simulator.Simulator) string, more string, opts ...func(*app.Options)) *oauthGateway {
	t.Helper()
	g := &oauthGateway{harness: &harness{t: t, logs: &syncBuffer{}}, sim: simulator.New(simulator.Options{}), other: simulator.New(simulator.Options{})}
	srv, otherSrv := httptest.NewServer(g.sim), httptest.NewServer(g.other)
	t.Cleanup(func() { g.sim.Close(); g.other.Close(); srv.Close(); otherSrv.Close() })
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"secret-key":    testSecretKey,
		"refresh-token": refreshToken(g.sim) + "\n",
		"catalog.yaml":  fmt.Sprintf(oauthCatalog, dir, srv.URL, otherSrv.URL) + more,
	})
	g.cfgPath = filepath.Join(dir, "catalog.yaml")
	g.startGateway(opts...)
	t.Cleanup(g.noSecretsLeaked)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", g.logs.String())
		}
	})
	return g
}

// noSecretsLeaked checks the logs, the metrics and the admin views for
// the simulator's tokens and the static headers' values.
func (g *oauthGateway) noSecretsLeaked() {
	_, metrics := g.adminGet("/metrics")
	_, status := g.adminGet("/admin/status")
	_, creds := g.adminGet("/admin/credentials")
	secret := regexp.MustCompile(`sim-o(a|r)t-[0-9a-f]+|[a-z]+-HEADER-[0-9a-f]{4}`)
	for what, text := range map[string]string{"logs": g.logs.String(), "metrics": metrics, "admin status": status, "admin credentials": creds} {
		if s := secret.FindString(text); s != "" {
			g.t.Errorf("the %s hold a secret: %s", what, s)
		}
	}
}

// last is the last request sim received on path.
func last(t *testing.T, sim *simulator.Simulator, path string) simulator.Recorded {
	t.Helper()
	reqs := sim.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == path {
			return reqs[i]
		}
	}
	t.Fatalf("the simulator got no request on %s", path)
	return simulator.Recorded{}
}

func TestOAuthCredentialServesEveryRequestKindWithItsHeaders(t *testing.T) {
	g := startOAuthGateway(t, func(sim *simulator.Simulator) string { return sim.NewRefreshToken(simulator.Behavior{}, time.Hour) })
	eventually(t, 5*time.Second, "the first access token", func() bool { return g.sim.Refreshes() == 1 })

	checkOAuth := func(r simulator.Recorded) string {
		t.Helper()
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !strings.HasPrefix(token, "sim-oat-") || r.Header.Get("X-Api-Key") != "" {
			t.Errorf("%s: Authorization %q, x-api-key %q; want the access token as a bearer token", r.Path, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
		}
		if r.Header.Get("Chatgpt-Account-Id") != "acct-HEADER-7c1d" || r.Header.Get("X-Trace-Mark") != "mark-HEADER-2b9e" {
			t.Errorf("%s: static headers missing: %v", r.Path, r.Header)
		}
		return token
	}
	// The simulator counts the refresh before the gateway holds the token,
	// and until it does chat falls back to cred-static: send until cred-oauth
	// serves.
	eventually(t, 5*time.Second, "chat served by cred-oauth", func() bool {
		if code, _, body := g.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
			t.Fatalf("chat = %d %s", code, body)
		}
		return len(g.sim.Requests()) > 0
	})
	first := checkOAuth(last(t, g.sim, "/v1/chat/completions"))

	messages := func(path string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, g.url(path), strings.NewReader(`{"model":"claude","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header = http.Header{"X-Api-Key": {keyWeb}, "Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"claude-code-20250219"}, "Content-Type": {"application/json"}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s = %d", path, resp.StatusCode)
		}
		r := last(t, g.sim, path)
		checkOAuth(r)
		if beta := r.Header.Get("Anthropic-Beta"); beta != "claude-code-20250219,oauth-2025-04-20" {
			t.Errorf("%s: anthropic-beta %q, want the caller's and the oauth flag", path, beta)
		}
	}
	messages("/v1/messages")
	messages("/v1/messages/count_tokens")

	if code, _, body := g.post(t.Context(), "/v1/responses", keyWeb, `{"model":"codex","input":"hi"}`); code != 200 {
		t.Fatalf("responses = %d %s", code, body)
	}
	checkOAuth(last(t, g.sim, "/v1/responses"))

	var v struct{ ID string }
	if code, body := call(t, "POST", g.url("/v1/videos"), "Bearer "+keyWeb, videoBody, &v); code != 200 {
		t.Fatalf("video submit = %d %s", code, body)
	}
	checkOAuth(last(t, g.sim, "/v1/videos"))
	time.Sleep(20 * time.Millisecond) // past poll_interval: the poll goes upstream
	if code, body := call(t, "GET", g.url("/v1/videos/"+v.ID), "Bearer "+keyWeb, "", nil); code != 200 {
		t.Fatalf("video poll = %d %s", code, body)
	}
	polls := 0
	for _, r := range g.sim.Requests() {
		if strings.HasPrefix(r.Path, "/v1/videos/") {
			polls++
			checkOAuth(r)
		}
	}
	if polls == 0 {
		t.Fatal("the poll did not reach the simulator")
	}

	// A 401 to the access token refreshes it once and sends the request again.
	g.sim.RevokeAccessToken(first)
	if code, _, body := g.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
		t.Fatalf("chat after the token was revoked = %d %s", code, body)
	}
	if got := checkOAuth(last(t, g.sim, "/v1/chat/completions")); got == first || g.sim.Refreshes() != 2 {
		t.Errorf("after a 401: token renewed %v, %d refreshes; want a new token from one refresh", got != first, g.sim.Refreshes())
	}
	if _, body := g.adminGet("/admin/credentials/cred-oauth"); !strings.Contains(body, `"active"`) {
		t.Errorf("cred-oauth after a refreshed 401: %s", body)
	}
}

func TestOAuthInvalidGrantDisablesTheCredential(t *testing.T) {
	g := startOAuthGateway(t, func(*simulator.Simulator) string { return "sim-ort-00000000000000000000000000000000" }) // never issued
	eventually(t, 5*time.Second, "cred-oauth disabled", func() bool {
		_, body := g.adminGet("/admin/credentials/cred-oauth")
		return strings.Contains(body, `"disabled"`) && strings.Contains(body, "invalid_grant")
	})
	for range 3 {
		if code, _, body := g.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
			t.Fatalf("chat = %d %s", code, body)
		}
	}
	if n := g.other.Count(testEnv["UP_B1"]); n != 3 {
		t.Errorf("the static credential served %d requests, want 3", n)
	}
	r := last(t, g.other, "/v1/chat/completions")
	if r.Header.Get("Authorization") != "Bearer "+testEnv["UP_B1"] || r.Header.Get("X-Trace-Mark") != "static-HEADER-4f0a" || r.Header.Get("Chatgpt-Account-Id") != "" {
		t.Errorf("the static credential's request: %v", r.Header)
	}
	if reqs := g.sim.Requests(); len(reqs) != 0 {
		t.Errorf("the disabled credential's upstream got %d requests", len(reqs))
	}
}
