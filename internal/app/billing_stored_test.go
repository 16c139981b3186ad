package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/simulator"
)

// storedBillingTemplate is catalogTemplate's layout (fastOnEpA) billed
// from the admin API alone: its billing section is a currency, and its one
// key is bound to a billing account it does not declare.
const storedBillingTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
` + fastOnEpA + `keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, billing_account: acme}
billing: {currency: USD}
`

// A deployment run from the admin API: a price version and a billing
// account made through it bill requests at once on this gateway — a
// catalog key and a stored key bound to the stored account, a top-up, the
// statement; a price applied while a stream runs charges the stream the
// old price and the next request the new one; and a second gateway on the
// same PostgreSQL prices and admits by what the first one stored within
// about a second.
func TestBillingStoredAccountsAndPrices(t *testing.T) {
	a, b := replicasOnPostgres(t, storedBillingTemplate, simulator.Options{Default: simulator.Behavior{ChunkDelay: 150 * time.Millisecond}})
	ctx := t.Context()
	c := a.adminClient()

	wantCode(t, "a key bound to an account nobody has made", sdkErr(t, a, keyWeb, "fast"), http.StatusForbidden, "access_key_unbound")
	if _, err := c.ApplyPrice(ctx, admin.PriceSpec{Kind: billing.KindPrice, Plan: "standard", Alias: "fast",
		RateText: billing.RateText{Request: "1.00"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBillingAccount(ctx, "acme", admin.BillingAccountSpec{Plan: "standard", MaxInflight: 2}); err != nil {
		t.Fatal(err)
	}
	// At once, not at the next refresh: the account is known, its balance 0.
	wantCode(t, "a request on the new account before a top-up", sdkErr(t, a, keyWeb, "fast"), http.StatusTooManyRequests, "billing_quota_exhausted")
	if _, err := c.TopUp(ctx, "acme", "invoice-1", admin.MoneyChange{Amount: 10 * billing.Unit, Reason: "invoice 1"}); err != nil {
		t.Fatal(err)
	}
	api, err := c.CreateKey(ctx, admin.KeySpec{ID: "api", Name: "API", Tenant: "web", KeySettings: admin.KeySettings{BillingAccount: "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateKey(ctx, admin.KeySpec{ID: "typo", Name: "typo", Tenant: "web", KeySettings: admin.KeySettings{BillingAccount: "acne"}})
	if err == nil || !strings.Contains(err.Error(), `unknown billing account "acne"`) {
		t.Errorf("CreateKey bound to an account nobody has = %v, want a 400 naming it", err)
	}
	for _, key := range []string{api.Key, keyWeb} {
		if e := sdkErr(t, a, key, "fast"); e != nil {
			t.Fatalf("a request on the topped-up stored account: %v", e)
		}
	}

	// A stream runs; a second later (so its start is before the new
	// version's, which is now to the second) the price doubles.
	stream := startStream(t, a, keyWeb)
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	if _, err := c.ApplyPrice(ctx, admin.PriceSpec{Kind: billing.KindPrice, Plan: "standard", Alias: "fast",
		RateText: billing.RateText{Request: "2.00"}}); err != nil {
		t.Fatal(err)
	}
	if a.simA.InFlight() != 1 {
		t.Fatal("the stream ended before the new price was applied: make it longer")
	}
	if err := <-stream; err != nil {
		t.Fatalf("stream: %v", err)
	}
	if e := sdkErr(t, a, keyWeb, "fast"); e != nil {
		t.Fatal(e)
	}
	// Top-up 10.00; api's and web's requests, the stream at 1.00; the next at 2.00.
	st := statementOf(t, c, "acme", 5)
	var amounts []string
	for _, e := range st.Entries {
		amounts = append(amounts, e.Amount.String())
	}
	if got, want := strings.Join(amounts, " "), "10.00 -1.00 -1.00 -1.00 -2.00"; got != want || st.Balance != 5*billing.Unit {
		t.Errorf("statement = %s, balance %s; want %s, balance 5.00", got, st.Balance, want)
	}

	// The second gateway, on the same database, has read all of it.
	if e := sdkErr(t, b, keyWeb, "fast"); e != nil {
		t.Fatalf("the second gateway: %v", e)
	}
	// A new account, its key and a new price, made on the first gateway,
	// reach the second within about a second.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	if _, err := c.ApplyPrice(ctx, admin.PriceSpec{Kind: billing.KindPrice, Plan: "standard", Alias: "fast",
		RateText: billing.RateText{Request: "3.00"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBillingAccount(ctx, "beta", admin.BillingAccountSpec{Plan: "standard"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TopUp(ctx, "beta", "invoice-2", admin.MoneyChange{Amount: 10 * billing.Unit, Reason: "invoice 2"}); err != nil {
		t.Fatal(err)
	}
	beta, err := c.CreateKey(ctx, admin.KeySpec{ID: "beta", Name: "beta", Tenant: "web", KeySettings: admin.KeySettings{BillingAccount: "beta"}})
	if err != nil {
		t.Fatal(err)
	}
	made := time.Now()
	eventually(t, 3*time.Second, "beta's key admitted on the second gateway", func() bool { return sdkErr(t, b, beta.Key, "fast") == nil })
	if took := time.Since(made); took > 2500*time.Millisecond {
		t.Errorf("the second gateway admitted beta %s after it was made, want about a second", took)
	}
	if st := statementOf(t, c, "beta", 2); st.Entries[1].Amount != -3*billing.Unit {
		t.Errorf("beta's charge on the second gateway = %s, want the new price 3.00", st.Entries[1].Amount)
	}
}

// statementOf waits until account's statement has n entries and returns it.
func statementOf(t *testing.T, c *adminclient.Client, account string, n int) *admin.Statement {
	t.Helper()
	var st *admin.Statement
	eventually(t, 5*time.Second, fmt.Sprintf("%d entries in %s's statement", n, account), func() bool {
		var err error
		st, err = c.Statement(t.Context(), account, time.Time{}, time.Time{}, 0)
		return err == nil && len(st.Entries) == n
	})
	return st
}
