package app_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// TestInteractiveOvertakesWaitingBackground: org-1 is full and background
// requests wait; an interactive request that arrives later is served before
// them, and a background key cannot claim interactive priority.
func TestInteractiveOvertakesWaitingBackground(t *testing.T) {
	eachWire(t, callerWires, func(t *testing.T, w wire) {
		eachBackend(t, func(t *testing.T, state string) {
			tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
			tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, priority: background}\n  - {id: ui, tenant: web, secret_env: KEY_UI, priority: interactive}\n", 1)
			h := w.harness(t, tpl, state, simAccounts())
			for _, id := range []string{"k1", "k2", "k3"} {
				// Long enough that the fills still run while the test queues
				// every request and reads the queue's views on a busy machine.
				h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-1", Latency: time.Second})
			}
			send := func(key, tag string, hdr map[string]string) {
				if status, body := h.ask(t.Context(), w.caller, key, "one", tag, hdr); status != http.StatusOK {
					t.Errorf("%s = %d %s, want 200", tag, status, body)
				}
			}
			var wg sync.WaitGroup
			for _, tag := range []string{"fill-1", "fill-2"} {
				wg.Go(func() { send(keyWeb, tag, nil) })
			}
			eventually(t, 2*time.Second, "org-1 full", func() bool { return h.simA.InFlight() == 2 })
			for _, tag := range []string{"bg-1", "bg-2", "bg-3"} {
				wg.Go(func() { send(testEnv["KEY_BG"], tag, map[string]string{"X-Sluice-Priority": "interactive"}) })
			}
			eventually(t, 2*time.Second, "background queued", func() bool { return h.accounts(t)["org-1"].WaitingByClass["background"] == 3 })
			wg.Go(func() { send(testEnv["KEY_UI"], "ui-1", nil) })
			eventually(t, 2*time.Second, "interactive queued", func() bool { return h.accounts(t)["org-1"].WaitingByClass["interactive"] == 1 })
			if a := h.accounts(t)["org-1"]; a.WaitingByTenant["batch"] != 3 || a.OldestWaitByClass["background"].IsZero() {
				t.Errorf("queue view = %+v, want 3 waiting for tenant batch and the oldest background arrival", a)
			}
			if _, m := h.adminGet("/metrics"); !strings.Contains(m, `sluice_account_queue_depth_by_tenant{account="org-1",tenant="batch"} 3`) ||
				!strings.Contains(m, `sluice_account_queue_oldest_wait_seconds{account="org-1",class="background"}`) {
				t.Errorf("metrics lack the queue's depth by tenant or its oldest wait")
			}
			wg.Wait()
			var order []string
			for _, r := range h.simA.Requests() {
				for _, tag := range []string{"fill-1", "fill-2", "bg-1", "bg-2", "bg-3", "ui-1"} {
					if strings.Contains(string(r.Body), `"`+tag+`"`) {
						order = append(order, tag)
					}
				}
			}
			if len(order) != 6 || !strings.HasPrefix(order[2], "ui") && !strings.HasPrefix(order[3], "ui") {
				t.Errorf("upstream order = %v, want ui-1 among the first two after the fill, ahead of the waiting background", order)
			}
			w.wantUpstreamCalls(t, h)
		})
	})
}
