package console_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// withProfiles is consoleCatalog with the quota profiles free (one in
// flight, 10 RPM; tenant web's default) and paid (priority bonus 1).
func withProfiles(doc string) string {
	return strings.Replace(doc, "keys:\n", `profiles:
  - {id: free, user_limits: {max_inflight: 1, rpm: 10}}
  - {id: paid, priority_bonus: 1}
tenants:
  - {id: web, default_profile: free}
keys:
`, 1)
}

// TestBrowserEntitlementsAndProfiles: the page shows the catalog's
// profiles; an entitlement set in the form is stored as the admin API
// lists it, and removing it (after a confirmation) deletes it.
func TestBrowserEntitlementsAndProfiles(t *testing.T) {
	g := startStoredGateway(t, withProfiles)
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "entitlements", "#entitlements-profiles")
	waitText(t, ctx, "#entitlements-profiles", "paid", testWait)
	row := eval[string](t, ctx, `[...document.querySelectorAll('#entitlements-profiles tbody tr')].find(r => r.cells[0].textContent === 'free').textContent`)
	for _, want := range []string{"10", "web"} {
		if !strings.Contains(row, want) {
			t.Errorf("profile free's row %q lacks %q", row, want)
		}
	}

	run(t, ctx, "set an entitlement",
		chromedp.SendKeys(chromedp.CSS(`#ent-tenant`), "web"),
		chromedp.SendKeys(chromedp.CSS(`#ent-user`), "alice"),
		chromedp.SetValue(chromedp.CSS(`#ent-profile`), "paid"),
		chromedp.Click(chromedp.CSS(`#ent-save`)))
	waitText(t, ctx, "#entitlements-list", "alice", testWait)
	_, body := adminCall(t, g, "GET", "/admin/entitlements?tenant=web", writeToken, "", nil)
	var listed []struct {
		User, Profile string
		ValidNow      bool `json:"valid_now"`
	}
	if err := json.Unmarshal([]byte(body), &listed); err != nil || len(listed) != 1 || listed[0].User != "alice" || listed[0].Profile != "paid" || !listed[0].ValidNow {
		t.Fatalf("entitlements of web after the form = %s, want alice's to paid, valid now", body)
	}
	checkA11y(t, ctx, "entitlements")
	shot(t, ctx, "entitlements-en")

	inChinese(t, ctx, "entitlements", "#page h1", "权益与配额方案", "#entitlements-list", "alice")
	waitText(t, ctx, "#entitlements-list caption", "Entitlements (1)", testWait)

	run(t, ctx, "remove", chromedp.WaitVisible(chromedp.CSS(`#entitlements-list button.danger`)),
		chromedp.Click(chromedp.CSS(`#entitlements-list button.danger`)))
	confirmYes(t, ctx)
	waitText(t, ctx, "#entitlements-list caption", "(0)", testWait)
	if _, body := adminCall(t, g, "GET", "/admin/entitlements?tenant=web", writeToken, "", nil); strings.TrimSpace(body) != "[]" {
		t.Errorf("entitlements of web after removing alice's = %s, want none", body)
	}
}
