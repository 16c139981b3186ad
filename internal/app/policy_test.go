package app_test

import (
	"crypto/rand"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// policyTemplate: org-1 (credential k1) on ep-a and org-2 (k4) on ep-b, one
// cap each as the template says; key "strict" is bound to org-1, key
// "pref" prefers org-1 and falls back to any account after 300ms.
const policyTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 3s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat], breaker: {failures: 1, open: 1s}}
  - {id: ep-b, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: org-1, max_inflight: %d, cooldown: {base: 300ms, max: 2s}}
  - {id: org-2, max_inflight: %d, cooldown: {base: 300ms, max: 2s}}
credentials:
  - {id: k1, account: org-1, secret_env: K1, endpoints: [ep-a]}
  - {id: k4, account: org-2, secret_env: K4, endpoints: [ep-b]}
models:
  - alias: fast
    strategy: %s
    deployments:
      - {model: m, endpoints: [ep-a], weight: 3}
      - {model: m, endpoints: [ep-b], weight: 1}
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
  - {id: strict, tenant: web, secret_env: KEY_BG, policy: {mode: strict, accounts: [org-1]}}
  - {id: pref, tenant: web, secret_env: KEY_UI, policy: {mode: preferred, accounts: [org-1], fallback: any, wait: 300ms}}
`

const (
	keyStrict = "sk-sluice-bg-KEY-5e8a0c2d4f6b" // testEnv["KEY_BG"]
	keyPref   = "sk-sluice-ui-KEY-9d1f3b5a7c0e" // testEnv["KEY_UI"]
)

// newPolicyHarness starts a gateway with caps cap1 (org-1) and cap2 (org-2)
// and the alias's strategy; k1 answers on simA, k4 on simB, after latency.
func newPolicyHarness(t *testing.T, state string, cap1, cap2 int, strategy string, latency time.Duration) *harness {
	t.Helper()
	tmpl := strings.NewReplacer("max_inflight: %d, cooldown: {base: 300ms, max: 2s}}\n  - {id: org-2, max_inflight: %d",
		fmt.Sprintf("max_inflight: %d, cooldown: {base: 300ms, max: 2s}}\n  - {id: org-2, max_inflight: %d", cap1, cap2),
		"strategy: %s", "strategy: "+strategy).Replace(policyTemplate)
	// Each harness its own Redis prefix, under the test's so that its keys
	// are deleted with the test's: a cooldown must not outlive its test.
	state = strings.Replace(state, `:"}`, `:`+rand.Text()[:6]+`:"}`, 1)
	h := newHarnessWith(t, tmpl, state, simulator.Options{Keys: map[string]simulator.Behavior{
		upstreamKey("k1"): {Account: "org-1", Latency: latency},
	}})
	h.simB.SetKey(upstreamKey("k4"), simulator.Behavior{Account: "org-2", Latency: latency})
	return h
}

// served counts the requests each simulated account received.
func (h *harness) served() (org1, org2 int) {
	return len(h.simA.Requests()), len(h.simB.Requests())
}

func (h *harness) chatAs(key string) (int, string) {
	code, _, body := h.post(h.t.Context(), "/v1/chat/completions", key, chatBody)
	return code, body
}

func (h *harness) fallbacks(reason string) string {
	_, m := h.adminGet("/metrics")
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, `sluice_policy_fallbacks_total{key="pref",reason="`+reason+`"}`) {
			return line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	return "0"
}

func TestStrictPolicyNeverLeavesItsAccount(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		t.Run("Cooling", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", FailStatus: 429, RetryAfter: 500 * time.Millisecond})
			done := make(chan int, 1)
			go func() { code, _ := h.chatAs(keyStrict); done <- code }()
			eventually(t, 2*time.Second, "org-1 answers 429", func() bool { return h.upstream429s() > 0 })
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1"})
			if code := <-done; code != http.StatusOK {
				t.Errorf("strict request = %d, want 200 once org-1 cooled down (it waits)", code)
			}
			if _, org2 := h.served(); org2 != 0 {
				t.Errorf("org-2 served %d requests of a key bound to org-1, want 0", org2)
			}
		})
		t.Run("Disabled", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.adminPost(t, "/admin/accounts/org-1/disable")
			code, body := h.chatAs(keyStrict)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream_binding_unavailable") {
				t.Errorf("strict request = %d %s, want 503 upstream_binding_unavailable", code, body)
			}
			if code, _ := h.chatAs(keyWeb); code != http.StatusOK {
				t.Errorf("default key = %d, want 200 on org-2", code)
			}
			if _, org2 := h.served(); org2 != 1 {
				t.Errorf("org-2 served %d requests, want only the default key's 1", org2)
			}
		})
		t.Run("BreakerOpen", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", FailStatus: 500})
			for range 2 { // the first opens ep-a's breaker, the second finds it open
				if code, _ := h.chatAs(keyStrict); code == http.StatusOK {
					t.Errorf("strict request = 200, want a failure: its only account fails")
				}
			}
			if _, org2 := h.served(); org2 != 0 {
				t.Errorf("org-2 served %d requests of a key bound to org-1, want 0", org2)
			}
		})
		t.Run("Removed", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.writeCatalog(strings.Replace(h.catalog(), "  - {id: k1, account: org-1, secret_env: K1, endpoints: [ep-a]}\n", "", 1))
			eventually(t, 2*time.Second, "the reload without k1", func() bool {
				code, body := h.chatAs(keyStrict)
				return code == http.StatusServiceUnavailable && strings.Contains(body, "upstream_binding_unavailable")
			})
			if _, org2 := h.served(); org2 != 0 {
				t.Errorf("org-2 served %d requests of a key bound to org-1, want 0", org2)
			}
		})
	})
}

func TestPreferredPolicyFallsBackWithItsReason(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		t.Run("Cooling", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", FailStatus: 429, RetryAfter: 300 * time.Millisecond})
			if code, body := h.chatAs(keyPref); code != http.StatusOK {
				t.Fatalf("preferred request = %d %s, want 200 from the fallback", code, body)
			}
			if org1, org2 := h.served(); org1 != 1 || org2 != 1 || h.fallbacks("cooling") != "1" {
				t.Errorf("served org-1 %d, org-2 %d, cooling fallbacks %s; want 1, 1, 1", org1, org2, h.fallbacks("cooling"))
			}
			// Back to org-1 once it has room again.
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1"})
			eventually(t, 3*time.Second, "org-1 serves the preferred key again", func() bool {
				before, _ := h.served()
				h.chatAs(keyPref)
				after, _ := h.served()
				return after == before+1
			})
		})
		t.Run("AlreadyCooling", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", FailStatus: 429, RetryAfter: 1500 * time.Millisecond})
			var wg sync.WaitGroup
			wg.Go(func() { h.chatAs(keyStrict) }) // cools org-1, then waits for it
			// The gateway, not only the upstream, must have seen the 429:
			// org-1 cooling, its slot released.
			eventually(t, 2*time.Second, "org-1 cooling", func() bool { return !h.accounts(t)["org-1"].CoolingUntil.IsZero() })
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1"})
			if code, _ := h.chatAs(keyPref); code != http.StatusOK || h.fallbacks("cooling") != "1" || h.fallbacks("no_room") != "0" {
				t.Errorf("preferred request = %d with %s cooling and %s no_room fallbacks, want 200, 1 and 0 (org-1 was cooling, not full)",
					code, h.fallbacks("cooling"), h.fallbacks("no_room"))
			}
			wg.Wait()
		})
		t.Run("Disabled", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.adminPost(t, "/admin/accounts/org-1/disable")
			if code, _ := h.chatAs(keyPref); code != http.StatusOK || h.fallbacks("disabled") != "1" {
				t.Errorf("preferred request = %d with %s disabled fallbacks, want 200 and 1", code, h.fallbacks("disabled"))
			}
			h.adminPost(t, "/admin/accounts/org-1/enable")
			eventually(t, 3*time.Second, "org-1 serves the preferred key again", func() bool {
				h.chatAs(keyPref)
				org1, _ := h.served()
				return org1 == 1
			})
		})
		t.Run("Failed", func(t *testing.T) {
			h := newPolicyHarness(t, state, 2, 2, "round-robin", 0)
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", FailStatus: 500})
			if code, _ := h.chatAs(keyPref); code != http.StatusOK || h.fallbacks("failed:endpoint") != "1" {
				t.Errorf("preferred request = %d with %s failed:endpoint fallbacks, want 200 and 1", code, h.fallbacks("failed:endpoint"))
			}
		})
		t.Run("NoRoom", func(t *testing.T) {
			h := newPolicyHarness(t, state, 1, 1, "round-robin", 0)
			h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", Latency: 2 * time.Second})
			var wg sync.WaitGroup
			wg.Go(func() { h.chatAs(keyStrict) }) // holds org-1's only slot
			eventually(t, 2*time.Second, "org-1 busy", func() bool { org1, _ := h.served(); return org1 == 1 })
			start := time.Now()
			if code, _ := h.chatAs(keyPref); code != http.StatusOK || h.fallbacks("no_room") != "1" {
				t.Errorf("preferred request = %d with %s no_room fallbacks, want 200 and 1", code, h.fallbacks("no_room"))
			}
			if waited := time.Since(start); waited < 300*time.Millisecond || waited > 1500*time.Millisecond {
				t.Errorf("preferred request took %v, want its wait (300ms) and little more", waited)
			}
			wg.Wait()
		})
	})
}

// TestStrategiesDistributeAsTheySay measures each strategy on the simulators.
func TestStrategiesDistributeAsTheySay(t *testing.T) {
	t.Run("FillFirst", func(t *testing.T) {
		h := newPolicyHarness(t, "{backend: memory}", 2, 2, "fill-first", 200*time.Millisecond)
		allOK(t, h.burst(t.Context(), 2, "fast"))
		if org1, org2 := h.served(); org1 != 2 || org2 != 0 {
			t.Errorf("two at once: org-1 %d, org-2 %d; want 2 and 0 (org-2 idle until org-1 is full)", org1, org2)
		}
		allOK(t, h.burst(t.Context(), 4, "fast"))
		if org1, org2 := h.served(); org1 != 4 || org2 != 2 {
			t.Errorf("then four at once: org-1 %d, org-2 %d; want 4 and 2", org1, org2)
		}
	})
	t.Run("LeastInflight", func(t *testing.T) {
		h := newPolicyHarness(t, "{backend: memory}", 3, 1, "least-inflight", 300*time.Millisecond)
		allOK(t, h.burst(t.Context(), 2, "fast"))
		if org1, org2 := h.served(); org1 != 2 || org2 != 0 {
			t.Errorf("two at once: org-1 (cap 3) %d, org-2 (cap 1) %d; want 2 and 0 (org-1 has more free slots)", org1, org2)
		}
		allOK(t, h.burst(t.Context(), 4, "fast"))
		if peak1, peak2 := h.simA.MaxInFlight("org-1"), h.simB.MaxInFlight("org-2"); peak1 != 3 || peak2 != 1 {
			t.Errorf("four at once: peaks org-1 %d, org-2 %d; want 3 and 1 (both full)", peak1, peak2)
		}
	})
	t.Run("Weighted", func(t *testing.T) {
		h := newPolicyHarness(t, "{backend: memory}", 1000, 1000, "weighted", 0) // room for all: only the weights decide
		const n = 200
		for range n {
			if code, _ := h.chatAs(keyWeb); code != http.StatusOK {
				t.Fatalf("request = %d", code)
			}
		}
		if org1, _ := h.served(); math.Abs(float64(org1)/n-0.75) > 0.1 {
			t.Errorf("org-1 (weight 3 of 4) served %d of %d, want 75%% ± 10", org1, n)
		}
	})
}

// TestStrictPolicyHoldsAcrossTwoGateways: two gateways share one Redis. The
// strict key's account cools after a 429 served through the first; a
// request through the second waits for that cooldown too, and neither
// ever sends the strict key's requests to another account.
func TestStrictPolicyHoldsAcrossTwoGateways(t *testing.T) {
	url := testenv.Redis(t)
	h := newPolicyHarness(t, redisState(url, testenv.RedisPrefix(t, url)), 2, 2, "round-robin", 0)
	second := h.another(t)
	h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", FailStatus: 429, RetryAfter: time.Second})
	var wg sync.WaitGroup
	codes := make([]int, 2)
	wg.Go(func() { codes[0], _ = h.chatAs(keyStrict) })
	// The upstream answers before the gateway has read the 429: wait for
	// the account to show its cooldown, as the second gateway will see it.
	eventually(t, 2*time.Second, "org-1 cooling after its 429 through the first gateway", func() bool {
		return !h.accounts(t)["org-1"].CoolingUntil.IsZero()
	})
	wg.Go(func() {
		codes[1], _ = call(t, http.MethodPost, "http://"+second.Addr()+"/v1/chat/completions", "Bearer "+keyStrict, chatBody, nil)
	})
	eventually(t, 2*time.Second, "both strict requests wait for org-1", func() bool { return h.accounts(t)["org-1"].Waiting == 2 })
	if n := len(h.simA.Requests()); n != 1 {
		t.Errorf("org-1 received %d requests while cooling, want only the one that cooled it", n)
	}
	h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1"})
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Errorf("strict requests through the two gateways = %v, want 200 each once org-1 cooled down", codes)
	}
	recs := h.simA.Requests()
	for _, r := range recs[1:] {
		if r.Key != upstreamKey("k1") || r.At.Sub(recs[0].At) < 900*time.Millisecond {
			t.Errorf("org-1 request with %s at +%v after the 429, want k1's, after its 1s cooldown", r.Key, r.At.Sub(recs[0].At))
		}
	}
	if _, org2 := h.served(); org2 != 0 {
		t.Errorf("org-2 served %d requests of a key bound to org-1, want 0", org2)
	}
}

// TestPreferredPolicyFallsBackWhileTheBreakerIsOpen: org-1's endpoint fails
// and its breaker opens (one failure, open 1s); the next preferred request
// falls back with reason breaker_open, counted and on its execution, and
// once the breaker closes the key is served by org-1 again.
func TestPreferredPolicyFallsBackWhileTheBreakerIsOpen(t *testing.T) {
	h := newPolicyHarness(t, "{backend: memory}", 2, 2, "round-robin", 0)
	h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", FailStatus: 500})
	if code, _ := h.chatAs(keyPref); code != http.StatusOK || h.fallbacks("failed:endpoint") != "1" {
		t.Fatalf("preferred request = %d with %s failed:endpoint fallbacks, want 200 and 1 (it opens ep-a's breaker)", code, h.fallbacks("failed:endpoint"))
	}
	h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1"})
	if code, _ := h.chatAs(keyPref); code != http.StatusOK || h.fallbacks("breaker_open") != "1" {
		t.Errorf("preferred request = %d with %s breaker_open fallbacks, want 200 and 1", code, h.fallbacks("breaker_open"))
	}
	if org1, org2 := h.served(); org1 != 1 || org2 != 2 {
		t.Errorf("served org-1 %d, org-2 %d; want 1 (the failure) and 2", org1, org2)
	}
	var reasons []string
	for _, r := range h.usage(t, 2) {
		for _, e := range r.Executions {
			if e.Fallback != "" {
				reasons = append(reasons, e.Fallback+" "+strings.Join(e.Expected, ","))
			}
		}
	}
	slices.Sort(reasons)
	if want := []string{"breaker_open org-1", "failed:endpoint org-1"}; !slices.Equal(reasons, want) {
		t.Errorf("fallbacks in the usage records = %q, want %q", reasons, want)
	}
	eventually(t, 3*time.Second, "org-1 serves the preferred key again once the breaker closes", func() bool {
		before, _ := h.served()
		h.chatAs(keyPref)
		after, _ := h.served()
		return after == before+1
	})
}
