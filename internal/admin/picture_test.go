package admin_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/ledger"
)

// rows is a report of executions of one account: credential, status,
// executions, prompt and cached tokens, 100ms each.
func rows(rs ...ledger.UpstreamRow) []ledger.UpstreamRow {
	for i := range rs {
		rs[i].Duration = time.Duration(rs[i].Executions) * 100 * time.Millisecond
	}
	return rs
}

func row(credential string, status sluice.ExecutionStatus, n, prompt, cached int64) ledger.UpstreamRow {
	return ledger.UpstreamRow{Credential: credential, Status: status, Executions: n, PromptTokens: prompt, CachedTokens: cached}
}

// GET /admin/accounts/{id} shows the account's picture: each window's
// counts per credential (every credential of the account, a removed one
// the executions name too) and in all, and its verdict.
func TestAccountPicture(t *testing.T) {
	h := newHarness(t)
	h.usage.upstream = map[time.Duration][]ledger.UpstreamRow{
		// Now: cred-1 throttled while cred-2 is served without a throttle.
		15 * time.Minute: rows(row("cred-1", sluice.ExecutionRate, 3, 0, 0), row("cred-1", sluice.ExecutionOK, 1, 100, 0),
			row("cred-2", sluice.ExecutionOK, 4, 1000, 400)),
		// Over the day, cred-2 was throttled too, and a removed credential failed.
		24 * time.Hour: rows(row("cred-1", sluice.ExecutionRate, 5, 0, 0), row("cred-2", sluice.ExecutionOK, 6, 1000, 400),
			row("cred-2", sluice.ExecutionRate, 1, 0, 0), row("cred-old", sluice.ExecutionEndpoint, 2, 0, 0)),
	}
	before := time.Now()
	a, err := h.client.Account(t.Context(), "acct-a")
	if err != nil {
		t.Fatal(err)
	}
	p := a.Picture
	if p == nil || len(p.Windows) != 2 || p.Error != "" {
		t.Fatalf("picture = %+v, want two windows", p)
	}
	if ids := []string{p.Credentials[0].ID, p.Credentials[1].ID}; len(p.Credentials) != 2 || ids[0] != "cred-1" || ids[1] != "cred-2" {
		t.Errorf("picture's credentials = %+v, want cred-1 and cred-2 (acct-a's)", p.Credentials)
	}
	for i, span := range []time.Duration{15 * time.Minute, 24 * time.Hour} {
		w := p.Windows[i]
		if w.To.Sub(w.From) != span || w.To.Before(before.Add(-time.Second)) || w.To.After(time.Now()) {
			t.Errorf("window %s = [%v, %v), want the %v up to now", w.Window, w.From, w.To, span)
		}
	}
	now := p.Windows[0]
	want := admin.PictureWindow{Window: "15m", From: now.From, To: now.To, Limited: admin.LimitedCredential,
		Account: admin.UpstreamCounts{Executions: 8, OK: 5, RateLimited: 3, PromptTokens: 1100, CachedTokens: 400, CachedShare: 400.0 / 1100, MeanOKMillis: 100},
		Credentials: []admin.CredentialCounts{
			{ID: "cred-1", UpstreamCounts: admin.UpstreamCounts{Executions: 4, OK: 1, RateLimited: 3, PromptTokens: 100, MeanOKMillis: 100}},
			{ID: "cred-2", UpstreamCounts: admin.UpstreamCounts{Executions: 4, OK: 4, PromptTokens: 1000, CachedTokens: 400, CachedShare: 0.4, MeanOKMillis: 100}},
		}}
	if diff := cmp.Diff(want, now, cmp.AllowUnexported(admin.UpstreamCounts{})); diff != "" {
		t.Errorf("15m window (-want +got):\n%s", diff)
	}
	day := p.Windows[1]
	if day.Limited != admin.LimitedAccount {
		t.Errorf("24h verdict = %q, want account: every credential served was throttled too", day.Limited)
	}
	if n := len(day.Credentials); n != 3 || day.Credentials[2].ID != "cred-old" || day.Credentials[2].Failed["endpoint"] != 2 {
		t.Errorf("24h credentials = %+v, want cred-1, cred-2 and cred-old with 2 endpoint failures", day.Credentials)
	}
	if got := h.usage.gotUpstream; len(got) != 2 || got[0].Account != "acct-a" || got[1].Account != "acct-a" {
		t.Errorf("reports asked = %+v, want two of acct-a", got)
	}

	// The listing has no picture: it would read the database per account.
	all, err := h.client.Accounts(t.Context())
	if err != nil || all[0].Picture != nil {
		t.Errorf("Accounts = %+v, %v; want no picture", all, err)
	}
}

// A usage database that does not answer leaves the account's state shown,
// its picture saying so, and nothing of the database's error (which may
// name its address and user) reaches the answer.
func TestAccountPictureWithoutDatabase(t *testing.T) {
	h := newHarness(t)
	h.usage.upstreamErr = errors.New("dial postgres://sluice:hunter2@db.internal:5432: connection refused")
	resp, body := h.do(t, "GET", "/admin/accounts/acct-a", testToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /admin/accounts/acct-a = %d %s, want 200", resp.StatusCode, body)
	}
	if !strings.Contains(body, `"error":"the usage database did not answer"`) || !strings.Contains(body, `"cooling_until"`) {
		t.Errorf("answer = %s, want the account's state and a picture with its error", body)
	}
	if strings.Contains(body, "hunter2") || strings.Contains(body, "db.internal") {
		t.Errorf("answer = %s: it carries the database's error", body)
	}
}

// The verdict of a window, by its rows.
func TestLimitedBy(t *testing.T) {
	tests := []struct {
		name string
		rows []ledger.UpstreamRow
		want string
	}{
		{"nothing ran", nil, ""},
		{"served, no throttle", rows(row("k1", sluice.ExecutionOK, 3, 0, 0), row("k2", sluice.ExecutionEndpoint, 1, 0, 0)), ""},
		{"one of two throttled, the other served", rows(row("k1", sluice.ExecutionRate, 2, 0, 0), row("k2", sluice.ExecutionOK, 5, 0, 0)), "credential"},
		{"both throttled, both also served", rows(row("k1", sluice.ExecutionRate, 2, 0, 0), row("k1", sluice.ExecutionOK, 2, 0, 0),
			row("k2", sluice.ExecutionRate, 1, 0, 0), row("k2", sluice.ExecutionOK, 9, 0, 0)), "account"},
		{"the only credential throttled", rows(row("k1", sluice.ExecutionRate, 1, 0, 0), row("k1", sluice.ExecutionOK, 1, 0, 0)), "account"},
		{"the other failed, not served", rows(row("k1", sluice.ExecutionRate, 1, 0, 0), row("k2", sluice.ExecutionEndpoint, 4, 0, 0)), "account"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.usage.upstream = map[time.Duration][]ledger.UpstreamRow{15 * time.Minute: tt.rows}
			a, err := h.client.Account(t.Context(), "acct-a")
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Picture.Windows[0].Limited; got != tt.want {
				t.Errorf("verdict = %q, want %q", got, tt.want)
			}
		})
	}
}

// sluice accounts show prints the picture: each credential now, then each
// window's verdict and counts, a row per credential and one for the account.
func TestCLIAccountsShowPicture(t *testing.T) {
	h := newHarness(t)
	h.usage.upstream = map[time.Duration][]ledger.UpstreamRow{
		15 * time.Minute: rows(row("cred-1", sluice.ExecutionRate, 3, 0, 0), row("cred-2", sluice.ExecutionOK, 4, 1000, 250),
			row("cred-2", sluice.ExecutionEndpoint, 1, 0, 0)),
	}
	code, out, errOut := h.runCLI(t, "accounts", "show", "acct-a")
	if code != 0 {
		t.Fatalf("accounts show exit = %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		`Last 15m \(.*\): limited by credential`,
		`cred-1\s+3\s+0\s+3\s+-\s+0\.0%\s+0ms`, // 3 throttled, nothing served
		`cred-2\s+5\s+4\s+0\s+endpoint 1\s+25\.0%\s+100ms`,
		`\(account\)\s+8\s+4\s+3\s+endpoint 1\s+25\.0%\s+100ms`,
		`Last 24h \(.*\): limited by -`,
		`cred-2\s+active\s+0\s+-\s+-`, // now: status, in flight, cooling until, cooled
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("accounts show lacks %s:\n%s", want, out)
		}
	}
}
