package console_test

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserUsageFiltersAndCSV: after chats with two keys the records
// show with their alias and keys; filtering by one key leaves only its
// records; the CSV link of the filtered view answers the same requests.
func TestBrowserUsageFiltersAndCSV(t *testing.T) {
	g := startGateway(t)
	status, body := adminCall(t, g, "POST", "/admin/keys", writeToken,
		`{"id": "batch", "name": "batch", "tenant": "batch", "billing_account": "acme"}`, nil)
	var issued struct{ Key string }
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &issued) != nil || issued.Key == "" {
		t.Fatalf("create key batch: %d %s", status, body)
	}
	if status, body := adminCall(t, g, "POST", "/admin/billing/accounts/acme/topup", writeToken, `{"amount": "10"}`, nil); status != http.StatusOK {
		t.Fatalf("top up acme: %d %s", status, body)
	}
	for range 2 {
		if status, body := chat(t, g, keyWeb, "fast"); status != http.StatusOK {
			t.Fatalf("chat as web: %d %s", status, body)
		}
	}
	if status, body := chat(t, g, issued.Key, "fast"); status != http.StatusOK {
		t.Fatalf("chat as batch: %d %s", status, body)
	}

	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "usage", "#usage-records")
	waitText(t, ctx, "#usage-records caption", "(3)", testWait)
	waitText(t, ctx, "#usage-records", "batch", testWait)
	waitText(t, ctx, "#usage-records", "gpt-4o-mini", testWait)
	if n := eval[int](t, ctx, `[...document.querySelectorAll('#usage-records tbody tr')].filter(r => r.cells[2].textContent === 'web' && r.cells[6].textContent === 'fast').length`); n != 2 {
		t.Errorf("records of key web on alias fast shown: %d, want 2", n)
	}
	waitText(t, ctx, "#usage-cache", "org-", testWait)
	waitText(t, ctx, "#usage-policy", "web", testWait)
	checkA11y(t, ctx, "usage")
	shot(t, ctx, "usage-en")

	run(t, ctx, "filter by key", chromedp.SendKeys(chromedp.CSS(`#usage-key`), "batch"), chromedp.Click(chromedp.CSS(`#usage-apply`)))
	waitText(t, ctx, "#usage-records caption", "(1)", testWait)
	shown := eval[[]string](t, ctx, `[...document.querySelectorAll('#usage-records tbody tr')].map(r => r.cells[1].textContent + ' ' + r.cells[2].textContent)`)
	if len(shown) != 1 || !strings.HasSuffix(shown[0], " batch") {
		t.Fatalf("records with key=batch: %q, want the one request of key batch", shown)
	}
	// The CSV link, fetched with the page's session, holds the same request.
	text := eval[string](t, ctx, `fetch(document.getElementById('usage-csv').href, {credentials: 'same-origin'}).then(r => r.text())`)
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(rows) < 1 {
		t.Fatalf("CSV of the filtered view: %v %q", err, text)
	}
	id, keyCol := slices.Index(rows[0], "request_id"), slices.Index(rows[0], "key_id")
	if len(rows) != 2 || id < 0 || keyCol < 0 || rows[1][keyCol] != "batch" || !strings.HasPrefix(shown[0], rows[1][id]+" ") {
		t.Errorf("CSV of the filtered view = %q, want the one record shown (%q)", rows, shown[0])
	}

	inChinese(t, ctx, "usage", "#page h1", "用量", "#usage-records caption", "请求记录")
}
