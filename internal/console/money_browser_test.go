package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// waitChat sends chats until one answers want (suspensions reach
// admission at the next refresh of the keyring, within a second or two),
// and returns that answer's body.
func waitChat(t *testing.T, g *consoleGateway, want int) string {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		status, body := chat(t, g, keyWeb, "fast")
		if status == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat = %d %s, want %d within %v", status, body, want, testWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBrowserMoneyTopUpSuspendResume: the accounts list shows acme; on its
// page a top-up clicked twice posts once and shows in the balance; a
// suspension from the page makes the data plane refuse acme's key with 403
// billing_account_suspended, and resuming serves it again.
func TestBrowserMoneyTopUpSuspendResume(t *testing.T) {
	g := startGateway(t)
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)

	visit(t, ctx, "money", "#money-accounts")
	waitText(t, ctx, "#money-accounts", "acme", testWait)
	waitText(t, ctx, "#money-prices", "fast", testWait)
	waitText(t, ctx, "#money-spend", "Total", testWait)
	checkA11y(t, ctx, "money")
	shot(t, ctx, "money-en")

	visit(t, ctx, "money/acme", "#money-topup-amount")
	waitText(t, ctx, "#money-balance", "$0.00", testWait)
	run(t, ctx, "top-up amount", chromedp.SendKeys(chromedp.CSS(`#money-topup-amount`), "5.25"))
	// A double click: the second is ignored while the first is asked and posted.
	eval[bool](t, ctx, `(() => { const b = document.getElementById('money-topup-submit'); b.click(); b.click(); return true })()`)
	confirmYes(t, ctx)
	waitText(t, ctx, "#money-balance", "$5.25", testWait)
	waitText(t, ctx, "#money-statement", "Top-up", testWait)
	_, body := adminCall(t, g, "GET", "/admin/billing/accounts/acme/statement", writeToken, "", nil)
	var st struct {
		Entries []struct{ Kind, Amount string }
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Entries) != 1 || st.Entries[0].Kind != "topup" || st.Entries[0].Amount != "5.25" {
		t.Errorf("statement after a double-clicked top-up of 5.25 = %+v, want one top-up of 5.25", st.Entries)
	}
	waitChat(t, g, http.StatusOK)
	checkA11y(t, ctx, "money-account")
	shot(t, ctx, "money-account-en")

	run(t, ctx, "suspend", chromedp.SendKeys(chromedp.CSS(`#money-suspend-reason`), "unpaid invoice"),
		chromedp.Click(chromedp.CSS(`#money-suspend`)))
	confirmYes(t, ctx)
	waitText(t, ctx, "#money-status", "unpaid invoice", testWait)
	if body := waitChat(t, g, http.StatusForbidden); !strings.Contains(body, "billing_account_suspended") {
		t.Errorf("a suspended account's chat answered 403 %s, want the code billing_account_suspended", body)
	}

	inChinese(t, ctx, "money-account", "#money-status", "已暂停")
	waitText(t, ctx, "#money-status", "Suspended", testWait)

	run(t, ctx, "resume", chromedp.WaitVisible(chromedp.CSS(`#money-resume`)), chromedp.Click(chromedp.CSS(`#money-resume`)))
	confirmYes(t, ctx)
	waitText(t, ctx, "#money-status", "Active", testWait)
	waitChat(t, g, http.StatusOK)

	visit(t, ctx, "money", "#money-accounts")
	waitText(t, ctx, "#money-accounts", "Active", testWait)
	waitText(t, ctx, "#money-spend", "acme", testWait) // the chats served were charged to it
	// By day: today's row, drawn as a chart of price, cost and margin.
	run(t, ctx, "spend by day", chromedp.SetValue(chromedp.CSS(`#spend-by`), "day"))
	eval[bool](t, ctx, `document.getElementById('spend-by').dispatchEvent(new Event('change'))`)
	waitText(t, ctx, "#money-spend", time.Now().UTC().Format(time.DateOnly), testWait)
	if !eval[bool](t, ctx, `!!document.querySelector('svg.chart circle, svg.chart path.series')`) {
		t.Error("spend by day draws no chart")
	}
	inChinese(t, ctx, "money", "#page h1", "计费")
	waitText(t, ctx, "#page h1", "Money", testWait)

	// A read-only session sees the account, and no control that writes.
	run(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	signIn(t, ctx, g, readToken)
	visit(t, ctx, "money/acme", "#money-statement")
	if n := eval[int](t, ctx, `document.querySelectorAll('#page form, #money-suspend, #money-resume, #money-suspend-reason').length`); n != 0 {
		t.Errorf("a read-only session's money page shows %d write controls, want none", n)
	}
}
