package app_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/simulator"
)

// TestImportedCLIProxyAPIServesEveryAlias runs `sluice import cliproxyapi`
// on the fixture's config.yaml and auth folder, points every endpoint and
// token endpoint at the simulator, gives each login a refresh token the
// simulator issued (as the provider would have), and calls every alias
// with a client key of the source: each answers, the logins' aliases with
// an access token the gateway obtained by refreshing (the Codex logins'
// on the simulator's ChatGPT backend, with their account's id; the Gemini
// CLI logins' with Gemini CLI's client secret, which the simulator's token
// endpoint is told to require, as Google's does).
func TestImportedCLIProxyAPIServesEveryAlias(t *testing.T) {
	dir, fixtures := t.TempDir(), "../importer/testdata/cliproxyapi/"
	catalogPath := filepath.Join(dir, "catalog.yaml")
	var stdout, stderr strings.Builder
	if code := app.Run(t.Context(), []string{"import", "cliproxyapi", fixtures + "config.yaml", fixtures + "auth", "-o", catalogPath},
		&stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, name := range []string{"key-client-1", "claude-1", "claude-bob-example.com-refresh-token"} {
		info, err := os.Stat(filepath.Join(dir, "secrets", name))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("secret file %s: %v %v", name, info, err)
		}
	}
	doc, err := os.ReadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "FAKE") || strings.Contains(stdout.String(), "FAKE") {
		t.Fatalf("a secret of the source is in the catalog or the report")
	}
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	// Every upstream at the simulator; the ChatGPT backend under its path.
	doc = regexp.MustCompile(`(?m)^(\s*base_url: )\S*?(/backend-api/codex)?$`).ReplaceAll(doc, []byte("${1}"+srv.URL+"${2}"))
	doc = regexp.MustCompile(`token_url: '[^']*'`).ReplaceAll(doc, []byte("token_url: '"+srv.URL+"/oauth/token'"))
	env := map[string]string{"SLUICE_SECRET_KEY": "c2x1aWNlLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmctISE="}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := config.Load(doc, lookup)
	if err != nil {
		t.Fatalf("imported catalog: %v\n%s", err, doc)
	}
	logins := 0
	for _, cr := range c.Credentials {
		if !cr.OAuth.Set() {
			continue
		}
		logins++
		if err := os.WriteFile(cr.OAuth.RefreshTokenFile, []byte(sim.NewRefreshToken(simulator.Behavior{}, time.Hour)), 0o600); err != nil {
			t.Fatal(err)
		}
		if cr.OAuth.HasClientSecret() {
			secret, err := cr.OAuth.ClientSecret(lookup)
			if err != nil {
				t.Fatal(err)
			}
			sim.RequireClientSecret(cr.OAuth.ClientID, secret)
		}
	}
	if logins != 10 {
		t.Fatalf("%d oauth credentials imported, want 10 (alice's two logins, bob's, heidi's Qwen login, dave's, erin's and olga's Codex logins, frank's Gemini CLI login and grace's in 2 projects)", logins)
	}
	gw := startImported(t, doc, env)
	// The logins serve once their first tokens are in, which the token
	// manager obtains in the background after the start: these aliases
	// have no other credential.
	for _, alias := range []string{"bob/sonnet", "qwen3-coder-plus", "g5", "gemini-3-pro-preview"} {
		eventually(t, 10*time.Second, "a first token for "+alias, func() bool {
			status, _, _ := callImported(t.Context(), gw, "sk-cpa-FAKE-ci-8d2e4f6a0b1c", alias, "")
			return status == http.StatusOK
		})
	}
	for _, m := range c.Models {
		before := len(sim.Requests())
		status, body, err := callImported(t.Context(), gw, "sk-cpa-FAKE-ci-8d2e4f6a0b1c", m.Alias, m.Protocol)
		if err != nil || status != http.StatusOK {
			t.Errorf("alias %s: %d %v %s", m.Alias, status, err, body)
			continue
		}
		if got := len(sim.Requests()) - before; got != 1 {
			t.Errorf("alias %s: the simulator got %d requests, want 1", m.Alias, got)
		}
	}
	// A login's alias reached the provider with an access token the
	// gateway obtained, not with anything of the source.
	before := len(sim.Requests())
	if status, body, err := callImported(t.Context(), gw, "sk-cpa-FAKE-laptop-3f9a1c7e5b2d", "bob/sonnet", ""); err != nil || status != http.StatusOK {
		t.Fatalf("bob/sonnet: %d %v %s", status, err, body)
	}
	r := sim.Requests()[before]
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sim-oat-") || r.Model != "claude-sonnet-4-5-20250929" {
		t.Errorf("bob/sonnet reached the upstream as %s with Authorization %q, want claude-sonnet-4-5-20250929 with a refreshed access token", r.Model, r.Header.Get("Authorization"))
	}
	// A Codex login's alias reached the ChatGPT backend the same way, with
	// its account's id (the team's, or olga's from her id token).
	before = len(sim.Requests())
	if status, body, err := callImported(t.Context(), gw, "sk-cpa-FAKE-laptop-3f9a1c7e5b2d", "g5", ""); err != nil || status != http.StatusOK {
		t.Fatalf("g5: %d %v %s", status, err, body)
	}
	r = sim.Requests()[before]
	if r.Path != "/backend-api/codex/responses" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sim-oat-") ||
		!slices.Contains([]string{"acct-team-9f8e", "acct-olga-5c2d"}, r.Header.Get("Chatgpt-Account-Id")) || r.Model != "gpt-5" {
		t.Errorf("g5 reached the upstream at %s as %s with Authorization %q and account %q, want gpt-5 on the ChatGPT backend with a refreshed access token and a login's account",
			r.Path, r.Model, r.Header.Get("Authorization"), r.Header.Get("Chatgpt-Account-Id"))
	}
	// A Gemini CLI login's alias reached Code Assist in its envelope, with
	// a refreshed access token.
	if status, body, err := callImported(t.Context(), gw, "sk-cpa-FAKE-laptop-3f9a1c7e5b2d", "gemini-3-pro-preview", ""); err != nil || status != http.StatusOK {
		t.Fatalf("gemini-3-pro-preview: %d %v %s", status, err, body)
	}
	hosted := sim.HostedRequests()
	h := hosted[len(hosted)-1]
	if h.Path != "/v1internal:generateContent" || !strings.HasPrefix(h.Header.Get("Authorization"), "Bearer sim-oat-") ||
		!strings.Contains(string(h.Body), `"model":"gemini-3-pro-preview","project":"proj-`) {
		t.Errorf("gemini-3-pro-preview reached %s with Authorization %q and body %s, want Code Assist with a refreshed access token", h.Path, h.Header.Get("Authorization"), h.Body)
	}
	// Every login gets its first token, in the background: some of them
	// (three Codex logins serve g5) were not needed above.
	eventually(t, 10*time.Second, "a refresh per login", func() bool { return sim.Refreshes() >= logins })
}

// TestImportCLIProxyAPICommandErrors checks that a malformed auth file is
// named with its folder, and that the auth folder and new-api's flags are
// usage errors where they do not belong.
func TestImportCLIProxyAPICommandErrors(t *testing.T) {
	dir, fixtures := t.TempDir(), "../importer/testdata/cliproxyapi/"
	auth := filepath.Join(dir, "auth")
	if err := os.Mkdir(auth, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(auth, "bad.json"), []byte(`{"type": "claude", "email": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	catalog := filepath.Join(dir, "catalog.yaml")
	var stdout, stderr strings.Builder
	code := app.Run(t.Context(), []string{"import", "cliproxyapi", fixtures + "config.yaml", auth, "-o", catalog}, &stdout, &stderr)
	if want := auth + ": auth/bad.json.email: must be a string"; code != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("malformed auth file: exit %d, %q; want 1 and %q", code, stderr.String(), want)
	}
	for _, args := range [][]string{
		{"import", "litellm", fixtures + "config.yaml", auth, "-o", catalog},
		{"import", "cliproxyapi", fixtures + "config.yaml", auth, "extra", "-o", catalog},
		{"import", "cliproxyapi", fixtures + "config.yaml", "--tokens", "t.json", "-o", catalog},
	} {
		if code := app.Run(t.Context(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
}
