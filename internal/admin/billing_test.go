package admin_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/memledger"
)

// fakeBilling is an admin.Billing on the in-memory ledger, whose catalog
// declares the billing account cat-acct on the plan standard, which sells
// the alias fast. The request req-charged was charged 1.50 to cat-acct.
type fakeBilling struct {
	*memledger.Store
	declared admin.DeclaredBilling
	changed  atomic.Int64 // BillingChanged calls
}

var catalogPrice = billing.Price{Kind: billing.KindPrice, Plan: "standard", Alias: "fast",
	EffectiveFrom: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Rates: billing.Rates{Input: 600_000, Output: 2_400_000}}

func newFakeBilling(t *testing.T) *fakeBilling {
	f := &fakeBilling{Store: new(memledger.Store), declared: admin.DeclaredBilling{
		Currency: "USD", Billed: true,
		Accounts: []ledger.BillingAccount{{ID: "cat-acct", Plan: "standard", MaxInflight: 2, OnLimit: "wait"}},
		Prices:   []billing.Price{catalogPrice},
	}}
	charged := sluice.UsageRecord{RequestID: "req-charged", Started: time.Now().Add(-30 * 24 * time.Hour), // before every other test's records
		Billing: &sluice.Charge{Account: "cat-acct", Price: 1_500_000}}
	if err := f.RecordUsage(t.Context(), []sluice.UsageRecord{charged}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeBilling) Declared() admin.DeclaredBilling    { return f.declared }
func (f *fakeBilling) BillingChanged(ctx context.Context) { f.changed.Add(1) }

func TestBillingAccounts(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	created, err := h.client.PutBillingAccount(ctx, "acme", admin.BillingAccountSpec{Plan: "standard", MaxInflight: 3, OnLimit: "refuse",
		Budgets: admin.Budgets{Day: 10_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	if created.Source != "api" || created.MaxInflight != 3 || created.Budgets.Day != 10_000_000 || created.Balance != 0 {
		t.Errorf("created = %+v", created)
	}
	resp, body := h.do(t, http.MethodPut, "/admin/billing/accounts/acme", testToken, `{"plan":"standard","budgets":{"month":"200.00"}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT of an existing account = %d %s, want 200", resp.StatusCode, body)
	}
	// Amounts are decimal strings, never JSON numbers.
	for _, want := range []string{`"balance":"0.00"`, `"budgets":{"month":"200.00"}`, `"max_inflight":1`, `"on_limit":"wait"`} {
		if !strings.Contains(body, want) {
			t.Errorf("answer %s lacks %s", body, want)
		}
	}
	list, err := h.client.BillingAccounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range list {
		got = append(got, a.ID+"/"+a.Source+"/"+a.Balance.String())
	}
	if want := []string{"acme/api/0.00", "cat-acct/catalog/-1.50"}; !cmp.Equal(got, want) {
		t.Errorf("accounts = %v, want %v", got, want)
	}

	for _, tt := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"catalog account", http.MethodPut, "/admin/billing/accounts/cat-acct", testToken, `{"plan":"standard"}`, 409, "billing_account_read_only"},
		{"plan without prices", http.MethodPut, "/admin/billing/accounts/x", testToken, `{"plan":"gold"}`, 400, "invalid_request"},
		{"amount as a number", http.MethodPut, "/admin/billing/accounts/x", testToken, `{"plan":"standard","allowance":25}`, 400, "invalid_request"},
		{"cycle without allowance", http.MethodPut, "/admin/billing/accounts/x", testToken, `{"plan":"standard","cycle":"month"}`, 400, "invalid_request"},
		{"unknown cycle", http.MethodPut, "/admin/billing/accounts/x", testToken, `{"plan":"standard","allowance":"25","cycle":"week"}`, 400, "invalid_request"},
		{"bad id", http.MethodPut, "/admin/billing/accounts/a%20b", testToken, `{"plan":"standard"}`, 400, "invalid_request"},
		{"read token", http.MethodPut, "/admin/billing/accounts/y", testReadToken, `{"plan":"standard"}`, 403, "admin_forbidden"},
		{"unknown account", http.MethodGet, "/admin/billing/accounts/nope", testReadToken, "", 404, "not_found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, tt.method, tt.path, tt.token, tt.body)
			if resp.StatusCode != tt.status || decodeError(t, body).Error.Code != tt.code {
				t.Errorf("%s %s = %d %s; want %d %s", tt.method, tt.path, resp.StatusCode, body, tt.status, tt.code)
			}
		})
	}
	if stored, _ := h.billing.BillingAccounts(ctx); len(stored) != 1 {
		t.Errorf("stored accounts = %+v; want acme alone", stored)
	}
}

// An account with an allowance (month by default) shows its current
// cycle: the spend, what is left of the allowance and of the prepaid
// balance, and what it may still spend.
func TestBillingAccountAllowance(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	created, err := h.client.PutBillingAccount(ctx, "plan-acct", admin.BillingAccountSpec{Plan: "standard", Allowance: 10 * billing.Unit})
	if err != nil {
		t.Fatal(err)
	}
	if created.Cycle != ledger.CycleMonth || created.Current == nil || created.Available != 10*billing.Unit {
		t.Fatalf("created = %+v, want a monthly allowance of 10.00, all available", created)
	}
	rec := sluice.UsageRecord{RequestID: "r1", KeyID: "k", Alias: "fast", Started: time.Now(), Status: 200,
		Usage: sluice.Usage{PromptTokens: 1, Measured: true}, Billing: &sluice.Charge{Account: "plan-acct", Plan: "standard", Price: 3 * int64(billing.Unit)}}
	if err := h.billing.RecordUsage(ctx, []sluice.UsageRecord{rec}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.billing.Post(ctx, ledger.Entry{Account: "plan-acct", RequestID: "paid", Kind: ledger.EntryTopUp, Amount: billing.Unit, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	a, err := h.client.BillingAccount(ctx, "plan-acct")
	if err != nil {
		t.Fatal(err)
	}
	c := a.Current
	if a.Balance != -2*billing.Unit || a.Available != 8*billing.Unit || c == nil || c.Spent != 3*billing.Unit ||
		c.AllowanceLeft != 7*billing.Unit || c.PrepaidBalance != billing.Unit || !c.End.Equal(c.Start.AddDate(0, 1, 0)) {
		t.Errorf("account = %+v, cycle %+v; want balance -2.00, available 8.00, spent 3.00, allowance left 7.00, prepaid 1.00 over a month", a, c)
	}
	_, body := h.do(t, http.MethodGet, "/admin/billing/accounts/plan-acct", testReadToken, "")
	for _, want := range []string{`"allowance":"10.00"`, `"cycle":"month"`, `"allowance_left":"7.00"`, `"prepaid_balance":"1.00"`, `"available":"8.00"`} {
		if !strings.Contains(body, want) {
			t.Errorf("answer %s lacks %s", body, want)
		}
	}
}

func TestTopUpAndAdjustAreIdempotent(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	first, err := h.client.TopUp(ctx, "cat-acct", "invoice-17", admin.MoneyChange{Amount: 10_000_000, Reason: "invoice 17"})
	if err != nil {
		t.Fatal(err)
	}
	retried, err := h.client.TopUp(ctx, "cat-acct", "invoice-17", admin.MoneyChange{Amount: 10_000_000, Reason: "invoice 17"})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Applied || retried.Applied || first.Balance != 8_500_000 || retried.Balance != 8_500_000 || retried.Entry != first.Entry {
		t.Errorf("top-up then its retry = %+v, %+v; want applied once, balance 8.50 both times, the same entry", first, retried)
	}
	if first.Entry.Admin != "admin" || first.Entry.RequestID != "invoice-17" || first.Entry.Kind != ledger.EntryTopUp {
		t.Errorf("entry = %+v; want the admin token's top-up named by the Idempotency-Key", first.Entry)
	}
	if n := h.billing.changed.Load(); n != 1 {
		t.Errorf("BillingChanged called %d times, want once (for the applied top-up)", n)
	}
	_, err = h.client.TopUp(ctx, "cat-acct", "invoice-17", admin.MoneyChange{Amount: 20_000_000})
	wantAPIError(t, "the key again with another amount", err, http.StatusConflict, "idempotency_key_reused")
	_, err = h.client.Adjust(ctx, "cat-acct", "fix-1", admin.MoneyChange{Amount: -500_000})
	wantAPIError(t, "an adjustment without reason", err, http.StatusBadRequest, "invalid_request")
	_, err = h.client.TopUp(ctx, "cat-acct", "neg", admin.MoneyChange{Amount: -5})
	wantAPIError(t, "a negative top-up", err, http.StatusBadRequest, "invalid_request")
	_, err = h.client.TopUp(ctx, "nope", "x", admin.MoneyChange{Amount: 5})
	wantAPIError(t, "a top-up of an unknown account", err, http.StatusNotFound, "not_found")
	adj, err := h.client.Adjust(ctx, "cat-acct", "fix-1", admin.MoneyChange{Amount: -500_000, Reason: "double top-up"})
	if err != nil || !adj.Applied || adj.Balance != 8_000_000 {
		t.Errorf("adjustment = %+v, %v; want applied, balance 8.00", adj, err)
	}
	// Without a key the server names the entry: each POST is a change.
	for range 2 {
		if p, err := h.client.TopUp(ctx, "cat-acct", "", admin.MoneyChange{Amount: 1_000_000}); err != nil || !p.Applied {
			t.Errorf("top-up without a key = %+v, %v; want applied", p, err)
		}
	}
	if a, _ := h.client.BillingAccount(ctx, "cat-acct"); a == nil || a.Balance != 10_000_000 {
		t.Errorf("account = %+v; want balance 10.00", a)
	}
}

func TestRefundGivesTheChargeBackOnce(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	refund := admin.Refund{RequestID: "req-charged", Reason: "bad answer"}
	first, err := h.client.Refund(ctx, "cat-acct", refund)
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.client.Refund(ctx, "cat-acct", refund)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Applied || again.Applied || first.Entry.Amount != 1_500_000 || again.Balance != 0 {
		t.Errorf("refund then again = %+v, %+v; want 1.50 back once, balance 0", first, again)
	}
	_, err = h.client.Refund(ctx, "cat-acct", admin.Refund{RequestID: "never-charged", Reason: "r"})
	wantAPIError(t, "a refund of a request without charge", err, http.StatusNotFound, "not_found")
	if _, err := h.client.PutBillingAccount(ctx, "other", admin.BillingAccountSpec{Plan: "standard"}); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.Refund(ctx, "other", refund)
	wantAPIError(t, "a refund to another account", err, http.StatusNotFound, "not_found")
	_, err = h.client.Refund(ctx, "cat-acct", admin.Refund{RequestID: "req-charged"})
	wantAPIError(t, "a refund without reason", err, http.StatusBadRequest, "invalid_request")
}

func TestStatement(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	for _, key := range []string{"a", "b", "c"} {
		if _, err := h.client.TopUp(ctx, "cat-acct", key, admin.MoneyChange{Amount: 1_000_000}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := h.client.Statement(ctx, "cat-acct", time.Time{}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Entries) != 4 || all.Entries[0].RequestID != "req-charged" || all.Total != 1_500_000 || all.Balance != 1_500_000 || all.Truncated {
		t.Errorf("statement = %+v; want the charge and three top-ups, total = balance = 1.50", all)
	}
	recent, err := h.client.Statement(ctx, "cat-acct", time.Now().Add(-time.Minute), time.Time{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recent.Entries) != 2 || !recent.Truncated || recent.Total != 2_000_000 || recent.Entries[0].Kind != ledger.EntryTopUp {
		t.Errorf("windowed statement = %+v; want two top-ups of the three, truncated", recent)
	}
	_, err = h.client.Statement(ctx, "nope", time.Time{}, time.Time{}, 0)
	wantAPIError(t, "the statement of an unknown account", err, http.StatusNotFound, "not_found")
}

func TestApplyPrices(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	spec := admin.PriceSpec{Kind: billing.KindPrice, Plan: "standard", Alias: "fast", EffectiveFrom: later,
		RateText: billing.RateText{Input: "0.80", Output: "3.20"}}
	p, err := h.client.ApplyPrice(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := admin.Price{Kind: billing.KindPrice, Plan: "standard", Alias: "fast", EffectiveFrom: later,
		Version: "standard/fast@" + later.Format(time.RFC3339), Source: "api",
		Rates: billing.Rates{Input: 800_000, Output: 3_200_000, CacheRead: 800_000, CacheWrite: 800_000, Reasoning: 3_200_000}}
	if diff := cmp.Diff(want, *p); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	if again, err := h.client.ApplyPrice(ctx, spec); err != nil || *again != *p {
		t.Errorf("the same version again = %+v, %v; want it unchanged", again, err)
	}
	list, err := h.client.Prices(ctx, adminclient.PriceQuery{Alias: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range list {
		got = append(got, p.Version+" "+p.Source+" "+p.Rates.Input.String()+map[bool]string{true: " in force"}[p.InForce])
	}
	if want := []string{"standard/fast@2025-01-01T00:00:00Z catalog 0.60 in force", want.Version + " api 0.80"}; !cmp.Equal(got, want) {
		t.Errorf("prices = %q, want %q", got, want)
	}

	other := spec
	other.Input = "0.90"
	_, err = h.client.ApplyPrice(ctx, other)
	wantAPIError(t, "a stored version with other rates", err, http.StatusConflict, "price_conflict")
	past := spec
	past.EffectiveFrom = time.Now().Add(-time.Hour)
	_, err = h.client.ApplyPrice(ctx, past)
	wantAPIError(t, "a version in the past", err, http.StatusBadRequest, "invalid_request")
	unknown := spec
	unknown.Alias = "slow"
	_, err = h.client.ApplyPrice(ctx, unknown)
	wantAPIError(t, "an alias the catalog does not serve", err, http.StatusBadRequest, "invalid_request")
	_, err = h.client.ApplyPrice(ctx, admin.PriceSpec{Kind: billing.KindCost, Plan: "standard", Model: "m", RateText: billing.RateText{Input: "1"}})
	wantAPIError(t, "a cost with a plan", err, http.StatusBadRequest, "invalid_request")
	cost, err := h.client.ApplyPrice(ctx, admin.PriceSpec{Kind: billing.KindCost, Model: "gpt-x", RateText: billing.RateText{Input: "0.10"}})
	if err != nil || !cost.InForce || cost.Version != "gpt-x@"+cost.EffectiveFrom.Format(time.RFC3339) {
		t.Errorf("a cost from now = %+v, %v; want in force", cost, err)
	}
	// The account's plan now has stored prices too: one may be created on a plan only stored prices name.
	if _, err := h.client.ApplyPrice(ctx, admin.PriceSpec{Kind: billing.KindPrice, Plan: "gold", Alias: "fast", RateText: billing.RateText{Input: "2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.PutBillingAccount(ctx, "vip", admin.BillingAccountSpec{Plan: "gold"}); err != nil {
		t.Errorf("an account on a stored plan: %v", err)
	}
}

func TestSpendReport(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	day := time.Now().UTC().Truncate(time.Hour)
	rec := func(id, alias, user, task string, price, cost int64) sluice.UsageRecord {
		return sluice.UsageRecord{RequestID: id, KeyID: "web-1", Tenant: map[string]string{"fast": "web"}[alias], Alias: alias, Started: day, Status: 200, EndUser: user, TaskType: task,
			Usage:   sluice.Usage{PromptTokens: 10, CachedTokens: 4, TotalTokens: 12, Measured: true},
			Billing: &sluice.Charge{Account: "cat-acct", Plan: "standard", Price: price, Cost: cost}}
	}
	if err := h.billing.RecordUsage(ctx, []sluice.UsageRecord{rec("r1", "fast", "alice", "parse", 3_000, 1_000),
		rec("r2", "fast", "alice", "parse", 2_000, 500), rec("r3", "slow", "bob", "generate", 10_000, 12_000)}); err != nil {
		t.Fatal(err)
	}
	resp, body := h.do(t, http.MethodGet, "/admin/billing/spend?by=alias", testReadToken, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"margin":"-0.002"`) {
		t.Fatalf("spend by alias = %d %s; want slow's negative margin as a decimal string", resp.StatusCode, body)
	}
	rep, err := h.client.Spend(ctx, adminclient.SpendQuery{From: day, By: []ledger.Dimension{ledger.ByAlias, ledger.ByDay}}) // req-charged is older
	if err != nil {
		t.Fatal(err)
	}
	d := day.Format(time.DateOnly)
	want := []admin.SpendRow{
		{Alias: "fast", Day: d, Requests: 2, Tokens: 24, Cached: 8, Price: 5_000, Cost: 1_500, Margin: 3_500},
		{Alias: "slow", Day: d, Requests: 1, Tokens: 12, Cached: 4, Price: 10_000, Cost: 12_000, Margin: -2_000},
	}
	if diff := cmp.Diff(want, rep.Rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if rep.Total != (admin.SpendRow{Requests: 3, Tokens: 36, Cached: 12, Price: 15_000, Cost: 13_500, Margin: 1_500}) || rep.Currency != "USD" {
		t.Errorf("total = %+v %s", rep.Total, rep.Currency)
	}
	// Attribution: per end user and task type per day.
	resp, body = h.do(t, http.MethodGet, "/admin/billing/spend?by=end_user,task_type,day", testReadToken, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `{"end_user":"alice","task_type":"parse","day":"`+d+`","requests":2,"unmeasured":0,"tokens":24,"cached_tokens":8,"price":"0.005","cost":"0.0015","margin":"0.0035"}`) {
		t.Errorf("spend by end_user,task_type,day = %d %s; want alice's parses in one row", resp.StatusCode, body)
	}
	// One tenant's.
	rep, err = h.client.Spend(ctx, adminclient.SpendQuery{From: day, Tenant: "web", By: []ledger.Dimension{ledger.ByTenant}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []admin.SpendRow{{Tenant: "web", Requests: 2, Tokens: 24, Cached: 8, Price: 5_000, Cost: 1_500, Margin: 3_500}}; !cmp.Equal(want, rep.Rows) {
		t.Errorf("spend of tenant web = %+v, want %+v", rep.Rows, want)
	}
	resp, body = h.do(t, http.MethodGet, "/admin/billing/spend?by=colour", testReadToken, "")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("spend by an unknown dimension = %d %s, want 400", resp.StatusCode, body)
	}
}

func TestBindKeysByBatch(t *testing.T) {
	h := batchHarness(t)
	acme := "acme"
	b := admin.Batch{Selector: "team=web", Operation: admin.BatchSetBillingAccount, BillingAccount: &acme, DryRun: true}
	dry, err := h.client.Batch(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range records(t, h) {
		if k.BillingAccount != "" {
			t.Fatalf("a dry run bound key %s", k.ID)
		}
	}
	b.DryRun = false
	done, err := h.client.Batch(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	dry.DryRun = false
	if diff := cmp.Diff(dry, done); diff != "" {
		t.Errorf("dry run and run differ (-dry +run):\n%s", diff)
	}
	got := map[string]string{}
	for id, k := range records(t, h) {
		got[id] = k.BillingAccount
	}
	// cat-1 is the catalog's: its binding is the catalog's.
	if want := map[string]string{"web-1": "acme", "web-2": "acme", "web-3": "acme", "api-1": "", "cat-1": ""}; !cmp.Equal(got, want) {
		t.Errorf("bindings = %v, want %v", got, want)
	}
	if i := len(done.Skipped); i == 0 || done.Skipped[0].ID != "cat-1" || !strings.Contains(done.Skipped[0].Reason, "catalog") {
		t.Errorf("skipped = %+v; want the catalog key, saying so", done.Skipped)
	}
	_, err = h.client.UpdateKey(t.Context(), "cat-1", admin.KeyChange{BillingAccount: &acme})
	wantAPIError(t, "binding a catalog key", err, http.StatusConflict, "key_read_only")
}
