package app_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// The operator's money tools on a running gateway: a top-up through the
// admin API admits the account's requests at once (the balance view reads
// the store after it, not at its next refresh), each request's price and
// cost reach the spend metric, the statement lists the top-up and the
// charge, and a refund gives that charge back once.
func TestBillingOperatorTools(t *testing.T) {
	h := billed(t, "max_inflight: 1", "", "", simulator.Options{})
	c := h.adminClient()
	ctx := t.Context()
	wantCode(t, "a request before any top-up", sdkErr(t, h, keyWeb, "fast"), http.StatusTooManyRequests, "billing_quota_exhausted")

	p, err := c.TopUp(ctx, "acme", "invoice-1", admin.MoneyChange{Amount: 2_000_000, Reason: "invoice 1"})
	if err != nil || !p.Applied || p.Balance != 2_000_000 {
		t.Fatalf("top-up = %+v, %v; want applied, balance 2.00", p, err)
	}
	if e := sdkErr(t, h, keyWeb, "fast"); e != nil {
		t.Fatalf("a request right after the top-up = %v; want it admitted", e)
	}
	_, metrics := h.adminGet("/metrics")
	for _, want := range []string{
		`sluice_billing_spend_micros_total{alias="fast",billing_account="acme",kind="price"} 1e+06`,
		`sluice_billing_spend_micros_total{alias="fast",billing_account="acme",kind="cost"} 250000`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	var st *admin.Statement
	eventually(t, 3*time.Second, "the charge in the statement", func() bool {
		st, err = c.Statement(ctx, "acme", time.Time{}, time.Time{}, 0)
		return err == nil && len(st.Entries) == 2
	})
	charge := st.Entries[1]
	if charge.Kind != "charge" || charge.Amount != -1_000_000 || st.Entries[0].RequestID != "invoice-1" || st.Balance != 1_000_000 {
		t.Fatalf("statement = %+v; want the top-up and the charge of 1.00, balance 1.00", st)
	}
	for range 2 {
		if _, err := c.Refund(ctx, "acme", admin.Refund{RequestID: charge.RequestID, Reason: "bad answer"}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := c.BillingAccount(ctx, "acme")
	if err != nil || a.Balance != 2_000_000 || a.Source != "catalog" || a.Spent.Day.Price != 1_000_000 {
		t.Errorf("account after the refund, asked twice = %+v, %v; want balance 2.00 (refunded once), spent 1.00 today", a, err)
	}
	_, err = c.PutBillingAccount(ctx, "acme", admin.BillingAccountSpec{Plan: "standard"})
	if err == nil || !strings.Contains(err.Error(), "billing_account_read_only") {
		t.Errorf("PUT of the catalog's account = %v, want billing_account_read_only", err)
	}
	// The sluice command runs the billing CLI.
	t.Setenv(adminclient.EnvAdminToken, testEnv["ADMIN_TOKEN"])
	var out, errOut bytes.Buffer
	if code := app.Run(ctx, []string{"billing", "accounts", "--admin", "http://" + h.gw.AdminAddr()}, &out, &errOut); code != 0 ||
		!regexp.MustCompile(`acme\s+standard\s+2\.00`).MatchString(out.String()) {
		t.Errorf("sluice billing accounts: exit %d, %q %q; want acme's balance 2.00", code, out.String(), errOut.String())
	}
	prices, err := c.Prices(ctx, adminclient.PriceQuery{})
	if err != nil || len(prices) != 2 || !prices[0].InForce || prices[0].Source != "catalog" {
		t.Errorf("prices = %+v, %v; want the catalog's cost and price, in force", prices, err)
	}
}
