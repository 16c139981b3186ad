package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// TestTPMReservationIsCorrectedByMeasuredUsage: an account with tpm 1000
// admits a request that reserves ~530 tokens (the prompt estimate plus the
// default output allowance, as it sets no max_tokens); a second one does not
// fit until the first settles and its reservation shrinks to the ~30 tokens
// it really used — then it runs at once instead of waiting half a minute for
// the window.
func TestTPMReservationIsCorrectedByMeasuredUsage(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+
			"  - {id: k9, account: org-t, secret_env: K9, endpoints: [ep-a], models: [m-tpm]}\nmodels:\n"+
			"  - alias: tpm\n    deployments: [{model: m-tpm, endpoints: [ep-a]}]\n", 1)
		tpl = strings.Replace(tpl, "accounts:\n", "accounts:\n  - {id: org-t, quota_scope: account, tpm: 1000}\n", 1)
		h := newHarnessWith(t, tpl, state, simAccounts())
		body := `{"model":"tpm","messages":[{"role":"user","content":"short"}]}`
		start := time.Now()
		for i := range 2 {
			if s, _, b := h.post(t.Context(), "/v1/chat/completions", keyWeb, body); s != http.StatusOK {
				t.Fatalf("request %d = %d %s", i, s, b)
			}
		}
		// Without the correction the second request would wait ~30s for the
		// window (and time out after wait_timeout 10s).
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("two requests took %v, want the second admitted once the first's usage corrected the window", d)
		}
		// A request reserving more than the window has left waits for it,
		// and gives up at its deadline: 530+530 > 1000 with nothing settling.
		big := `{"model":"tpm","max_tokens":900,"messages":[{"role":"user","content":"short"}]}`
		h.simA.SetKey(upstreamKey("k9"), simulator.Behavior{Account: "org-3", Latency: 2 * time.Second})
		go h.post(t.Context(), "/v1/chat/completions", keyWeb, big)
		eventually(t, 2*time.Second, "big request upstream", func() bool { return h.simA.InFlight() == 1 })
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if s, _, _ := h.post(ctx, "/v1/chat/completions", keyWeb, body); s != 0 {
			t.Errorf("request past the TPM window = %d, want it still waiting", s)
		}
	})
}

// TestAliasTokenEstimateIsReserved: an alias's token_estimate decides what
// its requests reserve. Under tpm 1000, two requests of 300 Chinese
// characters reserve ~320 tokens each by default and run together; with
// cjk_chars_per_token 0.5 they reserve ~620 each, so the second waits for
// the first to settle (and its measured ~307 tokens to correct the window).
// No timing is asserted beyond that: the simulator's peak in flight says
// whether they ran together.
func TestAliasTokenEstimateIsReserved(t *testing.T) {
	for _, tc := range []struct {
		estimate string
		together bool
	}{{"", true}, {"    token_estimate: {cjk_chars_per_token: 0.5}\n", false}} {
		tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+
			"  - {id: k9, account: org-t, secret_env: K9, endpoints: [ep-a], models: [m-tpm]}\nmodels:\n"+
			"  - alias: tpm\n"+tc.estimate+"    deployments: [{model: m-tpm, endpoints: [ep-a]}]\n", 1)
		tpl = strings.Replace(tpl, "accounts:\n", "accounts:\n  - {id: org-t, quota_scope: account, tpm: 1000}\n", 1)
		h := newHarnessWith(t, tpl, "{backend: memory}", simAccounts())
		// Long enough that two requests started together overlap upstream
		// on a loaded machine.
		h.simA.SetKey(upstreamKey("k9"), simulator.Behavior{Latency: 1500 * time.Millisecond})
		body := `{"model":"tpm","max_tokens":1,"messages":[{"role":"user","content":"` + strings.Repeat("请", 300) + `"}]}`
		// Both must be answered 200 well before the window would pass on
		// its own (~14 s): the second runs once the first's measured
		// usage corrected it.
		ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
		defer cancel()
		done := make(chan struct{}, 2)
		for range 2 {
			go func() {
				if s, _, b := h.post(ctx, "/v1/chat/completions", keyWeb, body); s != http.StatusOK {
					t.Errorf("request = %d %s", s, b)
				}
				done <- struct{}{}
			}()
		}
		<-done
		<-done
		if together := h.simA.MaxInFlight("") == 2; together != tc.together {
			t.Errorf("token_estimate %q: the two requests ran together: %v, want %v", strings.TrimSpace(tc.estimate), together, tc.together)
		}
	}
}
