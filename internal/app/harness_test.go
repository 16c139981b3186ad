package app_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// Upstream secrets and virtual keys of the test catalog. They are made long
// and distinctive so a leak into logs or bodies is easy to find.
const (
	secretA1  = "sk-upstream-a1-SECRET-0f3c9e2d7b5a41"
	secretA2  = "sk-upstream-a2-SECRET-7d1e0b9c4f2a83"
	secretB1  = "sk-upstream-b1-SECRET-5b8a6c3e1d9f27"
	keyWeb    = "sk-sluice-web-KEY-8e4f2a1c9b7d3e5f0a6c"
	keyScoped = "sk-sluice-scoped-KEY-1a3c5e7f9b2d4f6a8c"
)

var testEnv = map[string]string{
	"UP_A1": secretA1, "UP_A2": secretA2, "UP_B1": secretB1,
	"KEY_WEB": keyWeb, "KEY_SCOPED": keyScoped, "ADMIN_TOKEN": "admin-token-for-tests",
	"ADMIN_READ": "admin-read-token-for-tests", "ADMIN_DEPLOY": "admin-deploy-token-for-tests",
	"KEY_CODEX": "sk-sluice-codex-KEY-3b7d1f5a9c2e4a6c8e", "KEY_COMPACT": "sk-sluice-compact-KEY-6f2a8c4e0b1d3f5a7c",
}

// catalogTemplate has two endpoints on two simulators: ep-a (two
// credentials, a fast-opening breaker) is tier 0 of "fast", ep-b is tier 1.
const catalogTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  max_body_bytes: 4096
  wait_timeout: 1s
  timeouts: {connect: 2s, first_byte: 500ms, idle: 500ms, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - id: ep-a
    base_url: %s
    protocols: [openai.chat, openai.embeddings]
    breaker: {failures: 3, open: 300ms}
  - id: ep-b
    base_url: %s
    protocols: [openai.chat, openai.embeddings]
credentials:
  - {id: cred-a1, secret_env: UP_A1, endpoints: [ep-a]}
  - {id: cred-a2, secret_env: UP_A2, endpoints: [ep-a]}
  - {id: cred-b1, secret_env: UP_B1, endpoints: [ep-b]}
models:
  - alias: fast
    deployments:
      - {model: gpt-4o-mini, endpoints: [ep-a], priority: 0}
      - {model: gpt-4o-mini, endpoints: [ep-b], priority: 1}
  - alias: only-a
    deployments:
      - {model: gpt-4o-mini, endpoints: [ep-a]}
  - alias: embed
    protocol: openai.embeddings
    deployments:
      - {model: text-embedding-3-small, endpoints: [ep-a]}
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
  - {id: scoped, tenant: web, secret_env: KEY_SCOPED, models: [fast]}
`

// fastOnEpA is where the smaller catalogs share catalogTemplate's layout,
// from the database section on: endpoints ep-a (on simA) and ep-b (on
// simB) speak openai.chat, credential cred-a1 serves ep-a, and alias fast
// runs gpt-4o-mini there. Further models may follow it.
const fastOnEpA = `database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
  - {id: ep-b, base_url: %s, protocols: [openai.chat]}
credentials:
  - {id: cred-a1, secret_env: UP_A1, endpoints: [ep-a]}
models:
  - alias: fast
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
`

// onPostgres is template (see harness.template) with the PostgreSQL
// database at url, spooling to the directory spool, in place of its
// SQLite file.
func onPostgres(template, url, spool string) string {
	return strings.Replace(template, `{url: "sqlite://%s"}`, "%.0s"+fmt.Sprintf(`{url: %q, spool_dir: %q}`, url, spool), 1)
}

// replicasOnPostgres starts two gateways, a and b, on template sharing one
// PostgreSQL database, each with a spool of its own; simA builds a's simA.
func replicasOnPostgres(t *testing.T, template string, simA simulator.Options) (a, b *harness) {
	t.Helper()
	url, dir := testenv.Postgres(t), t.TempDir()
	a = newHarnessWith(t, onPostgres(template, url, dir+"/spool-a"), "{backend: memory}", simA)
	b = newHarnessWith(t, onPostgres(template, url, dir+"/spool-b"), "{backend: memory}", simulator.Options{})
	return a, b
}

// harness is a gateway in front of two simulated providers, over real HTTP.
type harness struct {
	t          *testing.T
	template   string // catalog with %s for the database path, simA's URL, simB's URL and the state section
	state      string
	simA, simB *simulator.Simulator
	srvA, srvB *httptest.Server
	gw         *app.Gateway
	cfgPath    string
	dbPath     string
	logs       *syncBuffer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, catalogTemplate, "{backend: memory}", simulator.Options{})
}

// newHarnessWith starts a gateway on template (see harness.template), with
// state as its state section, in front of simA (built from simA's options)
// and a default simB.
func newHarnessWith(t *testing.T, template, state string, simA simulator.Options) *harness {
	t.Helper()
	return newHarnessOn(t, template, state, simA, simulator.Options{})
}

// newHarnessOn is newHarnessWith with simB built from simB's options;
// each of opts changes the gateway's options before it starts.
func newHarnessOn(t *testing.T, template, state string, simA, simB simulator.Options, opts ...func(*app.Options)) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncBuffer{}, template: template, state: state}
	h.simA = simulator.New(simA)
	h.simB = simulator.New(simB)
	h.srvA, h.srvB = httptest.NewServer(h.simA), httptest.NewServer(h.simB)
	t.Cleanup(func() { h.simA.Close(); h.simB.Close(); h.srvA.Close(); h.srvB.Close() })
	dir := t.TempDir()
	h.dbPath = filepath.Join(dir, "sluice.db")
	h.cfgPath = filepath.Join(dir, "catalog.yaml")
	h.writeCatalog(h.catalog())
	// It reloads its catalog often, for the tests that edit it.
	h.startGateway(append([]func(*app.Options){func(o *app.Options) { o.ReloadEvery = 20 * time.Millisecond }}, opts...)...)
	return h
}

// tokenKeepingServer begins the catalogs of the tests whose gateway keeps
// oauth tokens: its server, with testSecretKey's file in the test's
// directory (%[1]s), and its SQLite database there.
const tokenKeepingServer = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  secret_key_file: %[1]s/secret-key
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%[1]s/sluice.db"}
`

// testSecretKey is server.secret_key_file's content in the tests'
// catalogs that keep oauth tokens: 32 bytes in base64.
const testSecretKey = "c2x1aWNlLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmctISE=\n"

// writeFiles writes files (name → content) into dir, readable by their
// owner alone, as secrets must be.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// startGateway starts h's gateway on the catalog at h.cfgPath, with
// testEnv for its environment, its log in h.logs, changed by opts, and
// closes it when the test ends.
func (h *harness) startGateway(opts ...func(*app.Options)) {
	t := h.t
	t.Helper()
	o := app.Options{
		ConfigPath: h.cfgPath,
		Log:        slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LookupEnv:  func(k string) (string, bool) { v, ok := testEnv[k]; return v, ok },
	}
	for _, change := range opts {
		change(&o)
	}
	gw, err := app.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	h.gw = gw
	t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func (h *harness) catalog() string {
	return fmt.Sprintf(h.template, h.dbPath, h.state, h.srvA.URL, h.srvB.URL)
}

func (h *harness) writeCatalog(doc string) {
	h.t.Helper()
	if err := os.WriteFile(h.cfgPath, []byte(doc), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) url(path string) string { return "http://" + h.gw.Addr() + path }

func (h *harness) sdk(key string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(h.url("/v1/")), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &c
}

// post sends a raw request and returns status, headers and body.
func (h *harness) post(ctx context.Context, path, key, body string) (int, http.Header, string) {
	h.t.Helper()
	return h.postWith(ctx, path, key, body, nil)
}

// postWith is post with the caller's extra headers, set after the key and
// the JSON content type so that they can replace either.
func (h *harness) postWith(ctx context.Context, path, key, body string, header map[string]string) (int, http.Header, string) {
	h.t.Helper()
	// postWith runs in goroutines too: it reports with Errorf, never Fatal.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url(path), strings.NewReader(body))
	if err != nil {
		h.t.Errorf("POST %s: %v", path, err)
		return 0, nil, ""
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, "" // the test gave up on purpose
		}
		h.t.Errorf("POST %s: %v", path, err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// adminGet calls the admin API with the test token.
func (h *harness) adminGet(path string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+h.gw.AdminAddr()+path, nil)
	req.Header.Set("Authorization", "Bearer "+testEnv["ADMIN_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond every few milliseconds until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const chatBody = `{"model":"fast","messages":[{"role":"user","content":"hello there"}]}`

// syncBuffer is a log sink safe for the gateway's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
