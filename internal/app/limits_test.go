package app_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestKeyAndTenantLimitsWaitAndBudget: a key limited to one request in
// flight waits for its own slot (the upstream sees one at a time although the
// accounts have room), and a tenant's daily token budget, once spent, makes
// requests wait for the next UTC day: with a short wait_timeout they end in
// capacity_wait_timeout with a Retry-After pointing there.
func TestKeyAndTenantLimitsWaitAndBudget(t *testing.T) {
	eachWire(t, callerWires, func(t *testing.T, w wire) {
		eachBackend(t, func(t *testing.T, state string) {
			tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
			tpl = strings.Replace(tpl, "  wait_timeout: 10s\n", "  wait_timeout: 2s\n", 1)
			tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, limits: {max_inflight: 1}}\n  - {id: ui, tenant: thrifty, secret_env: KEY_UI}\n", 1)
			tpl += "tenants:\n  - {id: thrifty, limits: {daily_tokens: 100}}\n"
			h := w.harness(t, tpl, state, simAccounts())

			statuses := make([]int, 4)
			var wg sync.WaitGroup
			for i := range statuses {
				wg.Go(func() { statuses[i], _ = h.ask(t.Context(), w.caller, testEnv["KEY_BG"], "two", "hello there", nil) })
			}
			wg.Wait()
			allOK(t, statuses)
			if peak := h.simA.MaxInFlight(""); peak != 1 {
				t.Errorf("upstream peak for a key limited to 1 = %d, want 1", peak)
			}

			// The first request fits the empty day (its estimate counts as the whole budget).
			if s, b := h.ask(t.Context(), w.caller, testEnv["KEY_UI"], "two", "hello there", nil); s != 200 {
				t.Fatalf("first request of the day = %d %s", s, b)
			}
			resp := h.send(t.Context(), w.caller, testEnv["KEY_UI"], "two", false, w.caller.body("two", "hello there", false), nil)
			if resp == nil {
				t.FailNow()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			code, ok := w.caller.errorCode(string(body))
			retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
			if resp.StatusCode != http.StatusTooManyRequests || !ok || code != string(sluice.CodeCapacityWaitTimeout) || time.Duration(retry)*time.Second < time.Until(midnight)-time.Minute {
				t.Errorf("request past the daily budget = %d %s (Retry-After %ds), want capacity_wait_timeout in %s's envelope until about midnight UTC (%v)",
					resp.StatusCode, body, retry, w.caller.protocol, time.Until(midnight).Round(time.Second))
			}
			w.wantUpstreamCalls(t, h)
		})
	})
}

// TestEndUserAndTaskTypeLimits: a key's per-user limit keeps each end user
// to one call in flight while two users run side by side; a task type's limit
// holds across users; a task type the key may not declare is refused.
func TestEndUserAndTaskTypeLimits(t *testing.T) {
	eachWire(t, callerWires, func(t *testing.T, w wire) {
		eachBackend(t, func(t *testing.T, state string) {
			tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
			tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, user_limits: {max_inflight: 1}, task: chat, tasks: [summarize]}\n", 1)
			tpl += "task_types:\n  - {id: chat}\n  - {id: summarize, limits: {max_inflight: 1}}\n"
			h := w.harness(t, tpl, state, simAccounts())
			// send names the end user where the caller's protocol does.
			send := func(user, task string) (int, string) {
				var hdr map[string]string
				if task != "" {
					hdr = map[string]string{"X-Sluice-Task": task}
				}
				body, hdr := w.caller.withUser(w.caller.body("two", "hi", false), hdr, user)
				resp := h.send(t.Context(), w.caller, testEnv["KEY_BG"], "two", false, body, hdr)
				if resp == nil {
					return 0, ""
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			burst := func(users []string, task string) {
				statuses := make([]int, len(users))
				var wg sync.WaitGroup
				for i, u := range users {
					wg.Go(func() { statuses[i], _ = send(u, task) })
				}
				wg.Wait()
				allOK(t, statuses)
			}
			burst([]string{"alice", "alice", "alice"}, "")
			if peak := h.simA.MaxInFlight(""); peak != 1 {
				t.Errorf("one end user's peak = %d, want 1 (user_limits max_inflight 1)", peak)
			}
			h.simA.Reset()
			burst([]string{"alice", "bob"}, "")
			if peak := h.simA.MaxInFlight(""); peak != 2 {
				t.Errorf("two end users' peak = %d, want 2: each has a limit of its own", peak)
			}
			h.simA.Reset()
			burst([]string{"carol", "dave", "erin"}, "summarize")
			if peak := h.simA.MaxInFlight(""); peak != 1 {
				t.Errorf("task type summarize peak = %d, want 1 across users", peak)
			}
			if s, body := send("alice", "translate"); s != http.StatusForbidden {
				t.Errorf("undeclared task type = %d, want 403", s)
			} else if _, ok := w.caller.errorCode(body); !ok {
				t.Errorf("undeclared task type = %s, want %s's error envelope", body, w.caller.protocol)
			}
			w.wantUpstreamCalls(t, h)
		})
	})
}

// TestPoolPolicyRoutesThroughItsAccountsUnderItsLimit: a key whose policy
// routes through a pool uses only the pool's accounts, and the pool's limit
// applies on top of theirs.
func TestPoolPolicyRoutesThroughItsAccountsUnderItsLimit(t *testing.T) {
	eachWire(t, callerWires, func(t *testing.T, w wire) {
		eachBackend(t, func(t *testing.T, state string) {
			tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
			tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, policy: {mode: pool, pool: cheap}}\n", 1)
			tpl += "pools:\n  - {id: cheap, accounts: [org-2], max_inflight: 1}\n"
			h := w.harness(t, tpl, state, simAccounts())
			statuses := make([]int, 4)
			var wg sync.WaitGroup
			for i := range statuses {
				wg.Go(func() { statuses[i], _ = h.ask(t.Context(), w.caller, testEnv["KEY_BG"], "two", "hello there", nil) })
			}
			wg.Wait()
			allOK(t, statuses)
			org1 := h.simA.Count(upstreamKey("k1")) + h.simA.Count(upstreamKey("k2")) + h.simA.Count(upstreamKey("k3"))
			if peak := h.simA.MaxInFlight("org-2"); org1 != 0 || peak != 1 {
				t.Errorf("pool key: %d calls on org-1 (outside the pool), org-2 peak %d; want 0 and 1 (the pool's limit)", org1, peak)
			}
			w.wantUpstreamCalls(t, h)
		})
	})
}
