package app_test

import (
	"encoding/json"
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
	eachBackend(t, func(t *testing.T, state string) {
		tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
		tpl = strings.Replace(tpl, "  wait_timeout: 10s\n", "  wait_timeout: 2s\n", 1)
		tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, limits: {max_inflight: 1}}\n  - {id: ui, tenant: thrifty, secret_env: KEY_UI}\n", 1)
		tpl += "tenants:\n  - {id: thrifty, limits: {daily_tokens: 100}}\n"
		h := newHarnessWith(t, tpl, state, simAccounts())

		statuses := make([]int, 4)
		done := make(chan struct{})
		for i := range statuses {
			go func() {
				defer func() { done <- struct{}{} }()
				statuses[i], _, _ = h.post(t.Context(), "/v1/chat/completions", testEnv["KEY_BG"], strings.Replace(chatBody, "fast", "two", 1))
			}()
		}
		for range statuses {
			<-done
		}
		allOK(t, statuses)
		if peak := h.simA.MaxInFlight(""); peak != 1 {
			t.Errorf("upstream peak for a key limited to 1 = %d, want 1", peak)
		}

		// The first request fits the empty day (its estimate counts as the whole budget).
		if s, _, b := h.post(t.Context(), "/v1/chat/completions", testEnv["KEY_UI"], strings.Replace(chatBody, "fast", "two", 1)); s != 200 {
			t.Fatalf("first request of the day = %d %s", s, b)
		}
		s, hdr, body := h.post(t.Context(), "/v1/chat/completions", testEnv["KEY_UI"], strings.Replace(chatBody, "fast", "two", 1))
		var e envelope
		json.Unmarshal([]byte(body), &e)
		retry, _ := strconv.Atoi(hdr.Get("Retry-After"))
		midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		if s != http.StatusTooManyRequests || e.Error.Code != string(sluice.CodeCapacityWaitTimeout) || time.Duration(retry)*time.Second < time.Until(midnight)-time.Minute {
			t.Errorf("request past the daily budget = %d %s (Retry-After %ds), want capacity_wait_timeout until about midnight UTC (%v)", s, body, retry, time.Until(midnight).Round(time.Second))
		}
	})
}

// TestEndUserAndTaskTypeLimits: a key's per-user limit keeps each end user
// to one call in flight while two users run side by side; a task type's limit
// holds across users; a task type the key may not declare is refused.
func TestEndUserAndTaskTypeLimits(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
		tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, user_limits: {max_inflight: 1}, task: chat, tasks: [summarize]}\n", 1)
		tpl += "task_types:\n  - {id: chat}\n  - {id: summarize, limits: {max_inflight: 1}}\n"
		h := newHarnessWith(t, tpl, state, simAccounts())
		send := func(user, task string) int {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url("/v1/chat/completions"),
				strings.NewReader(`{"model":"two","user":"`+user+`","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+testEnv["KEY_BG"])
			if task != "" {
				req.Header.Set("X-Sluice-Task", task)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("send: %v", err)
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		burst := func(users []string, task string) {
			statuses := make([]int, len(users))
			var wg sync.WaitGroup
			for i, u := range users {
				wg.Go(func() { statuses[i] = send(u, task) })
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
		if s := send("alice", "translate"); s != http.StatusForbidden {
			t.Errorf("undeclared task type = %d, want 403", s)
		}
	})
}

// TestPoolPolicyRoutesThroughItsAccountsUnderItsLimit: a key whose policy
// routes through a pool uses only the pool's accounts, and the pool's limit
// applies on top of theirs.
func TestPoolPolicyRoutesThroughItsAccountsUnderItsLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
		tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, policy: {mode: pool, pool: cheap}}\n", 1)
		tpl += "pools:\n  - {id: cheap, accounts: [org-2], max_inflight: 1}\n"
		h := newHarnessWith(t, tpl, state, simAccounts())
		statuses := make([]int, 4)
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() {
				statuses[i], _, _ = h.post(t.Context(), "/v1/chat/completions", testEnv["KEY_BG"], strings.Replace(chatBody, "fast", "two", 1))
			})
		}
		wg.Wait()
		allOK(t, statuses)
		org1 := h.simA.Count(upstreamKey("k1")) + h.simA.Count(upstreamKey("k2")) + h.simA.Count(upstreamKey("k3"))
		if peak := h.simA.MaxInFlight("org-2"); org1 != 0 || peak != 1 {
			t.Errorf("pool key: %d calls on org-1 (outside the pool), org-2 peak %d; want 0 and 1 (the pool's limit)", org1, peak)
		}
	})
}
