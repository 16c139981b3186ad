package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
)

// signIn posts token to /console/session and returns the answer, its
// session cookie (nil when none) and the CSRF token it gave.
func signIn(t *testing.T, url, token string) (*http.Response, *http.Cookie, string) {
	t.Helper()
	resp, err := http.Post(url+"/console/session", "application/json", strings.NewReader(`{"token":"`+token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct{ CSRF, Role, TokenID string }
	json.NewDecoder(resp.Body).Decode(&info)
	for _, c := range resp.Cookies() {
		if c.Name == "sluice_console" {
			return resp, c, info.CSRF
		}
	}
	return resp, nil, info.CSRF
}

// withCookie sends method path with the session cookie and, unless "", the
// CSRF header.
func withCookie(t *testing.T, url, method, path string, c *http.Cookie, csrf, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.AddCookie(c)
	if csrf != "" {
		req.Header.Set("X-Sluice-CSRF", csrf)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestConsoleSession(t *testing.T) {
	h := newHarness(t)
	resp, cookie, csrf := signIn(t, h.url, testToken)
	if resp.StatusCode != http.StatusOK || cookie == nil || csrf == "" {
		t.Fatalf("sign-in = %d, cookie %v, csrf %q; want 200 with both", resp.StatusCode, cookie, csrf)
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Secure ||
		cookie.MaxAge != int(admin.SessionTTL/time.Second) {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Max-Age of the session, not Secure over plain HTTP", cookie)
	}
	if strings.Contains(cookie.Value, testToken) || strings.Contains(h.logs.String(), testToken) {
		t.Error("the admin token is in the cookie or the log")
	}

	if got := withCookie(t, h.url, http.MethodGet, "/admin/status", cookie, "", ""); got != http.StatusOK {
		t.Errorf("GET with the session = %d, want 200", got)
	}
	create := `{"id":"k1","name":"from the console","tenant":"web"}`
	for _, tc := range []struct {
		name, csrf string
		want       int
	}{
		{"without the CSRF token", "", http.StatusForbidden},
		{"with another CSRF token", csrf[:len(csrf)-2] + "xx", http.StatusForbidden},
		{"with its CSRF token", csrf, http.StatusCreated},
	} {
		if got := withCookie(t, h.url, http.MethodPost, "/admin/keys", cookie, tc.csrf, create); got != tc.want {
			t.Errorf("POST /admin/keys through the session %s = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := withCookie(t, h.url, http.MethodGet, "/console/session", cookie, "", ""); got != http.StatusOK {
		t.Errorf("GET /console/session = %d, want 200", got)
	}

	tampered := *cookie
	tampered.Value = strings.Replace(cookie.Value, ".", ".A", 1)
	if got := withCookie(t, h.url, http.MethodGet, "/admin/status", &tampered, "", ""); got != http.StatusUnauthorized {
		t.Errorf("GET with a tampered cookie = %d, want 401", got)
	}
	// A bearer token decides when both come: a wrong one is refused.
	req, _ := http.NewRequest(http.MethodGet, h.url+"/admin/status", nil)
	req.AddCookie(cookie)
	req.Header.Set("Authorization", "Bearer wrong")
	if r, _ := http.DefaultClient.Do(req); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong bearer token beside a good cookie = %d, want 401", r.StatusCode)
	}

	if got := withCookie(t, h.url, http.MethodDelete, "/console/session", cookie, "", ""); got != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token = %d, want 403", got)
	}
	req, _ = http.NewRequest(http.MethodDelete, h.url+"/console/session", nil)
	req.AddCookie(cookie)
	req.Header.Set("X-Sluice-CSRF", csrf)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNoContent || len(r.Cookies()) != 1 || r.Cookies()[0].MaxAge >= 0 {
		t.Errorf("sign-out = %d, cookies %v; want 204 clearing the cookie", r.StatusCode, r.Cookies())
	}
}

func TestConsoleCookieIsSecureBehindHTTPS(t *testing.T) {
	h := newHarness(t)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/console/session", strings.NewReader(`{"token":"`+testToken+`"}`))
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Errorf("cookies %v behind an HTTPS proxy, want one Secure cookie", resp.Cookies())
	}
}

func TestConsoleReadSessionCannotWrite(t *testing.T) {
	h := newHarness(t)
	_, cookie, csrf := signIn(t, h.url, testReadToken)
	if cookie == nil {
		t.Fatal("the read token could not sign in")
	}
	if got := withCookie(t, h.url, http.MethodGet, "/admin/keys", cookie, "", ""); got != http.StatusOK {
		t.Errorf("GET through a read session = %d, want 200", got)
	}
	if got := withCookie(t, h.url, http.MethodPost, "/admin/keys", cookie, csrf, `{"id":"x","tenant":"web"}`); got != http.StatusForbidden {
		t.Errorf("POST through a read session with its CSRF token = %d, want 403", got)
	}
}

// TestConsoleSessionEnds: at its expiry, and at once when its token's
// secret changes (another server with the same token ID but a new secret
// does not accept it).
func TestConsoleSessionEnds(t *testing.T) {
	h := newHarness(t)
	_, cookie, _ := signIn(t, h.url, testToken)
	now := time.Now()
	admin.SetClock(h.handler, func() time.Time { return now.Add(admin.SessionTTL - time.Minute) })
	if got := withCookie(t, h.url, http.MethodGet, "/admin/status", cookie, "", ""); got != http.StatusOK {
		t.Errorf("a minute before expiry = %d, want 200", got)
	}
	admin.SetClock(h.handler, func() time.Time { return now.Add(admin.SessionTTL + time.Minute) })
	if got := withCookie(t, h.url, http.MethodGet, "/admin/status", cookie, "", ""); got != http.StatusUnauthorized {
		t.Errorf("after expiry = %d, want 401", got)
	}

	rotated := httptest.NewServer(admin.New(admin.Options{Keys: h.keys,
		Tokens: []admin.Token{{ID: "admin", Secret: "a-new-secret-for-admin", Role: admin.RoleWrite}}}))
	defer rotated.Close()
	_, fresh, _ := signIn(t, h.url, testToken)
	if got := withCookie(t, rotated.URL, http.MethodGet, "/admin/status", fresh, "", ""); got != http.StatusUnauthorized {
		t.Errorf("a session of a token whose secret changed = %d, want 401", got)
	}
}

func TestConsoleSignInRefusals(t *testing.T) {
	h := newHarness(t)
	for _, body := range []string{`{"token":"nope"}`, `{"token":""}`} {
		resp, err := http.Post(h.url+"/console/session", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("sign-in with %s = %d, cookies %v; want 401 and none", body, resp.StatusCode, resp.Cookies())
		}
	}
	resp, err := http.Post(h.url+"/console/session", "application/json", strings.NewReader(`{not json`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("sign-in with malformed JSON = %d, want 400", resp.StatusCode)
	}
	throttled := false
	for range 100 {
		resp, _, _ := signIn(t, h.url, "guess")
		if resp.StatusCode == http.StatusTooManyRequests {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Error("100 wrong sign-ins from one address were never throttled")
	}
	if got := withCookie(t, h.url, http.MethodGet, "/console/session", &http.Cookie{Name: "sluice_console", Value: "x.y"}, "", ""); got != http.StatusUnauthorized {
		t.Errorf("GET /console/session with a bogus cookie = %d, want 401", got)
	}
}

// TestConsolePageIsPublic: the console's page needs no token (it signs in
// first), carries the security policy, and /console redirects to it.
func TestConsolePageIsPublic(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do(t, http.MethodGet, "/console/", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form id="signin"`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("GET /console/ = %d %q, CSP %q", resp.StatusCode, body[:min(len(body), 80)], resp.Header.Get("Content-Security-Policy"))
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err := client.Get(h.url + "/console")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console = %d → %q, want a redirect to /console/", r.StatusCode, r.Header.Get("Location"))
	}
}
