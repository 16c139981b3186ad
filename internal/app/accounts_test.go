package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// accountsTemplate: org-1 (three credentials) and org-2 (two) share caps per
// account; org-c is quota_scope credential (each key its own unit); k8 has no
// account. Credentials' model filters give each alias its accounts.
const accountsTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
  - {id: ep-b, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: org-1, quota_scope: account, max_inflight: 2, cooldown: {base: 300ms, max: 2s}}
  - {id: org-2, quota_scope: account, max_inflight: 2, cooldown: {base: 300ms, max: 2s}}
  - {id: org-c, quota_scope: credential, max_inflight: 1, cooldown: {base: 300ms, max: 2s}}
credentials:
%smodels:
  - alias: one
    deployments: [{model: m-one, endpoints: [ep-a]}]
  - alias: two
    deployments: [{model: m-one, endpoints: [ep-a]}, {model: m-two, endpoints: [ep-a]}]
  - alias: just-two
    deployments: [{model: m-two, endpoints: [ep-a]}]
  - alias: scoped
    deployments: [{model: m-scoped, endpoints: [ep-a]}]
  - alias: solo
    deployments: [{model: m-solo, endpoints: [ep-a]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// accountCredentials is the default credentials section.
const accountCredentials = `  - {id: k1, account: org-1, secret_env: K1, endpoints: [ep-a], models: [m-one]}
  - {id: k2, account: org-1, secret_env: K2, endpoints: [ep-a], models: [m-one]}
  - {id: k3, account: org-1, secret_env: K3, endpoints: [ep-a], models: [m-one]}
  - {id: k4, account: org-2, secret_env: K4, endpoints: [ep-a], models: [m-two]}
  - {id: k5, account: org-2, secret_env: K5, endpoints: [ep-a], models: [m-two]}
  - {id: k6, account: org-c, secret_env: K6, endpoints: [ep-a], models: [m-scoped]}
  - {id: k7, account: org-c, secret_env: K7, endpoints: [ep-a], models: [m-scoped]}
  - {id: k8, secret_env: K8, endpoints: [ep-a], models: [m-solo], max_inflight: 1}
`

// upstreamKey is the simulated provider's secret of credential id.
func upstreamKey(id string) string { return "sk-upstream-" + id + "-SECRET-2b7c" }

func init() {
	testEnv["KEY_BG"], testEnv["KEY_UI"] = "sk-sluice-bg-KEY-5e8a0c2d4f6b", "sk-sluice-ui-KEY-9d1f3b5a7c0e"
	for i := range 10 {
		id := fmt.Sprintf("k%d", i)
		testEnv[strings.ToUpper(id)] = upstreamKey(id)
	}
}

// simAccounts makes the simulated provider enforce the catalog's caps as
// hidden limits (a 429 past them) and answer after 100ms.
func simAccounts() simulator.Options {
	lat := 100 * time.Millisecond
	o := simulator.Options{
		Accounts: map[string]simulator.AccountLimits{"org-1": {MaxInflight: 2}, "org-2": {MaxInflight: 2}},
		Keys:     map[string]simulator.Behavior{},
	}
	for id, acct := range map[string]string{"k1": "org-1", "k2": "org-1", "k3": "org-1", "k4": "org-2", "k5": "org-2", "k9": "org-3"} {
		o.Keys[upstreamKey(id)] = simulator.Behavior{Account: acct, Latency: lat}
	}
	for _, id := range []string{"k6", "k7", "k8"} {
		o.Keys[upstreamKey(id)] = simulator.Behavior{Account: id, Latency: lat, MaxInflight: 1}
	}
	return o
}

// eachBackend runs f with the in-memory state and with Redis.
func eachBackend(t *testing.T, f func(t *testing.T, state string)) {
	t.Run("memory", func(t *testing.T) { f(t, "{backend: memory}") })
	t.Run("redis", func(t *testing.T) {
		url := testenv.Redis(t)
		f(t, redisState(url, testenv.RedisPrefix(t, url)))
	})
}

// newAccountsHarness serves the accounts catalog to w's callers from
// endpoints of w's upstream protocol.
func newAccountsHarness(t *testing.T, w wire, state string) *harness {
	return w.harness(t, strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1), state, simAccounts())
}

// burst sends n concurrent chat requests for model and returns their statuses.
func (h *harness) burst(ctx context.Context, n int, model string) []int {
	return h.burstAs(ctx, chatCaller, n, model)
}

// burstAs sends n concurrent requests of c's protocol for model and returns
// their statuses.
func (h *harness) burstAs(ctx context.Context, c *callerSide, n int, model string) []int {
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { statuses[i], _ = h.ask(ctx, c, keyWeb, model, "hello there", nil) })
	}
	wg.Wait()
	return statuses
}

func allOK(t *testing.T, statuses []int) {
	t.Helper()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d = %d, want 200", i, s)
		}
	}
}

// upstream429s counts the rate limits the simulated provider answered.
func (h *harness) upstream429s() int {
	n := 0
	for _, r := range h.simA.Requests() {
		if r.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

func TestAccountCapIsSharedByItsCredentials(t *testing.T) {
	eachWireBackend(t, wires, func(t *testing.T, w wire, state string) {
		h := newAccountsHarness(t, w, state)
		allOK(t, h.burstAs(t.Context(), w.caller, 20, "one"))
		if peak := h.simA.MaxInFlight("org-1"); peak != 2 {
			t.Errorf("org-1 peak in flight = %d, want exactly its cap 2 (three keys do not add capacity)", peak)
		}
		if n := h.upstream429s(); n != 0 {
			t.Errorf("upstream 429s = %d, want 0", n)
		}
		h.wantNoClaims(t)
		w.wantUpstreamCalls(t, h)
	})
}

func TestTwoAccountsHaveIndependentCaps(t *testing.T) {
	eachWireBackend(t, wires, func(t *testing.T, w wire, state string) {
		h := newAccountsHarness(t, w, state)
		allOK(t, h.burstAs(t.Context(), w.caller, 20, "two"))
		p1, p2, all := h.simA.MaxInFlight("org-1"), h.simA.MaxInFlight("org-2"), h.simA.MaxInFlight("")
		if p1 > 2 || p2 > 2 || all != 4 {
			t.Errorf("peaks org-1 %d, org-2 %d, overall %d; want ≤2, ≤2 and 4 (two accounts, twice the capacity)", p1, p2, all)
		}
		if n := h.upstream429s(); n != 0 {
			t.Errorf("upstream 429s = %d, want 0", n)
		}
		w.wantUpstreamCalls(t, h)
	})
}

func TestCredentialWithoutAccountIsItsOwnAccount(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAccountsHarness(t, chatWire, state)
		allOK(t, h.burst(t.Context(), 6, "solo"))
		if peak := h.simA.MaxInFlight("k8"); peak != 1 {
			t.Errorf("k8 peak = %d, want its own cap 1", peak)
		}
	})
}

func TestRateLimitCoolsTheWholeAccountThenOneProbe(t *testing.T) {
	eachWireBackend(t, wires, func(t *testing.T, w wire, state string) {
		h := newAccountsHarness(t, w, state)
		for _, id := range []string{"k1", "k2", "k3"} {
			h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-1", FailStatus: 429, RetryAfter: 500 * time.Millisecond})
		}
		var wg sync.WaitGroup
		statuses := make([]int, 6)
		wg.Go(func() { statuses[0], _ = h.ask(t.Context(), w.caller, keyWeb, "one", "hello there", nil) })
		// The account must be cooling before the next requests come: the
		// provider's 429 is on record a moment before Sluice has read it.
		eventually(t, 2*time.Second, "the first 429 cools org-1", func() bool {
			return h.upstream429s() == 1 && !h.accounts(t)["org-1"].CoolingUntil.IsZero()
		})
		for _, id := range []string{"k1", "k2", "k3"} {
			h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-1", Latency: 100 * time.Millisecond})
		}
		for i := 1; i < 6; i++ {
			wg.Go(func() { statuses[i], _ = h.ask(t.Context(), w.caller, keyWeb, "one", "hello there", nil) })
		}
		wg.Wait()
		allOK(t, statuses)
		recs := h.simA.Requests()
		if len(recs) != 7 {
			t.Fatalf("upstream calls = %d, want 7 (one 429, then six answers)", len(recs))
		}
		limited, probe, next := recs[0], recs[1], recs[2]
		if gap := probe.At.Sub(limited.At); gap < w.upstream.cooled-50*time.Millisecond {
			t.Errorf("a credential of the cooled account was called %v after the 429, want none for the %v cooldown", gap, w.upstream.cooled)
		}
		if gap := next.At.Sub(probe.At); gap < 90*time.Millisecond {
			t.Errorf("second call %v after the probe, want it to wait for the probe's answer (100ms)", gap)
		}
		w.wantUpstreamCalls(t, h)
	})
}

func TestQuotaScopeCredential(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAccountsHarness(t, chatWire, state)
		allOK(t, h.burst(t.Context(), 8, "scoped"))
		if p6, p7, n := h.simA.MaxInFlight("k6"), h.simA.MaxInFlight("k7"), h.upstream429s(); p6 != 1 || p7 != 1 || n != 0 {
			t.Errorf("peaks k6 %d, k7 %d, 429s %d; want 1, 1, 0 (a cap per credential)", p6, p7, n)
		}
		// A 429 on k6 cools k6 only: k7 goes on serving.
		h.simA.Reset()
		h.simA.SetKey(upstreamKey("k6"), simulator.Behavior{Account: "k6", FailStatus: 429, RetryAfter: 5 * time.Second})
		for range 4 {
			if s, _, _ := h.post(t.Context(), "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "scoped", 1)); s != 200 {
				t.Errorf("status = %d, want 200 from k7", s)
			}
		}
		if n6, n7 := h.simA.Count(upstreamKey("k6")), h.simA.Count(upstreamKey("k7")); n6 > 1 || n7 < 3 {
			t.Errorf("calls k6 %d, k7 %d; want k6 at most once (then cooling) and k7 the rest", n6, n7)
		}
		// Cancelled callers leave no claims behind.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		h.burst(ctx, 4, "scoped")
		cancel()
		eventually(t, 3*time.Second, "claims released", func() bool { return h.claimsHeld(t) == 0 })
	})
}

func TestDisabledAndDrainingCredentialsTakeNoClaims(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAccountsHarness(t, chatWire, state)
		h.adminPost(t, "/admin/credentials/k1/disable")
		h.adminPost(t, "/admin/credentials/k2/drain")
		allOK(t, h.burst(t.Context(), 6, "one"))
		if n1, n2, n3 := h.simA.Count(upstreamKey("k1")), h.simA.Count(upstreamKey("k2")), h.simA.Count(upstreamKey("k3")); n1 != 0 || n2 != 0 || n3 != 6 {
			t.Errorf("calls k1 %d, k2 %d, k3 %d; want 0, 0, 6", n1, n2, n3)
		}
	})
}

func TestAuthFailureDisablesTheCredentialAndBillingTheAccount(t *testing.T) {
	eachWire(t, wires, func(t *testing.T, w wire) {
		h := newAccountsHarness(t, w, "{backend: memory}")
		ask := func(model string) (int, string) {
			return h.ask(t.Context(), w.caller, keyWeb, model, "hello there", nil)
		}
		h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", Invalid: true})
		h.simA.SetKey(upstreamKey("k4"), w.upstream.fail(simulator.Behavior{Account: "org-2"}, w.upstream.billing))
		// Round-robin reaches k1 within three requests; each is still served.
		for range 6 {
			if s, body := ask("one"); s != 200 {
				t.Fatalf("status = %d %s, want the request served by another credential", s, body)
			}
		}
		if n := h.simA.Count(upstreamKey("k1")); n != 1 {
			t.Errorf("calls on k1 = %d, want exactly 1: then it is disabled", n)
		}
		creds := h.credentials(t)
		if c := creds["k1"]; c.Status != "disabled" || !strings.HasPrefix(c.Reason, "auth") {
			t.Errorf("k1 = %+v, want disabled for auth", c)
		}
		if c := creds["k2"]; c.Status != "active" {
			t.Errorf("k2 = %+v, want active: an auth failure disables only that credential", c)
		}

		// A billing failure on k4 disables org-2: k5 is not tried again and the
		// alias served only by org-2 has nothing left.
		for i := 0; h.simA.Count(upstreamKey("k4")) == 0; i++ {
			if i == 3 {
				t.Fatal("round-robin never reached k4")
			}
			ask("just-two")
		}
		n5 := h.simA.Count(upstreamKey("k5"))
		for range 3 {
			if s, body := ask("just-two"); s != http.StatusServiceUnavailable {
				t.Errorf("request for a disabled account's alias = %d, want 503", s)
			} else if _, ok := w.caller.errorCode(body); !ok {
				t.Errorf("request for a disabled account's alias = %s, want %s's error envelope", body, w.caller.protocol)
			}
		}
		if n4, n := h.simA.Count(upstreamKey("k4")), h.simA.Count(upstreamKey("k5")); n4 != 1 || n != n5 {
			t.Errorf("calls k4 %d, k5 %d (was %d); want k4 once and no more calls on org-2", n4, n, n5)
		}
		if a := h.accounts(t)["org-2"]; a.Status != "disabled" || !strings.HasPrefix(a.Reason, "billing") {
			t.Errorf("org-2 = %+v, want disabled for billing", a)
		}
		h.adminPost(t, "/admin/accounts/org-2/enable")
		h.simA.SetKey(upstreamKey("k4"), simulator.Behavior{Account: "org-2"})
		if s, _ := ask("just-two"); s != 200 {
			t.Errorf("after the operator re-enabled org-2: status %d, want 200", s)
		}
		w.wantUpstreamCalls(t, h)
	})
}

func TestCredentialAddedWhileRequestsWaitServesThem(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAccountsHarness(t, chatWire, state)
		for _, id := range []string{"k1", "k2", "k3"} {
			h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-1", Latency: 800 * time.Millisecond})
		}
		h.simA.SetKey(upstreamKey("k9"), simulator.Behavior{Account: "org-3", Latency: 50 * time.Millisecond})
		done := make(chan []int)
		go func() { done <- h.burst(t.Context(), 6, "one") }()
		eventually(t, 2*time.Second, "two running on org-1", func() bool { return h.simA.InFlight() == 2 })
		added := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+
			"  - {id: k9, secret_env: K9, endpoints: [ep-a], models: [m-one], max_inflight: 2}\nmodels:", 1)
		h.template = added
		h.writeCatalog(h.catalog())
		allOK(t, <-done)
		if n := h.simA.Count(upstreamKey("k9")); n == 0 {
			t.Errorf("the added credential served %d of the waiting requests, want some", n)
		}
		if n := h.simA.Cancelled(); n != 0 {
			t.Errorf("%d running requests were cancelled, want none to move", n)
		}
	})
}

func TestReorderingCredentialsKeepsStateOnThePhysicalKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAccountsHarness(t, chatWire, state)
		h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Account: "org-1", Latency: 1500 * time.Millisecond})
		h.adminPost(t, "/admin/credentials/k2/disable")
		h.adminPost(t, "/admin/credentials/k3/disable")
		go h.post(t.Context(), "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "one", 1))
		eventually(t, 2*time.Second, "k1 busy", func() bool { return h.simA.InFlight() == 1 })
		// org-2 cools after a 429 on k4.
		h.simA.SetKey(upstreamKey("k4"), simulator.Behavior{Account: "org-2", FailStatus: 429, RetryAfter: 10 * time.Second})
		h.adminPost(t, "/admin/credentials/k5/disable")
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		h.post(ctx, "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "just-two", 1))
		cancel()
		before := h.accounts(t)
		// Insert a credential at the head and delete k2 from the middle.
		creds := "  - {id: k0, account: org-1, secret_env: K0, endpoints: [ep-a], models: [m-one]}\n" +
			strings.Replace(accountCredentials, "  - {id: k2, account: org-1, secret_env: K2, endpoints: [ep-a], models: [m-one]}\n", "", 1)
		h.template = strings.Replace(accountsTemplate, "%smodels:", creds+"models:", 1)
		h.writeCatalog(h.catalog())
		eventually(t, 2*time.Second, "catalog reloaded", func() bool { return h.status(t).Version == 2 })
		after := h.accounts(t)
		if after["org-1"].InFlight != 1 || before["org-2"].CoolingUntil.IsZero() || !after["org-2"].CoolingUntil.Equal(before["org-2"].CoolingUntil) {
			t.Errorf("after reordering: org-1 %+v, org-2 %+v (before %+v); want k1's claim and org-2's cooldown kept", after["org-1"], after["org-2"], before["org-2"])
		}
		if c := h.credentials(t)["k1"]; c.InFlight != 1 {
			t.Errorf("k1 in flight = %d after reordering, want 1", c.InFlight)
		}
	})
}

func (h *harness) adminPost(t *testing.T, path string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.gw.AdminAddr()+path, nil)
	req.Header.Set("Authorization", "Bearer "+testEnv["ADMIN_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d", path, resp.StatusCode)
	}
}

func (h *harness) accounts(t *testing.T) map[string]admin.AccountState {
	t.Helper()
	var list []admin.AccountState
	h.adminJSON(t, "/admin/accounts", &list)
	out := map[string]admin.AccountState{}
	for _, a := range list {
		out[a.ID] = a
	}
	return out
}

func (h *harness) credentials(t *testing.T) map[string]admin.CredentialState {
	t.Helper()
	var list []admin.CredentialState
	h.adminJSON(t, "/admin/credentials", &list)
	out := map[string]admin.CredentialState{}
	for _, c := range list {
		out[c.ID] = c
	}
	return out
}

func (h *harness) adminJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, body := h.adminGet(path)
	if err := json.Unmarshal([]byte(body), v); code != 200 || err != nil {
		t.Fatalf("GET %s = %d %s (%v)", path, code, body, err)
	}
}

// claimsHeld sums in-flight claims over every account.
func (h *harness) claimsHeld(t *testing.T) int {
	n := 0
	for _, a := range h.accounts(t) {
		n += a.InFlight
	}
	return n
}

func (h *harness) wantNoClaims(t *testing.T) {
	t.Helper()
	eventually(t, 2*time.Second, "no claims left", func() bool { return h.claimsHeld(t) == 0 })
}
