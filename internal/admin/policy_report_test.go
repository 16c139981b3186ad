package admin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/ledger"
)

var (
	reportFrom = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	reportTo   = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
)

// setPolicyCounts gives the harness's ledger the counts of a strict key
// that stayed on its account over two credentials, a preferred key that
// fell back for two reasons (and once ran outside its accounts for none),
// and a key whose policy names no account.
func setPolicyCounts(h *harness) {
	count := func(key, account, credential string, expected []string, fallback string, n int64) ledger.PolicyCount {
		return ledger.PolicyCount{KeyID: key, AccountID: account, CredentialID: credential, Expected: expected, Fallback: fallback, Executions: n}
	}
	h.usage.setCounts(
		count("any", "org-2", "cred-2", nil, "", 4),
		count("preferred", "org-1", "cred-1", []string{"org-1"}, "", 5),
		count("preferred", "org-2", "cred-2", []string{"org-1"}, "", 1),
		count("preferred", "org-2", "cred-2", []string{"org-1"}, "cooling", 2),
		count("preferred", "org-2", "cred-2", []string{"org-1"}, "failed:rate", 1),
		count("preferred", "org-2", "cred-2", []string{"org-1", "org-3"}, "cooling", 1),
		count("strict", "org-1", "cred-1", []string{"org-1"}, "", 3),
		count("strict", "org-1", "cred-1b", []string{"org-1"}, "", 2),
	)
}

func TestPolicyReport(t *testing.T) {
	h := newHarness(t)
	setPolicyCounts(h)
	got, err := h.client.PolicyReport(t.Context(), "preferred", reportFrom, reportTo)
	if err != nil {
		t.Fatal(err)
	}
	if f, want := h.usage.filter(), (ledger.PolicyFilter{KeyID: "preferred", From: reportFrom, To: reportTo}); !f.From.Equal(want.From) || !f.To.Equal(want.To) || f.KeyID != want.KeyID {
		t.Errorf("CountExecutions got %+v, want %+v", f, want)
	}
	// The fake ignores the filter: every key is tallied, which shows how
	// keys, accounts and credentials are grouped.
	want := &admin.PolicyReport{From: reportFrom, To: reportTo, Keys: []admin.KeyPolicyReport{{
		KeyID: "any", Expected: []string{},
		PolicyTally: admin.PolicyTally{Executions: 4, OnExpected: 4},
		Accounts: []admin.AccountPolicyReport{
			{AccountID: "org-2", CredentialID: "cred-2", PolicyTally: admin.PolicyTally{Executions: 4, OnExpected: 4}},
		},
	}, {
		KeyID: "preferred", Expected: []string{"org-1", "org-3"},
		PolicyTally: admin.PolicyTally{Executions: 10, OnExpected: 5, Fallbacks: 4, Reasons: map[string]int{"cooling": 3, "failed:rate": 1}},
		Accounts: []admin.AccountPolicyReport{
			{AccountID: "org-1", CredentialID: "cred-1", PolicyTally: admin.PolicyTally{Executions: 5, OnExpected: 5}},
			{AccountID: "org-2", CredentialID: "cred-2", PolicyTally: admin.PolicyTally{Executions: 5, Fallbacks: 4, Reasons: map[string]int{"cooling": 3, "failed:rate": 1}}},
		},
	}, {
		KeyID: "strict", Expected: []string{"org-1"},
		PolicyTally: admin.PolicyTally{Executions: 5, OnExpected: 5},
		Accounts: []admin.AccountPolicyReport{
			{AccountID: "org-1", CredentialID: "cred-1", PolicyTally: admin.PolicyTally{Executions: 3, OnExpected: 3}},
			{AccountID: "org-1", CredentialID: "cred-1b", PolicyTally: admin.PolicyTally{Executions: 2, OnExpected: 2}},
		},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PolicyReport mismatch (-want +got):\n%s", diff)
	}
}

func TestPolicyReportDefaultsToTheLastDay(t *testing.T) {
	h := newHarness(t)
	before := time.Now()
	if _, err := h.client.PolicyReport(t.Context(), "", time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	f := h.usage.filter()
	if f.KeyID != "" || f.To.Before(before) || f.To.After(time.Now()) || f.To.Sub(f.From) != 24*time.Hour {
		t.Errorf("CountExecutions got %+v, want every key over the day before now", f)
	}
	if _, err := h.client.PolicyReport(t.Context(), "", time.Time{}, reportTo); err != nil {
		t.Fatal(err)
	}
	if f := h.usage.filter(); !f.From.Equal(reportTo.Add(-24*time.Hour)) || !f.To.Equal(reportTo) {
		t.Errorf("CountExecutions got %+v with only to, want the day before it", f)
	}
}

func TestPolicyReportRefusesBadRanges(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name string
		give string
	}{
		{"FromNotATime", "/admin/usage/policy?from=yesterday"},
		{"ToNotATime", "/admin/usage/policy?to=2026-03-01"},
		{"FromAfterTo", "/admin/usage/policy?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z"},
		{"EmptyRange", "/admin/usage/policy?from=2026-03-01T00:00:00Z&to=2026-03-01T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, "GET", tt.give, testToken, "")
			if got := decodeError(t, body).Error.Code; resp.StatusCode != 400 || got != "invalid_request" {
				t.Errorf("GET %s = %d %q, want 400 invalid_request", tt.give, resp.StatusCode, got)
			}
		})
	}
}

func TestUsageShowsExpectedAndFallback(t *testing.T) {
	h := newHarness(t)
	started := reportFrom.Add(time.Hour)
	h.usage.RecordUsage(t.Context(), []sluice.UsageRecord{{
		RequestID: "req-1", KeyID: "preferred", Alias: "fast", Status: 200, Started: started,
		Executions: []sluice.Execution{
			{AccountID: "org-1", CredentialID: "cred-1", Status: sluice.ExecutionRate, HTTPStatus: 429, Started: started, Expected: []string{"org-1"}},
			{AccountID: "org-2", CredentialID: "cred-2", Status: sluice.ExecutionOK, HTTPStatus: 200, Started: started,
				Expected: []string{"org-1"}, Fallback: "failed:rate"},
		},
	}, {
		RequestID: "req-2", KeyID: "any", Alias: "fast", Status: 200, Started: started.Add(time.Second),
		Executions: []sluice.Execution{{AccountID: "org-2", CredentialID: "cred-2", Status: sluice.ExecutionOK, HTTPStatus: 200, Started: started}},
	}})
	_, body := h.do(t, "GET", "/admin/usage?since=2026-03-01T00:00:00Z", testToken, "")
	for _, want := range []string{`"expected":["org-1"],"fallback":"failed:rate"`, `"expected":[]}`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /admin/usage = %s\nwant it to contain %s", body, want)
		}
	}

	code, out, errOut := h.runCLI(t, "usage", "list", "--since", "2026-03-01T00:00:00Z")
	if code != 0 {
		t.Fatalf("usage list exit = %d, stderr %q", code, errOut)
	}
	want := `REQUEST  STARTED               KEY        ALIAS  STATUS  TOKENS  ACCOUNT  CREDENTIAL  RESULT    EXPECTED  FALLBACK
req-1    2026-03-01T01:00:00Z  preferred  fast   200     0       org-1    cred-1      rate 429  org-1     -
                                                                 org-2    cred-2      ok 200    org-1     failed:rate
req-2    2026-03-01T01:00:01Z  any        fast   200     0       org-2    cred-2      ok 200    *         -
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("usage list output mismatch (-want +got):\n%s", diff)
	}
}

func TestCLIUsagePolicy(t *testing.T) {
	h := newHarness(t)
	setPolicyCounts(h)
	code, out, errOut := h.runCLI(t, "usage", "policy", "--from", "2026-03-01T00:00:00Z", "--to", "2026-03-02T00:00:00Z")
	if code != 0 {
		t.Fatalf("usage policy exit = %d, stderr %q", code, errOut)
	}
	want := `Executions from 2026-03-01T00:00:00Z to 2026-03-02T00:00:00Z

KEY        EXPECTED      ACCOUNT  CREDENTIAL  EXECUTIONS  ON EXPECTED  FALLBACKS  REASONS
any        *             org-2    cred-2      4           4            0          -
preferred  org-1, org-3  org-1    cred-1      5           5            0          -
preferred  org-1, org-3  org-2    cred-2      5           0            4          cooling 3, failed:rate 1
preferred  org-1, org-3  (all)                10          5            4          cooling 3, failed:rate 1
strict     org-1         org-1    cred-1      3           3            0          -
strict     org-1         org-1    cred-1b     2           2            0          -
strict     org-1         (all)                5           5            0          -
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("usage policy output mismatch (-want +got):\n%s", diff)
	}

	code, _, errOut = h.runCLI(t, "usage", "policy", "strict", "--to", "yesterday")
	if code != 2 || !strings.Contains(errOut, "not an RFC 3339 time") {
		t.Errorf("usage policy --to yesterday = exit %d, stderr %q; want 2 and the reason", code, errOut)
	}
	if code, _, _ = h.runCLI(t, "usage", "policy", "strict"); code != 0 || h.usage.filter().KeyID != "strict" {
		t.Errorf("usage policy strict = exit %d, filter %+v; want 0 and key strict", code, h.usage.filter())
	}
}
