package admin_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestCLIBilling(t *testing.T) {
	h := batchHarness(t)
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := h.runCLI(t, args...)
		if code != 0 {
			t.Fatalf("sluice %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	wantIn := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}

	wantIn(run("billing", "create", "acme", "--plan", "standard", "--max-inflight", "2", "--budget-month", "200"),
		"acme", "standard", "Balance:", "0.00", "2, then wait", "month 200.00")
	wantIn(run("billing", "update", "acme", "--on-limit", "refuse"), "2, then refuse", "month 200.00") // the rest as it was
	wantIn(run("billing", "update", "acme", "--overdraft", "2.50"), "Overdraft:", "2.50", "2, then refuse")
	wantIn(run("billing", "create", "planned", "--plan", "standard", "--allowance", "5.00"), "Allowance:", "5.00 per month",
		"allowance left 5.00, prepaid balance 0.00", "Available:")
	wantIn(run("billing", "update", "planned", "--allowance", "1.50", "--cycle", "day"), "1.50 per day", "allowance left 1.50")
	if out := run("billing", "update", "planned", "--allowance", "0"); strings.Contains(out, "Allowance:") || strings.Contains(out, "This cycle:") {
		t.Errorf("an allowance set to 0 is still shown:\n%s", out)
	}
	if code, _, errOut := h.runCLI(t, "billing", "create", "acme", "--plan", "standard"); code != 1 || !strings.Contains(errOut, "exists") {
		t.Errorf("create of an existing account: exit %d, %q; want 1, saying it exists", code, errOut)
	}

	// Bind one key, then a batch as a dry run and for real.
	wantIn(run("billing", "bind", "acme", "api-1"), "key api-1 is bound to billing account acme")
	wantIn(run("billing", "bind", "acme", "--selector", "team=web", "--dry-run"), "would change", "web-1", "billing_account", `"acme"`, "cat-1")
	if k, _ := h.client.Key(t.Context(), "web-1"); k.BillingAccount != "" {
		t.Errorf("a dry run bound web-1 to %q", k.BillingAccount)
	}
	wantIn(run("billing", "bind", "acme", "--selector", "team=web"), "changed 3 key(s)", "skipped", "cat-1")
	if k, _ := h.client.Key(t.Context(), "web-1"); k.BillingAccount != "acme" {
		t.Errorf("web-1 bound to %q, want acme", k.BillingAccount)
	}
	wantIn(run("billing", "unbind", "api-1"), "key api-1 is bound to no billing account")

	// Money: a top-up rerun with its key posts once.
	wantIn(run("billing", "topup", "acme", "25.00", "--idempotency-key", "inv-1", "--reason", "invoice 1"), "topup of 25.00 on acme (inv-1); balance 25.00")
	wantIn(run("billing", "topup", "acme", "25.00", "--idempotency-key", "inv-1"), "was made before", "nothing changed", "balance 25.00")
	wantIn(run("billing", "adjust", "acme", "-0.5", "--reason", "goodwill"), "adjustment of -0.50", "balance 24.50")
	wantIn(run("billing", "refund", "cat-acct", "req-charged", "--reason", "bad answer"), "refund of 1.50 on cat-acct", "balance 0.00")
	wantIn(run("billing", "statement", "acme"), "topup", "25.00", "inv-1", "invoice 1", "adjustment", "goodwill", "2 entries, total 24.50; balance now 24.50")
	out := run("billing", "accounts")
	if !regexp.MustCompile(`acme\s+standard\s+24\.50`).MatchString(out) || !regexp.MustCompile(`cat-acct\s+standard\s+0\.00.*catalog`).MatchString(out) {
		t.Errorf("billing accounts =\n%s", out)
	}

	// A failed top-up names the key to retry it with.
	code, _, errOut := h.runCLI(t, "billing", "topup", "nope", "1")
	if code != 1 || !regexp.MustCompile(`--idempotency-key cli_\S+`).MatchString(errOut) {
		t.Errorf("failed top-up: exit %d, %q; want 1 and the key to retry with", code, errOut)
	}

	// Prices and the report.
	from := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	wantIn(run("billing", "apply-price", "--plan", "standard", "--alias", "fast", "--input", "0.80", "--output", "3.20", "--effective-from", from),
		"price standard/fast@"+from+" applied: input 0.80, output 3.20")
	wantIn(run("billing", "prices", "--alias", "fast"), "standard/fast", "0.60", "in force", "catalog", "0.80", "api")
	started := time.Now().UTC()
	if err := h.billing.RecordUsage(t.Context(), []sluice.UsageRecord{{RequestID: "r1", KeyID: "web-1", Tenant: "web", Alias: "fast", Started: started, Status: 200,
		EndUser: "alice", TaskType: "parse", Usage: sluice.Usage{TotalTokens: 30, CachedTokens: 20, Measured: true},
		Billing: &sluice.Charge{Account: "acme", Price: 3_000, Cost: 1_000}}}); err != nil {
		t.Fatal(err)
	}
	out = run("billing", "report", "--by", "account,alias")
	if !regexp.MustCompile(`acme\s+fast\s+1\s+0\s+30\s+20\s+0\.003\s+0\.001\s+0\.002`).MatchString(out) || !strings.Contains(out, "(total)") {
		t.Errorf("billing report =\n%s", out)
	}
	out = run("billing", "report", "--by", "end_user,task_type,day")
	if !regexp.MustCompile(`END_USER\s+TASK_TYPE\s+DAY\s+REQUESTS`).MatchString(out) ||
		!regexp.MustCompile(`alice\s+parse\s+`+started.Format(time.DateOnly)+`\s+1\s+0\s+30\s+20\s+0\.003`).MatchString(out) {
		t.Errorf("billing report by end user, task type and day =\n%s", out)
	}

	out = run("billing", "report", "--tenant", "web", "--by", "tenant")
	if !regexp.MustCompile(`TENANT\s+REQUESTS`).MatchString(out) || !regexp.MustCompile(`web\s+1\s+0\s+30\s+20\s+0\.003`).MatchString(out) {
		t.Errorf("billing report of tenant web =\n%s", out)
	}
	if out := run("billing", "report", "--tenant", "mobile"); strings.Contains(out, "0.003") {
		t.Errorf("billing report of tenant mobile counts web's request:\n%s", out)
	}

	for _, args := range [][]string{
		{"billing", "topup", "acme", "1e3"},
		{"billing", "bind", "acme"},
		{"billing", "bind", "acme", "web-1", "--selector", "team=web"},
		{"billing", "apply-price", "--plan", "standard", "--input", "1"},
		{"billing", "create", "x"},
		{"billing", "frobnicate"},
	} {
		if code, _, _ := h.runCLI(t, args...); code != 2 {
			t.Errorf("sluice %s: exit %d, want 2 (usage)", strings.Join(args, " "), code)
		}
	}
}
