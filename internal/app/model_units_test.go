package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// modelUnitsTemplate is one DashScope-like account with per-model units
// (accounts[].models), two credentials, and an alias per model; its
// endpoint is GATE, a modelGate in front of a simulator. It uses indexed
// verbs (database path, state), so the harness's simulator URLs go unused.
const modelUnitsTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 5s
database: {url: "sqlite://%[1]s"}
state: %[2]s
endpoints:
  - id: dash
    base_url: GATE
    protocols: [openai.chat]
accounts:
  - id: dash-main
    max_inflight: 3
    cooldown: {base: 1500ms, max: 3s}
    models:
      qwen-plus: {max_inflight: 2}
      qwen-max: {max_inflight: 1}
credentials:
  - {id: dash-k1, account: dash-main, secret_env: UP_A1, endpoints: [dash]}
  - {id: dash-k2, account: dash-main, secret_env: UP_A2, endpoints: [dash]}
models:
  - alias: plus
    deployments: [{model: qwen-plus, endpoints: [dash]}]
  - alias: max
    deployments: [{model: qwen-max, endpoints: [dash]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// modelGate stands in front of a simulated provider: it answers the next
// requests for a model with a chosen failure (a per-model 429, an
// account-wide one, arrears), as an upstream with per-model quotas does,
// and counts the requests in flight per model and on the account.
type modelGate struct {
	next http.Handler

	mu       sync.Mutex
	fail     map[string]gateFailure // by model: answered to its next request, once
	hits     map[string]int         // requests per model that reached the provider
	inflight map[string]int
	peak     map[string]int // per model, and "" for the account
}

type gateFailure struct {
	status int
	body   string
}

func newModelGate(next http.Handler) *modelGate {
	return &modelGate{next: next, fail: map[string]gateFailure{}, hits: map[string]int{},
		inflight: map[string]int{}, peak: map[string]int{}}
}

func (g *modelGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct{ Model string }
	_ = json.Unmarshal(body, &req)
	g.mu.Lock()
	f, failing := g.fail[req.Model]
	delete(g.fail, req.Model)
	if failing {
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
		return
	}
	g.hits[req.Model]++
	for _, k := range []string{req.Model, ""} {
		g.inflight[k]++
		g.peak[k] = max(g.peak[k], g.inflight[k])
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight[req.Model]--
		g.inflight[""]--
		g.mu.Unlock()
	}()
	g.next.ServeHTTP(w, r)
}

// failNext makes the next request for model answer status with body.
func (g *modelGate) failNext(model string, status int, body string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail[model] = gateFailure{status, body}
}

func (g *modelGate) count(model string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hits[model]
}

func (g *modelGate) peaks() (perModel map[string]int, account int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	perModel = map[string]int{}
	for k, v := range g.peak {
		if k != "" {
			perModel[k] = v
		}
	}
	return perModel, g.peak[""]
}

// newModelUnitsHarness starts the gateway on modelUnitsTemplate in front
// of a gate over a simulator whose answers take latency.
func newModelUnitsHarness(t *testing.T, state string, latency time.Duration) (*harness, *modelGate) {
	t.Helper()
	sim := simulator.New(simulator.Options{Default: simulator.Behavior{Latency: latency}})
	gate := newModelGate(sim)
	srv := httptest.NewServer(gate)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	h := newHarnessWith(t, strings.Replace(modelUnitsTemplate, "GATE", srv.URL, 1), state, simulator.Options{})
	return h, gate
}

func chatFor(alias string) string {
	return `{"model":"` + alias + `","messages":[{"role":"user","content":"hello there"}]}`
}

// Upstream answers of DashScope (docs/failure-classes.md).
const (
	perModelThrottle = `{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded, please try again later.","request_id":"r1"}`
	accountThrottle  = `{"code":"Throttling","message":"Requests throttling triggered.","request_id":"r2"}`
	arrears          = `{"code":"Arrearage","message":"Access denied, please make sure your account is in good standing.","request_id":"r3"}`
)

// TestModelScoped429CoolsOnlyThatModel: a DashScope per-model throttle on
// qwen-plus cools qwen-plus's unit alone — its next request waits for the
// cooldown and then runs as the probe, while qwen-max on the same account
// keeps flowing; an account-wide throttle cools both models; arrears
// disable the whole account.
func TestModelScoped429CoolsOnlyThatModel(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h, gate := newModelUnitsHarness(t, state, 20*time.Millisecond)
		const cooldown = 1500 * time.Millisecond // the account's cooldown.base

		// A per-model throttle on plus: the request waits out plus's
		// cooldown, then is served (the probe).
		gate.failNext("qwen-plus", http.StatusTooManyRequests, perModelThrottle)
		plus := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			if s, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatFor("plus")); s != 200 {
				t.Errorf("plus after a per-model 429 = %d %s, want 200 once its cooldown ends", s, body)
			}
			plus <- time.Since(start)
		}()
		eventually(t, time.Second, "qwen-plus cooling after its 429", func() bool {
			a := h.accounts(t)["dash-main"]
			return len(a.Models) == 2 && !a.Models[1].CoolingUntil.IsZero()
		})
		for range 5 { // the same account serves max at once meanwhile
			t0 := time.Now()
			if s, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatFor("max")); s != 200 {
				t.Fatalf("max while plus cools = %d %s, want 200", s, body)
			}
			if d := time.Since(t0); d > cooldown/3 {
				t.Errorf("max while plus cools took %v: it waited for plus's cooldown", d)
			}
		}
		if n := gate.count("qwen-plus"); n != 0 {
			t.Errorf("plus reached the provider %d times while cooling, want 0", n)
		}
		a := h.accounts(t)["dash-main"]
		if len(a.Models) != 2 || a.Models[0].Model != "qwen-max" || a.Models[1].Model != "qwen-plus" {
			t.Fatalf("dash-main's models = %+v, want qwen-max and qwen-plus", a.Models)
		}
		if plus := a.Models[1]; plus.CoolingUntil.IsZero() || plus.Level != 1 || plus.Cap != 2 ||
			!a.CoolingUntil.IsZero() || !a.Models[0].CoolingUntil.IsZero() {
			t.Errorf("while plus cools: account cooling until %v, models %+v; want only qwen-plus cooling, at level 1",
				a.CoolingUntil, a.Models)
		}
		if d := <-plus; d < cooldown-100*time.Millisecond {
			t.Errorf("plus was served after %v, before its cooldown of %v ended", d, cooldown)
		}
		if n := gate.count("qwen-plus"); n != 1 {
			t.Errorf("plus reached the provider %d times, want 1 (the probe)", n)
		}

		// An account-wide throttle on plus cools the account: max waits too.
		gate.failNext("qwen-plus", http.StatusTooManyRequests, accountThrottle)
		limited := make(chan struct{})
		go func() {
			defer close(limited)
			h.post(t.Context(), "/v1/chat/completions", keyWeb, chatFor("plus"))
		}()
		// The gate has answered before the gateway has read the answer:
		// wait for the account to show its cooldown.
		eventually(t, time.Second, "the account cooling after its 429", func() bool {
			return !h.accounts(t)["dash-main"].CoolingUntil.IsZero()
		})
		t0, maxBefore := time.Now(), gate.count("qwen-max")
		if s, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatFor("max")); s != 200 {
			t.Fatalf("max after an account-wide 429 = %d %s, want 200 once the account reopens", s, body)
		}
		if d := time.Since(t0); d < cooldown/2 {
			t.Errorf("max after an account-wide 429 was served after %v: the account did not cool", d)
		}
		if n := gate.count("qwen-max"); n != maxBefore+1 {
			t.Errorf("max reached the provider %d more times, want 1", n-maxBefore)
		}

		<-limited // served after the cooldown; nothing else is on its way

		// Arrears on plus disable the account: max has nowhere to go.
		gate.failNext("qwen-plus", http.StatusBadRequest, arrears)
		if s, _, _ := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatFor("plus")); s == 200 {
			t.Error("plus after arrears = 200, want an error: the account is disabled")
		}
		maxBefore = gate.count("qwen-max")
		if s, _, _ := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatFor("max")); s != http.StatusServiceUnavailable {
			t.Errorf("max after arrears on plus = %d, want 503: the whole account is disabled", s)
		}
		if n := gate.count("qwen-max"); n != maxBefore {
			t.Errorf("max reached the provider after arrears disabled its account")
		}
		if a := h.accounts(t)["dash-main"]; a.Status != "disabled" || !strings.HasPrefix(a.Reason, "billing") {
			t.Errorf("dash-main = %+v, want disabled for billing", a)
		}
	})
}

// TestModelUnitCapsHold: a burst of both models on one account: at most
// each model's max_inflight runs at once, and at most the account's in all.
func TestModelUnitCapsHold(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h, gate := newModelUnitsHarness(t, state, 150*time.Millisecond)
		var wg sync.WaitGroup
		for i := range 16 {
			alias := "plus"
			if i%2 == 1 {
				alias = "max"
			}
			wg.Go(func() {
				if s, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatFor(alias)); s != 200 {
					t.Errorf("%s = %d %s, want 200", alias, s, body)
				}
			})
		}
		wg.Wait()
		perModel, account := gate.peaks()
		if perModel["qwen-plus"] != 2 || perModel["qwen-max"] != 1 || account != 3 {
			t.Errorf("peak in flight: qwen-plus %d (cap 2), qwen-max %d (cap 1), account %d (cap 3); want each at its cap",
				perModel["qwen-plus"], perModel["qwen-max"], account)
		}
	})
}
