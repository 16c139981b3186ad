package app_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/simulator"
)

// An account with a daily allowance worth 2 requests and no prepaid
// balance: through the SDK, 2 requests run and the third is refused with
// billing_quota_exhausted. Once the day has ended, the refresh posts its
// closing entry — once — and the allowance is there again; a top-up is
// spent only after it.
func TestBillingAllowanceResets(t *testing.T) {
	h := billed(t, `max_inflight: 1, allowance: "2.00", cycle: day`, "", "", simulator.Options{})
	l := ledgerOf(t, h)
	requests := func(what string, ok int) {
		t.Helper()
		for i := range ok {
			if e := sdkErr(t, h, keyWeb, "fast"); e != nil {
				t.Fatalf("%s: request %d refused: %v", what, i+1, e)
			}
		}
		wantCode(t, what+": the request after them", sdkErr(t, h, keyWeb, "fast"), 429, "billing_quota_exhausted")
	}
	closings := func() []ledger.Entry {
		t.Helper()
		all, err := l.Statement(t.Context(), "acme", time.Time{}, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []ledger.Entry
		for _, e := range all {
			if e.Kind == ledger.EntryAllowance {
				out = append(out, e)
			}
		}
		return out
	}

	requests("the day's allowance", 2)
	if c := closings(); len(c) != 0 {
		t.Fatalf("closing entries while the day runs: %+v", c)
	}

	now := time.Now().UTC()
	today := ledger.Day(now)
	app.SkewBillingCycles(h.gw, today.AddDate(0, 0, 1).Sub(now)+time.Second) // the day has ended
	eventually(t, 5*time.Second, "the day's closing entry", func() bool { return len(closings()) > 0 })
	time.Sleep(2 * time.Second) // more refreshes: it is posted once all the same
	want := ledger.AllowanceRequestID("acme", today)
	if c := closings(); len(c) != 1 || c[0].RequestID != want || c[0].Amount != 2*billing.Unit {
		t.Errorf("closing entries = %+v, want one %s of 2.00", c, want)
	}
	if b, err := l.Balances(t.Context(), now); err != nil || b.Accounts["acme"].Balance != 0 {
		t.Errorf("balance after the day closed = %+v, %v; want 0.00: the allowance covered the day", b.Accounts["acme"], err)
	}

	topUp(t, h, l, "acme", "1.00")
	requests("the next day's allowance, then the top-up", 3)
	eventually(t, 5*time.Second, "a balance of -2.00: the top-up and the day's charges in full", func() bool {
		b, err := l.Balances(t.Context(), now)
		return err == nil && b.Accounts["acme"].Balance == -2*billing.Unit
	})
}
