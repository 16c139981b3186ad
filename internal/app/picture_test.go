package app_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/simulator"
)

// TestUpstreamPicture: of org-c's two credentials (quota_scope
// credential), k6 is throttled while k7 serves: the account's picture says
// credential-limited, and the metrics put the 429s and the cooldown on k6
// alone. Then k7 is throttled too: account-limited.
func TestUpstreamPicture(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAccountsHarness(t, chatWire, state)
		scoped := strings.Replace(chatBody, "fast", "scoped", 1)
		throttled := simulator.Behavior{FailStatus: 429, RetryAfter: 300 * time.Millisecond, Latency: 20 * time.Millisecond}
		k6, k7 := upstreamKey("k6"), upstreamKey("k7")
		throttled.Account = "k6"
		h.simA.SetKey(k6, throttled)

		// Until k6 has been throttled twice (its first 429, then its probe
		// after the cooldown), every request is served, by k7.
		for i := 0; h.simA.Count(k6) < 2; i++ {
			if i == 50 {
				t.Fatalf("k6 was called %d times in 50 requests, want 2", h.simA.Count(k6))
			}
			if s, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, scoped); s != 200 {
				t.Fatalf("status = %d %s, want 200 from k7", s, body)
			}
		}
		limited6 := h.simA.Count(k6)
		now := h.pictureWhen(t, "org-c", func(w admin.PictureWindow) bool { return w.Account.RateLimited == int64(limited6) })
		if now.Limited != admin.LimitedCredential {
			t.Errorf("verdict = %q, want credential: k7 was served, never throttled", now.Limited)
		}
		if c := counts(t, now, "k6"); c.RateLimited != int64(limited6) || c.OK != 0 {
			t.Errorf("k6 in the last 15m = %+v, want %d rate limited, none served", c, limited6)
		}
		if c := counts(t, now, "k7"); c.RateLimited != 0 || c.OK < 1 || c.PromptTokens == 0 {
			t.Errorf("k7 in the last 15m = %+v, want served, never throttled, with its prompt tokens", c)
		}
		executions := func(credential, class string) string {
			return h.metric(`sluice_upstream_executions_total{account="org-c",class="` + class + `",credential="` + credential + `",endpoint="ep-a"}`)
		}
		if got, ok := executions("k6", "rate"), executions("k7", "rate"); got != strconv.Itoa(limited6) || ok != "0" {
			t.Errorf("rate-limited executions: k6 %s, k7 %s; want %d, 0", got, ok, limited6)
		}
		if served := executions("k7", "ok"); served == "0" {
			t.Error("k7's ok executions = 0, want its answers counted")
		}
		if prompt := h.metric(`sluice_upstream_tokens_total{account="org-c",credential="k7",kind="prompt"}`); prompt == "0" {
			t.Error("k7's prompt tokens = 0, want its measured usage")
		}
		cooled := func(credential string) float64 {
			v, _ := strconv.ParseFloat(h.metric(`sluice_upstream_cooldown_seconds_total{account="org-c",credential="`+credential+`",model=""}`), 64)
			return v
		}
		// Each 429 asked for 300ms, and the probe's came after the first
		// cooldown ended: they add up.
		if c6, c7 := cooled("k6"), cooled("k7"); c6 < 0.3*float64(limited6)-0.01 || c7 != 0 {
			t.Errorf("cooldown seconds: k6 %v, k7 %v; want at least %v, 0", c6, c7, 0.3*float64(limited6))
		}

		// k7 is throttled too: the request waits out both cooldowns (its
		// caller gives up first), and the account is limited as a whole.
		throttled.Account = "k7"
		h.simA.SetKey(k7, throttled)
		served7 := h.simA.Count(k7)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		h.post(ctx, "/v1/chat/completions", keyWeb, scoped)
		cancel()
		if h.simA.Count(k7) == served7 {
			t.Fatal("k7 was not called after it was throttled")
		}
		now = h.pictureWhen(t, "org-c", func(w admin.PictureWindow) bool { return w.Limited == admin.LimitedAccount })
		if c := counts(t, now, "k7"); c.RateLimited < 1 || c.OK < 1 {
			t.Errorf("k7 in the last 15m = %+v, want served, then throttled", c)
		}
		if got := executions("k7", "rate"); got == "0" {
			t.Error("k7's rate-limited executions = 0 after its 429s")
		}
		// Labels and views name credentials by ID, never by secret.
		_, view := h.adminGet("/admin/accounts/org-c")
		_, metrics := h.adminGet("/metrics")
		for _, secret := range []string{k6, k7} {
			if strings.Contains(view, secret) || strings.Contains(metrics, secret) {
				t.Errorf("the account's view or the metrics carry the upstream secret %s", secret)
			}
		}
	})
}

// pictureWhen waits until the last 15 minutes of account's upstream
// picture are ready (the usage writer stores the executions a little
// after the answers), and returns them.
func (h *harness) pictureWhen(t *testing.T, account string, ready func(admin.PictureWindow) bool) admin.PictureWindow {
	t.Helper()
	var a admin.AccountState
	eventually(t, 5*time.Second, "the picture of "+account, func() bool {
		h.adminJSON(t, "/admin/accounts/"+account, &a)
		return a.Picture != nil && len(a.Picture.Windows) == 2 && ready(a.Picture.Windows[0])
	})
	return a.Picture.Windows[0]
}

// counts are the credential's counts in the window w.
func counts(t *testing.T, w admin.PictureWindow, credential string) admin.UpstreamCounts {
	t.Helper()
	for _, c := range w.Credentials {
		if c.ID == credential {
			return c.UpstreamCounts
		}
	}
	t.Fatalf("window %s has no counts for %s: %+v", w.Window, credential, w.Credentials)
	return admin.UpstreamCounts{}
}
