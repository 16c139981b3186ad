package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserKeysCreateUseEditRotate: a key created in the form works on
// the data plane with the secret the page showed once; an edit of its
// limits reaches the admin API; a rotation shows a new secret that works
// while the old one no longer does.
func TestBrowserKeysCreateUseEditRotate(t *testing.T) {
	g := startGateway(t)
	topUp(t, g)
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "keys", `#keys-list table`)
	waitText(t, ctx, "#keys-list", "web", testWait)
	checkA11y(t, ctx, "keys")

	run(t, ctx, "open the form", chromedp.Click(chromedp.CSS(`#new-key`)), chromedp.WaitVisible(chromedp.CSS(`#key-name`)))
	run(t, ctx, "fill the form",
		chromedp.SendKeys(chromedp.CSS(`#key-id`), "ui-key"),
		chromedp.SendKeys(chromedp.CSS(`#key-name`), "made in the console"),
		chromedp.SendKeys(chromedp.CSS(`#key-tenant`), "web"),
		chromedp.SendKeys(chromedp.CSS(`#key-models`), "fast"),
		chromedp.SendKeys(chromedp.CSS(`#key-labels`), "team=ui, env=test"),
		chromedp.SendKeys(chromedp.CSS(`#key-billing`), "acme"),
		chromedp.Click(chromedp.CSS(`#path-chat`)))
	checkA11y(t, ctx, "keys-new")
	run(t, ctx, "create", chromedp.Click(chromedp.CSS(`form.key-form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`#new-secret`)))
	secret := eval[string](t, ctx, `document.getElementById('new-secret').textContent`)
	if !strings.HasPrefix(secret, "sk-") {
		t.Fatalf("the page shows %q as the new key", secret)
	}
	if status, body := chat(t, g, secret, "fast"); status != http.StatusOK {
		t.Fatalf("chat with the key created in the console = %d %s, want 200", status, body)
	}
	_, rec := adminCall(t, g, "GET", "/admin/keys/ui-key", writeToken, "", nil)
	for _, want := range []string{`"paths":["chat"]`, `"billing_account":"acme"`, `"team":"ui"`, `"models":["fast"]`} {
		if !strings.Contains(rec, want) {
			t.Errorf("the created key %s lacks %s", rec, want)
		}
	}

	visit(t, ctx, "keys/ui-key", `#edit-key`)
	run(t, ctx, "edit limits", chromedp.SendKeys(chromedp.CSS(`#edit-key input[data-limit="tpm"]`), "5000"),
		chromedp.Click(chromedp.CSS(`#edit-key button[type=submit]`)))
	waitText(t, ctx, "#key-facts", "5,000", testWait)
	if _, rec := adminCall(t, g, "GET", "/admin/keys/ui-key", writeToken, "", nil); !strings.Contains(rec, `"tpm":5000`) || !strings.Contains(rec, `"paths":["chat"]`) {
		t.Errorf("after the edit the key is %s, want tpm 5000 and its paths kept", rec)
	}
	checkA11y(t, ctx, "keys-edit")
	shot(t, ctx, "keys-edit-en")

	run(t, ctx, "rotate", chromedp.Click(chromedp.CSS(`button[data-action="rotate"]`)), chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)))
	waitText(t, ctx, "dialog.confirm", "Rotate key ui-key", testWait)
	run(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`dialog.confirm button.primary`)), chromedp.WaitVisible(chromedp.CSS(`#new-secret`)))
	rotated := eval[string](t, ctx, `document.getElementById('new-secret').textContent`)
	if status, _ := chat(t, g, rotated, "fast"); rotated == secret || status != http.StatusOK {
		t.Errorf("chat with the rotated key = %d (same secret: %v), want 200 with a new one", status, rotated == secret)
	}
	if status, _ := chat(t, g, secret, "fast"); status != http.StatusUnauthorized {
		t.Errorf("chat with the key before its rotation = %d, want 401", status)
	}

	chooseLanguage(t, ctx, "zh")
	waitText(t, ctx, "#key-facts", "租户", testWait)
	chooseLanguage(t, ctx, "en")
}

// TestBrowserKeysFilterAndBatch: the selector filters the list; a batch
// change shows its dry run before Apply is enabled, changes nothing until
// applied, and then changes what the preview said.
func TestBrowserKeysFilterAndBatch(t *testing.T) {
	g := startGateway(t)
	for _, id := range []string{"b-1", "b-2"} {
		if status, body := adminCall(t, g, "POST", "/admin/keys", writeToken,
			`{"id":"`+id+`","name":"batch","tenant":"web","labels":{"team":"batch"}}`, http.Header{"Content-Type": {"application/json"}}); status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, status, body)
		}
	}
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "keys", `#keys-list table`)
	waitText(t, ctx, "#keys-list caption", "(3)", testWait)
	run(t, ctx, "filter", chromedp.SendKeys(chromedp.CSS(`#key-selector`), "team=batch"), chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)))
	waitText(t, ctx, "#keys-list caption", "(2)", testWait)
	if got := eval[string](t, ctx, `[...document.querySelectorAll('#keys-list tbody tr th, #keys-list tbody tr td:first-child')].map(c => c.textContent).join(' ')`); got != "b-1 b-2" {
		t.Errorf("the list filtered by team=batch shows %q, want b-1 b-2", got)
	}

	run(t, ctx, "open batch", chromedp.Click(chromedp.CSS(`#batch-keys`)), chromedp.WaitVisible(chromedp.CSS(`#batch-selector`)))
	run(t, ctx, "choose set_limits", chromedp.SetValue(chromedp.CSS(`#batch-op`), "set_limits"))
	eval[bool](t, ctx, `document.getElementById('batch-op').dispatchEvent(new Event('change', {bubbles: true}))`)
	run(t, ctx, "fill batch", chromedp.SendKeys(chromedp.CSS(`#batch-selector`), "team=batch"),
		chromedp.SendKeys(chromedp.CSS(`form.key-form input[data-limit="rpm"]`), "60"))
	if !eval[bool](t, ctx, `document.getElementById('batch-apply').disabled`) {
		t.Fatal("Apply is enabled before a preview")
	}
	if shown := eval[[]string](t, ctx, `[...document.querySelectorAll('form.key-form legend')].filter(e => e.offsetParent !== null).map(e => e.textContent)`); len(shown) != 1 || shown[0] != "Limits" {
		t.Errorf("for set_limits the batch form shows the groups %q, want only Limits", shown)
	}
	run(t, ctx, "preview", chromedp.Click(chromedp.CSS(`#batch-preview-button`)))
	waitText(t, ctx, "#batch-summary", "2 keys would change", testWait)
	waitText(t, ctx, "#batch-preview table", `"rpm":60`, testWait)
	if eval[bool](t, ctx, `document.getElementById('batch-apply').disabled`) {
		t.Fatal("Apply stays disabled after the preview")
	}
	if _, rec := adminCall(t, g, "GET", "/admin/keys/b-1", writeToken, "", nil); strings.Contains(rec, `"rpm"`) {
		t.Fatalf("the dry run changed b-1: %s", rec)
	}
	checkA11y(t, ctx, "keys-batch")
	shot(t, ctx, "keys-batch-en")

	run(t, ctx, "apply", chromedp.Click(chromedp.CSS(`#batch-apply`)), chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)))
	confirmYes(t, ctx)
	waitText(t, ctx, "#batch-summary", "Applied: 2 keys changed", testWait)
	for _, id := range []string{"b-1", "b-2"} {
		if _, rec := adminCall(t, g, "GET", "/admin/keys/"+id, writeToken, "", nil); !strings.Contains(rec, `"limits":{"rpm":60}`) {
			t.Errorf("after the batch %s is %s, want rpm 60", id, rec)
		}
	}
	if _, rec := adminCall(t, g, "GET", "/admin/keys/web", writeToken, "", nil); strings.Contains(rec, `"rpm"`) {
		t.Errorf("the batch on team=batch changed key web: %s", rec)
	}

	inChinese(t, ctx, "keys", "#page h1", "批量修改")
}

// TestBrowserKeysReadOnlyHasNoWriteControls: a read-only session sees the
// keys and a key's page, but no create, edit, batch or life cycle control,
// and the create and batch routes show the list.
func TestBrowserKeysReadOnlyHasNoWriteControls(t *testing.T) {
	g := startGateway(t)
	ctx := newBrowser(t)
	signIn(t, ctx, g, readToken)
	visible := `[...document.querySelectorAll('#page button, #page form.key-form, #new-key, #batch-keys')].filter(e => e.offsetParent !== null).map(e => e.id || e.textContent)`
	for _, route := range []string{"keys", "keys/new", "keys/batch"} {
		visit(t, ctx, route, `#keys-list table`)
		waitText(t, ctx, "#keys-list", "web", testWait)
		if got := eval[[]string](t, ctx, visible); len(got) != 1 || got[0] != "Filter" {
			t.Errorf("#/%s shows a read-only session the controls %q, want only the filter", route, got)
		}
	}
	// A key created through the API, so that its page is not a catalog key's.
	if status, body := adminCall(t, g, "POST", "/admin/keys", writeToken, `{"id":"ro-1","name":"n","tenant":"web"}`,
		http.Header{"Content-Type": {"application/json"}}); status != http.StatusCreated {
		t.Fatalf("create ro-1: %d %s", status, body)
	}
	visit(t, ctx, "keys/ro-1", `#key-facts`)
	if got := eval[[]string](t, ctx, visible); len(got) != 0 {
		t.Errorf("a key's page shows a read-only session the controls %q", got)
	}
}
