package app_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// TestPolicyReportThroughTheServer checks expected against actual accounts
// end to end: a request the gateway served (key web, whose policy names no
// account) and the executions of a preferred key that fell back, written to
// the gateway's database beside it, come back from the admin API, the Go
// client and the CLI, from the database the usage writer fills.
func TestPolicyReportThroughTheServer(t *testing.T) {
	h := newHarness(t)
	if _, err := h.sdk(keyWeb).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "only-a",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}); err != nil {
		t.Fatalf("chat completion: %v", err)
	}
	served := h.usage(t, 1)[0]
	if len(served.Executions) != 1 {
		t.Fatalf("the served request has executions %+v, want one", served.Executions)
	}
	webAccount := served.Executions[0].AccountID

	db, err := sqldb.Open(t.Context(), "sqlite://"+h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := served.Started.Add(time.Second)
	preferred := []string{"cred-a1"}
	exec := func(account string, fallback string) sluice.Execution {
		return sluice.Execution{EdgeID: account + "/ep/gpt-4o-mini", AccountID: account, CredentialID: account, EndpointID: "ep",
			Model: "gpt-4o-mini", Status: sluice.ExecutionOK, HTTPStatus: 200, Started: start, Expected: preferred, Fallback: fallback}
	}
	rate := exec("cred-a1", "")
	rate.Status, rate.HTTPStatus = sluice.ExecutionRate, 429
	if err := sqlledger.New(db).RecordUsage(t.Context(), []sluice.UsageRecord{
		{RequestID: "pref-1", KeyID: "pref", Alias: "fast", Status: 200, Started: start, Executions: []sluice.Execution{exec("cred-a1", "")}},
		{RequestID: "pref-2", KeyID: "pref", Alias: "fast", Status: 200, Started: start, Executions: []sluice.Execution{exec("cred-b1", "cooling")}},
		{RequestID: "pref-3", KeyID: "pref", Alias: "fast", Status: 200, Started: start,
			Executions: []sluice.Execution{rate, exec("cred-b1", "failed:rate")}},
	}); err != nil {
		t.Fatal(err)
	}

	cl := adminclient.NewClient("http://"+h.gw.AdminAddr(), testEnv["ADMIN_TOKEN"])
	from, to := served.Started.Add(-time.Minute), start.Add(time.Minute)
	rep, err := cl.PolicyReport(t.Context(), "", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Keys) != 2 || rep.Keys[0].KeyID != "pref" || rep.Keys[1].KeyID != "web" {
		t.Fatalf("PolicyReport keys = %+v, want pref and web", rep.Keys)
	}
	pref, web := rep.Keys[0], rep.Keys[1]
	wantPref := admin.PolicyTally{Executions: 4, OnExpected: 2, Fallbacks: 2, Reasons: map[string]int{"cooling": 1, "failed:rate": 1}}
	if pref.PolicyTally.Executions != wantPref.Executions || pref.OnExpected != wantPref.OnExpected || pref.Fallbacks != wantPref.Fallbacks ||
		len(pref.Reasons) != 2 || pref.Reasons["cooling"] != 1 || pref.Reasons["failed:rate"] != 1 || len(pref.Accounts) != 2 {
		t.Errorf("pref tally = %+v with accounts %+v, want %+v on two accounts", pref.PolicyTally, pref.Accounts, wantPref)
	}
	if web.Executions != 1 || web.OnExpected != 1 || len(web.Expected) != 0 || len(web.Accounts) != 1 || web.Accounts[0].AccountID != webAccount {
		t.Errorf("web report = %+v, want its one execution on %s, on expected (any account)", web, webAccount)
	}

	// The range is the request's start: to is exclusive.
	if rep, err := cl.PolicyReport(t.Context(), "pref", from, start); err != nil || len(rep.Keys) != 0 {
		t.Errorf("PolicyReport(pref, before its requests) = %+v, %v; want no keys", rep, err)
	}

	recs, err := cl.Usage(t.Context(), ledger.UsageFilter{Since: from})
	if err != nil {
		t.Fatal(err)
	}
	var fallbacks []string
	for _, r := range recs {
		for _, e := range r.Executions {
			if e.Fallback != "" {
				fallbacks = append(fallbacks, r.RequestID+" "+e.Fallback+" "+strings.Join(e.Expected, ","))
			}
		}
	}
	if want := "pref-2 cooling cred-a1|pref-3 failed:rate cred-a1"; strings.Join(fallbacks, "|") != want {
		t.Errorf("GET /admin/usage fallbacks = %q, want %q", strings.Join(fallbacks, "|"), want)
	}

	var out, errOut bytes.Buffer
	env := map[string]string{adminclient.EnvAdminURL: "http://" + h.gw.AdminAddr(), adminclient.EnvAdminToken: testEnv["ADMIN_TOKEN"]}
	code := adminclient.RunCLI(t.Context(), []string{"usage", "policy", "pref", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)},
		&out, &errOut, func(k string) string { return env[k] })
	if code != 0 {
		t.Fatalf("sluice usage policy pref = exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"cred-b1", "cooling 1, failed:rate 1", "(all)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sluice usage policy pref printed:\n%s\nwant it to contain %q", out.String(), want)
		}
	}
}
