package deploy

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// gatewayCatalog bills key web to acme (its overdraft admits it with no
// balance) and routes alias fast first to ep-down, whose upstream answers
// 500 and whose breaker opens at the first failure, then to ep-up: one
// request makes a series of every kind the rules and dashboard read.
const gatewayCatalog = `version: 1
server: {listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0, admin_token_env: ADMIN_TOKEN}
database: {url: "sqlite://%s"}
endpoints:
  - {id: ep-down, base_url: %s, protocols: [openai.chat], breaker: {failures: 1, open: 1m}}
  - {id: ep-up, base_url: %s, protocols: [openai.chat]}
accounts: [{id: org-down, max_inflight: 2}, {id: org-up, max_inflight: 2}]
credentials:
  - {id: c-down, account: org-down, secret_env: UPSTREAM, endpoints: [ep-down]}
  - {id: c-up, account: org-up, secret_env: UPSTREAM, endpoints: [ep-up]}
models:
  - alias: fast
    deployments:
      - {model: gpt-4o-mini, endpoints: [ep-down], priority: 0}
      - {model: gpt-4o-mini, endpoints: [ep-up], priority: 1}
keys: [{id: web, tenant: web, secret_env: KEY, billing_account: acme}]
billing:
  plans: [{id: standard, prices: [{alias: fast, input: "1.00", output: "2.00", request: "0.01", effective_from: "2020-01-01T00:00:00Z"}]}]
  accounts: [{id: acme, plan: standard, overdraft: "100.00"}]
`

// testGateway is a gateway started in this process for the deploy tests.
type testGateway struct{ addr, adminAddr string }

var (
	gatewayOnce sync.Once
	gateway     testGateway
	gatewayErr  error
	// stopGateway stops what startGateway started; TestMain calls it.
	stopGateway = func() {}
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopGateway()
	os.Exit(code)
}

// scrapeGateway starts one gateway for the package's tests and answers one
// billed chat through it (failing over from ep-down to ep-up).
func scrapeGateway(t *testing.T) testGateway {
	t.Helper()
	gatewayOnce.Do(func() { gateway, gatewayErr = startGateway() })
	if gatewayErr != nil {
		t.Fatal(gatewayErr)
	}
	return gateway
}

func startGateway() (testGateway, error) {
	down := httptest.NewServer(simulator.New(simulator.Options{Default: simulator.Behavior{FailStatus: http.StatusInternalServerError}}))
	up := httptest.NewServer(simulator.New(simulator.Options{}))
	dir, err := os.MkdirTemp("", "sluice-deploy-test-")
	if err != nil {
		return testGateway{}, err
	}
	var gw *app.Gateway
	stopGateway = func() {
		if gw != nil {
			gw.Close()
		}
		down.Close()
		up.Close()
		os.RemoveAll(dir)
	}
	cfg := filepath.Join(dir, "catalog.yaml")
	doc := fmt.Sprintf(gatewayCatalog, filepath.Join(dir, "sluice.db"), down.URL, up.URL)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		return testGateway{}, err
	}
	env := map[string]string{"ADMIN_TOKEN": "deploy-test-admin-token", "UPSTREAM": "sk-deploy-test-upstream", "KEY": "sk-deploy-test-key"}
	gw, err = app.Start(context.Background(), app.Options{ConfigPath: cfg, Log: slog.New(slog.DiscardHandler),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		return testGateway{}, fmt.Errorf("start a gateway: %w", err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
		strings.NewReader(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return testGateway{}, err
	}
	req.Header.Set("Authorization", "Bearer "+env["KEY"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return testGateway{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return testGateway{}, fmt.Errorf("the billed chat = %d, want 200 (after failing over from ep-down)", resp.StatusCode)
	}
	return testGateway{addr: gw.Addr(), adminAddr: gw.AdminAddr()}, nil
}

// scrape returns the names of the series in a scrape of g's /metrics.
func (g testGateway) scrape(t *testing.T) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + g.adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		names[name] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
