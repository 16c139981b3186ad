package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserSignInLanguagesAndSignOut: a write token signs in to the
// overview; the page switches to Chinese and back, and the choice survives
// a reload; the token is nowhere in the browser's storage; signing out
// shows the sign-in form again, and a reload stays signed out.
func TestBrowserSignInLanguagesAndSignOut(t *testing.T) {
	g := startGateway(t)
	ctx := newBrowser(t)

	run(t, ctx, "open", chromedp.Navigate(g.consoleURL("")), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	checkA11y(t, ctx, "sign-in")
	shot(t, ctx, "signin-en")
	run(t, ctx, "wrong token", chromedp.SendKeys(chromedp.CSS(`#token`), "not-a-token"), chromedp.Click(chromedp.CSS(`#signin button[type=submit]`)))
	waitText(t, ctx, "#signin-error", "not an admin token", testWait)

	eval[string](t, ctx, `document.getElementById('token').value = ''`)
	run(t, ctx, "sign in", chromedp.SendKeys(chromedp.CSS(`#token`), writeToken),
		chromedp.Click(chromedp.CSS(`#signin button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`#nav a[aria-current="page"]`)))
	waitText(t, ctx, "#who", "operator", testWait)
	waitText(t, ctx, "#page h1", "Overview", testWait)
	checkA11y(t, ctx, "overview")

	stored := eval[string](t, ctx, `JSON.stringify(localStorage)+JSON.stringify(sessionStorage)+document.cookie`)
	if strings.Contains(stored, writeToken) || strings.Contains(stored, "sluice_console") {
		t.Errorf("the browser's script-visible storage holds the token or the session cookie: %s", stored)
	}

	chooseLanguage(t, ctx, "zh")
	waitText(t, ctx, "#page h1", "概览", testWait)
	waitText(t, ctx, "#signout", "退出登录", testWait)
	run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#nav a[aria-current="page"]`)))
	waitText(t, ctx, "#page h1", "概览", testWait)
	if lang := eval[string](t, ctx, `document.documentElement.lang`); lang != "zh-CN" {
		t.Errorf("<html lang> = %q in Chinese, want zh-CN", lang)
	}
	chooseLanguage(t, ctx, "en")
	waitText(t, ctx, "#page h1", "Overview", testWait)

	run(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	run(t, ctx, "reload signed out", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	// Signed out, the language can still be chosen, and the navigation
	// is gone.
	if eval[bool](t, ctx, `document.getElementById('nav').offsetParent !== null || document.getElementById('signout').offsetParent !== null`) {
		t.Error("signed out, the navigation or the sign-out button still shows")
	}
	inChinese(t, ctx, "signin", "#signin h1", "登录 Sluice")
}

// TestBrowserReadOnlySessionCannotWrite: a read token's session shows no
// write control, and a write sent with its cookie is refused 403 — without
// the CSRF token, and with it (the role, not the page, decides).
func TestBrowserReadOnlySessionCannotWrite(t *testing.T) {
	g := startGateway(t)
	ctx := newBrowser(t)
	signIn(t, ctx, g, readToken)
	waitText(t, ctx, "#who", "viewer", testWait)

	if !eval[bool](t, ctx, `document.body.classList.contains('readonly')`) {
		t.Error("a read-only session's page is not marked read-only")
	}
	for _, withCSRF := range []bool{false, true} {
		if status := eval[int](t, ctx, forgedWrite(withCSRF)); status != http.StatusForbidden {
			t.Errorf("POST /admin/keys from a read-only session (CSRF token sent: %v) = %d, want 403", withCSRF, status)
		}
	}
}

// forgedWrite is a script that creates a key through the admin API with the
// page's cookie, sending the session's CSRF token or not; it evaluates to
// the answer's status.
func forgedWrite(withCSRF bool) string {
	csrf := `{}`
	if withCSRF {
		csrf = `{'X-Sluice-CSRF': (await (await fetch('/console/session')).json()).csrf}`
	}
	return `(async () => (await fetch('/admin/keys', {method: 'POST', credentials: 'same-origin',
		headers: Object.assign({'Content-Type': 'application/json'}, ` + csrf + `),
		body: JSON.stringify({id: 'forged', tenant: 'web'})})).status)()`
}
