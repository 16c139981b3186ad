package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// The browser tests drive the console in Debian's Chromium (apt-get install
// chromium; SLUICE_CHROMIUM names another binary) through chromedp, against
// a gateway started in the test in front of the simulated provider. Without
// Chromium they skip, unless CI=true, where .ci/run installs it.
//
// SLUICE_CONSOLE_SHOTS=<dir> makes them save a screenshot of every page in
// both languages there; docs/console/ holds the ones committed, taken by
//
//	SLUICE_CONSOLE_SHOTS=$PWD/docs/console go test ./internal/console/ -run Browser

// Secrets of the test gateway. Distinctive, so a leak is easy to find.
const (
	writeToken = "console-write-token-3f9a1c7e5b"
	readToken  = "console-read-token-8d2e6b0a4c"
	keyWeb     = "sk-sluice-console-web-KEY-6a1d9e3c7f"
	upstreamA1 = "sk-upstream-console-a1-SECRET-2c8e"
	upstreamA2 = "sk-upstream-console-a2-SECRET-9b4f"
	upstreamB1 = "sk-upstream-console-b1-SECRET-5d7a"
)

var consoleEnv = map[string]string{
	"WRITE_TOKEN": writeToken, "READ_TOKEN": readToken, "KEY_WEB": keyWeb,
	"UP_A1": upstreamA1, "UP_A2": upstreamA2, "UP_B1": upstreamB1,
}

// consoleCatalog is the gateway the browser tests sign in to: two
// accounts on one simulator (org-a with two credentials, org-b with one),
// a billed key on billing account acme, and a write and a read admin token.
// %s: the SQLite file, then the simulator's URL.
const consoleCatalog = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_tokens:
    - {id: operator, secret_env: WRITE_TOKEN, role: write}
    - {id: viewer, secret_env: READ_TOKEN, role: read}
  wait_timeout: 2s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: {backend: memory}
endpoints:
  - {id: sim, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: org-a, max_inflight: 4, cooldown: {base: 2s, max: 4s}}
  - {id: org-b, max_inflight: 2, cooldown: {base: 2s, max: 4s}}
credentials:
  - {id: cred-a1, account: org-a, secret_env: UP_A1, endpoints: [sim]}
  - {id: cred-a2, account: org-a, secret_env: UP_A2, endpoints: [sim]}
  - {id: cred-b1, account: org-b, secret_env: UP_B1, endpoints: [sim]}
models:
  - alias: fast
    deployments: [{model: gpt-4o-mini, endpoints: [sim]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, billing_account: acme, labels: {team: web}}
billing:
  plans:
    - id: standard
      prices:
        - {alias: fast, input: "1.00", output: "2.00", effective_from: "2020-01-01T00:00:00Z"}
  costs:
    - {model: gpt-4o-mini, input: "0.50", output: "1.00", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: acme, plan: standard}
`

// consoleGateway is a gateway with its simulator, for one browser test.
type consoleGateway struct {
	gw  *app.Gateway
	sim *simulator.Simulator
}

// startGateway starts the gateway of consoleCatalog.
func startGateway(t *testing.T) *consoleGateway {
	t.Helper()
	return startGatewayOf(t, consoleCatalog)
}

// startGatewayOf starts a gateway on catalog, a variant of consoleCatalog
// (%s: the SQLite file, then the simulator's URL), in front of a simulator
// of its own.
func startGatewayOf(t *testing.T, catalog string) *consoleGateway {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	dir := t.TempDir()
	cfg := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, catalog, filepath.Join(dir, "sluice.db"), srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := app.Start(t.Context(), app.Options{
		ConfigPath: cfg,
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv:  func(k string) (string, bool) { v, ok := consoleEnv[k]; return v, ok },
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { gw.Close() })
	return &consoleGateway{gw: gw, sim: sim}
}

// consoleURL is the console's address, fragment route appended.
func (g *consoleGateway) consoleURL(route string) string {
	return "http://" + g.gw.AdminAddr() + "/console/" + route
}

// chromium is the browser binary, or "" when there is none.
func chromium() string {
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless Chromium with a profile of its own and
// returns a tab's context, which every chromedp action of the test runs in.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	bin := chromium()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("Chromium is required under CI=true (apt-get install chromium)")
		}
		t.Skip("no Chromium on this machine (apt-get install chromium, or set SLUICE_CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1366, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	ctx, cancelTime := context.WithTimeout(tab, 3*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	// The first run starts the browser, on the context without a
	// deadline: a deadline there would stop the whole browser.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// run runs steps in the tab, failing the test with what was being done.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, testWait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a script in the page, awaiting the promise it may return.
func eval[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", script, err)
	}
	return v
}

// signIn opens the console and signs in with token, waiting for the
// overview.
func signIn(t *testing.T, ctx context.Context, g *consoleGateway, token string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(g.consoleURL("")),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`#signin button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#nav a[aria-current="page"]`)),
	)
}

// visit shows the page of route and waits for sel on it.
func visit(t *testing.T, ctx context.Context, route, sel string) {
	t.Helper()
	eval[string](t, ctx, `location.hash = "#/`+route+`"`)
	run(t, ctx, "visit "+route, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// waitText polls until the text of sel contains want, or fails after limit.
func waitText(t *testing.T, ctx context.Context, sel, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var s string
	for time.Now().Before(deadline) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel)))
		if s = got; err == nil && strings.Contains(s, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s shows %q, want %q within %v", sel, s, want, limit)
}

// shot saves a screenshot of the page as <name>.png in
// $SLUICE_CONSOLE_SHOTS, when that is set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SLUICE_CONSOLE_SHOTS")
	if dir == "" {
		return
	}
	run(t, ctx, "settle before "+name, chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// adminCall sends one admin API request with a bearer token (or none),
// outside the browser.
func adminCall(t *testing.T, g *consoleGateway, method, path, token, body string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+g.gw.AdminAddr()+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// testWait bounds what a browser test waits for the page to show.
const testWait = 15 * time.Second

// chooseLanguage picks lang ("en", "zh") in the language menu.
func chooseLanguage(t *testing.T, ctx context.Context, lang string) {
	t.Helper()
	run(t, ctx, "choose "+lang, chromedp.SetValue(chromedp.CSS(`#lang`), lang))
	eval[bool](t, ctx, `document.getElementById('lang').dispatchEvent(new Event('change'))`)
}

// axeScript is axe-core, installed by .ci/run (npm ci in testdata/axe).
const axeScript = "testdata/axe/node_modules/axe-core/axe.min.js"

// checkA11y runs axe-core on the page as it shows now and fails the test
// on any serious or critical violation of WCAG 2 A/AA or axe's best
// practices. Without axe-core installed it only logs, unless CI=true.
func checkA11y(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	src, err := os.ReadFile(axeScript)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("axe-core is required under CI=true: %v (npm ci --prefix internal/console/testdata/axe)", err)
		}
		t.Logf("no accessibility check of %s: axe-core not installed (npm ci --prefix internal/console/testdata/axe)", page)
		return
	}
	// Evaluated through the DevTools protocol, which the page's
	// Content-Security-Policy does not govern.
	if !eval[bool](t, ctx, `typeof axe !== 'undefined'`) {
		eval[bool](t, ctx, string(src)+"\n;true")
	}
	found := eval[string](t, ctx, `axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})
		.then(r => JSON.stringify(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
			.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))`)
	if found != "[]" {
		t.Errorf("axe-core on %s: serious or critical violations: %s", page, found)
	}
}

// inChinese switches the page to Chinese, waits until each selector of
// shows (pairs of a selector and the text it must contain) shows its text,
// saves the screenshot <name>-zh, and switches back to English.
func inChinese(t *testing.T, ctx context.Context, name string, shows ...string) {
	t.Helper()
	chooseLanguage(t, ctx, "zh")
	for i := 0; i+1 < len(shows); i += 2 {
		waitText(t, ctx, shows[i], shows[i+1], testWait)
	}
	shot(t, ctx, name+"-zh")
	chooseLanguage(t, ctx, "en")
}

// chat sends one chat completion for alias through the data plane with
// key, returning the status and the body of the answer.
func chat(t *testing.T, g *consoleGateway, key, alias string) (int, string) {
	t.Helper()
	body := `{"model":"` + alias + `","messages":[{"role":"user","content":"hello"}]}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.gw.Addr()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// confirmYes answers the console's confirmation dialog with yes.
func confirmYes(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "confirm", chromedp.WaitVisible(chromedp.CSS(`dialog.confirm button.primary`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.primary`)))
}
