package console_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserAuditShowsWhatChanged: disabling a stored key through the admin API
// shows in the audit log with its token and target, and its diff holds the
// key's status before and after; filtering by action leaves only it.
func TestBrowserAuditShowsWhatChanged(t *testing.T) {
	g := startGateway(t)
	if status, body := adminCall(t, g, "POST", "/admin/keys", writeToken,
		`{"id": "batch", "name": "batch", "tenant": "batch", "billing_account": "acme"}`, nil); status != http.StatusCreated {
		t.Fatalf("create key batch: %d %s", status, body)
	}
	if status, body := adminCall(t, g, "POST", "/admin/keys/batch/disable", writeToken, "", nil); status != http.StatusOK {
		t.Fatalf("disable key batch: %d %s", status, body)
	}
	if status, body := adminCall(t, g, "POST", "/admin/billing/accounts/acme/topup", writeToken, `{"amount": "3"}`, nil); status != http.StatusOK {
		t.Fatalf("top up acme: %d %s", status, body)
	}
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "audit", "#audit-log")
	waitText(t, ctx, "#audit-log", "keys.disable", testWait)
	waitText(t, ctx, "#audit-log", "billing.topup", testWait)

	row := `[...document.querySelectorAll('#audit-log > tbody > tr')].find(r => r.cells[2].textContent === 'keys.disable')`
	if got := eval[string](t, ctx, `(() => { const r = `+row+`; return r.cells[1].textContent + '|' + r.cells[3].textContent })()`); got != "operator (127.0.0.1)|batch" {
		t.Errorf("keys.disable entry's token and targets = %q, want operator (127.0.0.1)|batch", got)
	}
	eval[bool](t, ctx, `(() => { `+row+`.querySelector('summary').click(); return true })()`)
	diff := eval[string](t, ctx, `(() => { const tr = [...`+row+`.querySelectorAll('tbody tr')].find(x => x.cells[0].textContent === 'batch.status');
		return tr ? tr.cells[1].textContent + ' → ' + tr.cells[2].textContent : '' })()`)
	if diff != `"active" → "disabled"` {
		t.Errorf("keys.disable diff of batch.status = %q, want \"active\" → \"disabled\"", diff)
	}
	checkA11y(t, ctx, "audit")
	shot(t, ctx, "audit-en")

	run(t, ctx, "filter by action", chromedp.SendKeys(chromedp.CSS(`#audit-action`), "billing.topup"), chromedp.Click(chromedp.CSS(`#audit-apply`)))
	waitText(t, ctx, "#audit-log caption", "(1)", testWait)
	waitText(t, ctx, "#audit-log", "acme", testWait)

	inChinese(t, ctx, "audit", "#page h1", "审计日志", "#audit-log caption", "管理写操作")
}
