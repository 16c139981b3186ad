package app

import (
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/memledger"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// cyclesCatalog bills key web to acme, whose allowance is 2.00 a day.
const cyclesCatalog = `version: 1
endpoints:
  - {id: ep, base_url: https://api.openai.com, protocols: [openai.chat]}
credentials:
  - {id: cred, secret_env: UP, endpoints: [ep]}
models:
  - alias: fast
    deployments: [{model: gpt-4o-mini, endpoints: [ep]}]
keys:
  - {id: web, secret_env: KEY_WEB, billing_account: acme}
billing:
  plans:
    - id: standard
      prices: [{alias: fast, request: "1.00", effective_from: "2020-01-01T00:00:00Z"}]
  accounts:
    - {id: acme, plan: standard, allowance: "2.00", cycle: day}
`

func cyclesLive(t *testing.T) *pipeline.Live {
	t.Helper()
	env := func(string) (string, bool) { return "secret-value-0123456789", true }
	c, err := config.Load([]byte(cyclesCatalog), env)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := pipeline.Compile(c, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	live := &pipeline.Live{}
	live.Swap(snap)
	return live
}

// The refresh closes each ended day of acme's allowance once, whichever
// replica reads first, with what the day spent up to the allowance; a
// replica that started since closes the day before only when the one
// before that was closed (acme had its allowance then); the day before
// the allowance was served is never closed.
func TestAllowanceCyclesClose(t *testing.T) {
	ctx := t.Context()
	store := &memledger.Store{}
	live := cyclesLive(t)
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	spend := func(id string, at time.Time, price billing.Micros) {
		t.Helper()
		rec := sluice.UsageRecord{RequestID: id, KeyID: "web", Alias: "fast", Started: at, Status: 200,
			Usage: sluice.Usage{PromptTokens: 1, Measured: true}, Billing: &sluice.Charge{Account: "acme", Plan: "standard", Price: int64(price)}}
		if err := store.RecordUsage(ctx, []sluice.UsageRecord{rec}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(l *ledgerTotals, at time.Time) {
		t.Helper()
		if _, err := l.Totals(ctx, at); err != nil {
			t.Fatalf("Totals at %s = %v", at, err)
		}
	}
	closings := func() map[string]billing.Micros {
		t.Helper()
		got, err := store.Statement(ctx, "acme", time.Time{}, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]billing.Micros{}
		for _, e := range got {
			if e.Kind == ledger.EntryAllowance {
				out[e.RequestID] = e.Amount
				if start, _ := time.Parse(time.RFC3339, e.RequestID[len("allowance:acme:"):]); !e.At.Equal(start.AddDate(0, 0, 1)) {
					t.Errorf("closing %s at %s, want at its day's end", e.RequestID, e.At)
				}
			}
		}
		return out
	}
	closing := func(d time.Time) string { return ledger.AllowanceRequestID("acme", d) }

	spend("before", day.Add(-time.Hour), 3*billing.Unit) // the day before the allowance was served
	first := newLedgerTotals(store, live)
	read(first, day.Add(9*time.Hour))
	spend("d1", day.Add(10*time.Hour), billing.Unit+billing.Unit/2)
	read(first, day.Add(12*time.Hour))
	if got := closings(); len(got) != 0 {
		t.Fatalf("closings during the first day = %v, want none (the day before had no allowance served)", got)
	}

	next := day.AddDate(0, 0, 1)
	read(first, next.Add(time.Second))
	read(first, next.Add(2*time.Second))
	want := map[string]billing.Micros{closing(day): billing.Unit + billing.Unit/2}
	if got := closings(); !maps.Equal(got, want) {
		t.Fatalf("closings after the first day = %v, want %v", got, want)
	}

	spend("d2a", next.Add(time.Hour), 2*billing.Unit)
	spend("d2b", next.Add(2*time.Hour), billing.Unit/2) // beyond the allowance: borne by the balance
	third := next.AddDate(0, 0, 1)
	restarted := newLedgerTotals(store, live) // served nothing of the second day
	read(restarted, third.Add(time.Second))
	read(first, third.Add(3*time.Second))
	want[closing(next)] = 2 * billing.Unit
	if got := closings(); !maps.Equal(got, want) {
		t.Fatalf("closings after the second day = %v, want %v", got, want)
	}
	b, err := store.Balances(ctx, third)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantB := b.Accounts["acme"].Balance, -3*billing.Unit-billing.Unit/2; got != wantB {
		t.Errorf("balance = %s, want %s: the day before the allowance and the spend beyond the second day's", got, wantB)
	}
}
