package app_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
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
