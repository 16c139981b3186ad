package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/simulator"
)

// topUp puts money on billing account acme, which key web is billed to:
// without it, every chat request of the key is refused.
func topUp(t *testing.T, g *consoleGateway) {
	t.Helper()
	if status, body := adminCall(t, g, "POST", "/admin/billing/accounts/acme/topup", writeToken, `{"amount":"100"}`,
		http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"console-test-topup"}}); status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("top up acme: %d %s", status, body)
	}
}

// TestBrowserAccountsShowCooldownLiveAndDrain: a 429 from the upstream on
// a chat request cools both accounts, which the open page shows without a
// reload, counting down, and then shows ready again when the cooldown
// ends; draining a credential through its button and the confirmation
// shows it draining, as the admin API says it is; an account suspended
// with a reason shows suspended with it, and ready once resumed.
func TestBrowserAccountsShowCooldownLiveAndDrain(t *testing.T) {
	g := startGateway(t)
	topUp(t, g)
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "accounts", `[data-account="org-a"] .state`)
	waitText(t, ctx, `[data-account="org-a"] .state`, "ready", testWait)
	waitText(t, ctx, `[data-credential="cred-a1"]`, "active", testWait)
	// A marker on the document: a reload would drop it.
	eval[bool](t, ctx, `window.notReloaded = true`)

	for _, secret := range []string{upstreamA1, upstreamA2, upstreamB1} {
		g.sim.SetKey(secret, simulator.Behavior{FailStatus: 429, RetryAfter: 3 * time.Second})
	}
	if status, body := chat(t, g, keyWeb, "fast"); status != http.StatusTooManyRequests && status < 500 {
		t.Fatalf("chat with every upstream answering 429 = %d %s, want a failure", status, body)
	}
	waitText(t, ctx, `[data-account="org-a"] .state`, "cooling down", 3*time.Second)
	waitText(t, ctx, `[data-account="org-a"] .countdown`, "left", time.Second)
	checkA11y(t, ctx, "accounts")
	for _, secret := range []string{upstreamA1, upstreamA2, upstreamB1} {
		g.sim.SetKey(secret, simulator.Behavior{})
	}
	waitText(t, ctx, `[data-account="org-a"] .state`, "ready", 10*time.Second)
	if got := eval[string](t, ctx, `(document.querySelector('[data-account="org-a"] .countdown')||{}).textContent`); got != "" {
		t.Errorf("a ready account still counts down: %q", got)
	}
	if !eval[bool](t, ctx, `window.notReloaded === true`) {
		t.Error("the page reloaded to show the cooldown")
	}

	// The upstream picture of org-a counts the 429s its credentials got, as
	// the admin API does.
	var account struct {
		Picture struct {
			Windows []struct {
				Account struct {
					RateLimited int `json:"rate_limited"`
				} `json:"account"`
			} `json:"windows"`
		} `json:"picture"`
	}
	_, body := adminCall(t, g, "GET", "/admin/accounts/org-a", writeToken, "", nil)
	if err := json.Unmarshal([]byte(body), &account); err != nil || len(account.Picture.Windows) == 0 || account.Picture.Windows[0].Account.RateLimited == 0 {
		t.Fatalf("org-a's picture after the 429s: %s (%v)", body, err)
	}
	run(t, ctx, "open the picture", chromedp.Click(chromedp.CSS(`[data-account="org-a"] details summary`)))
	waitText(t, ctx, `[data-account="org-a"] .picture tbody tr:first-child td:nth-child(6)`, fmt.Sprint(account.Picture.Windows[0].Account.RateLimited), testWait)
	waitText(t, ctx, `[data-account="org-a"] .picture tbody tr:first-child`, "15m", testWait)

	run(t, ctx, "drain cred-a1", chromedp.Click(chromedp.CSS(`[data-credential="cred-a1"] button[aria-label="Drain cred-a1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)))
	waitText(t, ctx, `dialog.confirm`, "Drain credential cred-a1", testWait)
	confirmYes(t, ctx)
	waitText(t, ctx, `[data-credential="cred-a1"]`, "draining", 3*time.Second)
	if _, body := adminCall(t, g, "GET", "/admin/credentials/cred-a1", writeToken, "", nil); !strings.Contains(body, `"status":"draining"`) {
		t.Errorf("after the drain the admin API shows cred-a1 as %s", body)
	}
	run(t, ctx, "suspend org-b", chromedp.SendKeys(chromedp.CSS(`#suspend-org-b`), "invoice disputed"),
		chromedp.Click(chromedp.CSS(`button[aria-label="Suspend org-b"]`)), chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)))
	confirmYes(t, ctx)
	waitText(t, ctx, `[data-account="org-b"] .state`, "suspended", 3*time.Second)
	waitText(t, ctx, `[data-account="org-b"] .reason`, "invoice disputed", time.Second)
	if _, body := adminCall(t, g, "GET", "/admin/accounts/org-b", writeToken, "", nil); !strings.Contains(body, `"status":"disabled"`) {
		t.Errorf("after the suspension the admin API shows org-b as %s", body)
	}
	shot(t, ctx, "accounts-en")
	run(t, ctx, "resume org-b", chromedp.Click(chromedp.CSS(`button[aria-label="Resume org-b"]`)), chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)))
	confirmYes(t, ctx)
	waitText(t, ctx, `[data-account="org-b"] .state`, "ready", 3*time.Second)

	inChinese(t, ctx, "accounts", `[data-credential="cred-a1"]`, "排空中", `[data-account="org-b"] .state`, "可用")
}

// modelUnitsCatalog is consoleCatalog with a per-model unit of three
// slots for gpt-4o-mini under org-a.
var modelUnitsCatalog = strings.Replace(consoleCatalog,
	"{id: org-a, max_inflight: 4, cooldown: {base: 2s, max: 4s}}",
	"{id: org-a, max_inflight: 4, cooldown: {base: 2s, max: 4s}, models: {gpt-4o-mini: {max_inflight: 3}}}", 1)

// TestBrowserAccountsReadOnlyHasNoActions: a read-only session sees the
// accounts, their per-model units and credentials, but no action.
func TestBrowserAccountsReadOnlyHasNoActions(t *testing.T) {
	g := startGatewayOf(t, modelUnitsCatalog)
	ctx := newBrowser(t)
	signIn(t, ctx, g, readToken)
	visit(t, ctx, "accounts", `[data-credential="cred-b1"]`)
	waitText(t, ctx, `[data-credential="cred-b1"]`, "active", testWait)
	waitText(t, ctx, `[data-account="org-a"] table`, "Per-model units of org-a", testWait)
	waitText(t, ctx, `[data-account="org-a"] table tbody tr`, "gpt-4o-mini0 of 3 in flight", testWait)
	checkA11y(t, ctx, "accounts-read-only")
	if n := eval[int](t, ctx, `[...document.querySelectorAll('#page button')].filter(b => b.offsetParent !== null).length`); n != 0 {
		t.Errorf("a read-only session sees %d buttons on the accounts page", n)
	}
}
