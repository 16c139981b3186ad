package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/sluicehq/sluice/internal/importer"
	"github.com/sluicehq/sluice/internal/simulator"
)

// startImported starts a gateway on an imported catalog, with env as its
// environment.
func startImported(t *testing.T, catalog []byte, env map[string]string) *app.Gateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(path, catalog, 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := app.Start(t.Context(), app.Options{
		ConfigPath: path, Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
		DatabaseURL: "sqlite://" + filepath.Join(dir, "sluice.db"),
		Log:         slog.New(slog.DiscardHandler),
		LookupEnv:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, catalog)
	}
	t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return gw
}

// callImported sends one request for alias in the form its protocol takes and
// returns the status and body.
func callImported(ctx context.Context, gw *app.Gateway, key, alias, protocol string) (int, string, error) {
	path, body := "/v1/chat/completions", fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}`, alias)
	switch protocol {
	case "openai.embeddings":
		path, body = "/v1/embeddings", fmt.Sprintf(`{"model": %q, "input": "hi"}`, alias)
	case "gemini.embed":
		path, body = "/v1beta/models/"+alias+":embedContent", `{"content": {"parts": [{"text": "hi"}]}}`
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+gw.Addr()+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestImportedLiteLLMServesEveryAlias imports the LiteLLM fixture, points
// its endpoints at the simulator and calls every alias with a new key:
// each answers, on a credential the import gave its deployments.
func TestImportedLiteLLMServesEveryAlias(t *testing.T) {
	dir := "../importer/testdata/litellm/"
	var files [3][]byte
	for i, name := range []string{"config.yaml", "keys.json", "teams.json"} {
		b, err := os.ReadFile(dir + name)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = b
	}
	res, err := importer.LiteLLM(files[0], files[1], files[2])
	if err != nil {
		t.Fatal(err)
	}
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	// Every endpoint on the simulator; every variable the report lists
	// set to a secret of its own.
	doc := regexp.MustCompile(`(?m)^(\s*base_url: ).*$`).ReplaceAll(res.Catalog, []byte("${1}"+srv.URL))
	env := map[string]string{}
	for _, s := range res.Report.Secrets {
		env[s.Env] = "secret-of-" + s.Env
	}
	c, err := config.Load(doc, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("imported catalog: %v\n%s", err, doc)
	}
	gw := startImported(t, doc, env)
	for _, m := range c.Models {
		before := len(sim.Requests())
		status, body, err := callImported(t.Context(), gw, "secret-of-SLUICE_KEY_BATCH_JOBS", m.Alias, m.Protocol)
		if err != nil || status != http.StatusOK {
			t.Errorf("alias %s: %d %v %s", m.Alias, status, err, body)
			continue
		}
		recs := sim.Requests()[before:]
		if len(recs) != 1 {
			t.Errorf("alias %s: the simulator got %d requests, want 1", m.Alias, len(recs))
			continue
		}
		var keys []string
		for _, cr := range c.Credentials {
			if slices.Contains(cr.Models, m.Deployments[0].Model) {
				keys = append(keys, "secret-of-"+cr.SecretEnv)
			}
		}
		if !slices.Contains(keys, recs[0].Key) {
			t.Errorf("alias %s reached the upstream with a key of none of its tier-0 credentials", m.Alias)
		}
	}
}

// TestImportedLiteLLMKeepsRoutingAndLimits is the round trip of intent: a
// LiteLLM config with two deployments per model, each with its own key
// and rpm, imported, uses both deployments of each model and holds each
// deployment's rpm, as LiteLLM counts them: per deployment.
func TestImportedLiteLLMKeepsRoutingAndLimits(t *testing.T) {
	simA, simB := simulator.New(simulator.Options{}), simulator.New(simulator.Options{})
	srvA, srvB := httptest.NewServer(simA), httptest.NewServer(simB)
	t.Cleanup(func() { simA.Close(); simB.Close(); srvA.Close(); srvB.Close() })
	source := fmt.Sprintf(`model_list:
  - {model_name: chat, litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: os.environ/KEY_A, rpm: 3}}
  - {model_name: chat, litellm_params: {model: openai/gpt-4o-mini, api_base: %[2]s/v1, api_key: os.environ/KEY_B, rpm: 3}}
  - {model_name: big, litellm_params: {model: openai/gpt-4o, api_base: %[1]s/v1, api_key: os.environ/KEY_A, rpm: 2}}
  - {model_name: big, litellm_params: {model: openai/gpt-4o, api_base: %[2]s/v1, api_key: os.environ/KEY_B, rpm: 2}}
`, srvA.URL, srvB.URL)
	keys := `{"keys": [{"token": "0123456789abcdef", "key_alias": "app", "models": ["chat", "big"]}]}`
	res, err := importer.LiteLLM([]byte(source), []byte(keys), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KEY_A": "secret-a", "KEY_B": "secret-b", "SLUICE_KEY_APP": "secret-app"}
	for _, s := range res.Report.Secrets {
		if env[s.Env] == "" {
			t.Fatalf("the report lists %s, which this test does not set", s.Env)
		}
	}
	gw := startImported(t, res.Catalog, env)

	for alias, perDeployment := range map[string]int{"chat": 3, "big": 2} {
		for range 2 * perDeployment {
			if status, body, err := callImported(t.Context(), gw, "secret-app", alias, ""); err != nil || status != http.StatusOK {
				t.Fatalf("%s: %d %v %s", alias, status, err, body)
			}
		}
		// One more than both deployments allow in a minute waits rather
		// than reach either upstream.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		status, _, err := callImported(ctx, gw, "secret-app", alias, "")
		cancel()
		if err == nil && status == http.StatusOK {
			t.Errorf("%s: a request past both deployments' rpm was served", alias)
		}
	}
	for _, sim := range []struct {
		name string
		sim  *simulator.Simulator
		key  string
	}{{"A", simA, "secret-a"}, {"B", simB, "secret-b"}} {
		models := map[string]int{}
		for _, r := range sim.sim.Requests() {
			if r.Key != sim.key {
				t.Errorf("simulator %s got a request with another key", sim.name)
			}
			models[r.Model]++
		}
		if models["gpt-4o-mini"] != 3 || models["gpt-4o"] != 2 || len(models) != 2 {
			t.Errorf("simulator %s served %v, want each deployment up to its rpm: gpt-4o-mini 3, gpt-4o 2", sim.name, models)
		}
	}
}

// TestImportCommand runs `sluice import litellm` on the fixture: it writes
// the catalog and the report, prints the report, and names the file and
// field of malformed input.
func TestImportCommand(t *testing.T) {
	dir, fixtures := t.TempDir(), "../importer/testdata/litellm/"
	catalog, report := filepath.Join(dir, "catalog.yaml"), filepath.Join(dir, "report.md")
	var stdout, stderr strings.Builder
	code := app.Run(t.Context(), []string{"import", "litellm", fixtures + "config.yaml", "--keys", fixtures + "keys.json",
		"--teams", fixtures + "teams.json", "-o", catalog, "--report", report}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	written, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), string(written)) || !strings.Contains(string(written), "## Not mapped") {
		t.Errorf("the printed report and the report file differ, or the report is empty:\n%s", written)
	}
	if _, err := os.Stat(catalog); err != nil {
		t.Errorf("no catalog written: %v", err)
	}

	bad := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(bad, []byte(`{"keys": [{"token": "t", "tpm_limit": "many"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	code = app.Run(t.Context(), []string{"import", "litellm", fixtures + "config.yaml", "--keys", bad, "-o", catalog}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), bad+": keys[0].tpm_limit: must be a number") {
		t.Errorf("malformed keys: exit %d, %q", code, stderr.String())
	}
	if code := app.Run(t.Context(), []string{"import", "nonesuch", "x.yaml", "-o", catalog}, &stdout, &stderr); code != 2 {
		t.Errorf("an unknown source: exit %d, want 2 (usage)", code)
	}
	if code := app.Run(t.Context(), []string{"import", "litellm", fixtures + "config.yaml", "--tokens", "t.json", "-o", catalog}, &stdout, &stderr); code != 2 {
		t.Errorf("a new-api flag on a LiteLLM import: exit %d, want 2 (usage)", code)
	}
}

// TestImportedNewAPIServesEveryAlias runs `sluice import new-api` on the
// fixture, which writes the channels' keys to secret files, points every
// endpoint at the simulator and calls every alias with an imported token,
// whose secret is the one new-api had.
func TestImportedNewAPIServesEveryAlias(t *testing.T) {
	dir, fixtures := t.TempDir(), "../importer/testdata/newapi/"
	catalogPath := filepath.Join(dir, "catalog.yaml")
	var stdout, stderr strings.Builder
	if code := app.Run(t.Context(), []string{"import", "new-api", fixtures + "channels.json", "--tokens", fixtures + "tokens.json",
		"-o", catalogPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	info, err := os.Stat(filepath.Join(dir, "secrets", "ch1-key1"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", info, err)
	}
	doc, err := os.ReadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	doc = regexp.MustCompile(`(?m)^(\s*base_url: ).*$`).ReplaceAll(doc, []byte("${1}"+srv.URL))
	c, err := config.Load(doc, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("imported catalog: %v\n%s", err, doc)
	}
	// A key of no pool, to reach the aliases no imported token may call
	// (keys is the catalog's last section).
	doc = append(doc, "  - {id: every-alias, secret_env: EVERY_ALIAS_KEY}\n"...)
	gw := startImported(t, doc, map[string]string{"EVERY_ALIAS_KEY": "sk-every-alias-for-tests"})
	for _, m := range c.Models {
		before := len(sim.Requests())
		status, body, err := callImported(t.Context(), gw, "sk-every-alias-for-tests", m.Alias, m.Protocol)
		if err != nil || status != http.StatusOK {
			t.Errorf("alias %s: %d %v %s", m.Alias, status, err, body)
			continue
		}
		if got := len(sim.Requests()) - before; got != 1 {
			t.Errorf("alias %s: the simulator got %d requests, want 1", m.Alias, got)
		}
	}
	// The tokens keep their secrets: callers change only the base URL.
	if status, body, err := callImported(t.Context(), gw, "sk-Fx7tokenWebAbcdefghijklmnop0123456789", "gpt-4o", ""); err != nil || status != http.StatusOK {
		t.Errorf("token web on gpt-4o: %d %v %s", status, err, body)
	}
	if status, _, _ := callImported(t.Context(), gw, "sk-Fx7tokenWebAbcdefghijklmnop0123456789", "qwen-max", ""); status == http.StatusOK {
		t.Error("token web called qwen-max, outside its model limits")
	}
}
