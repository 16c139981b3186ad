package sqldb_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

// TestChargeEntriesBecomeTheirRecords upgrades a ledger written before
// migration 12, when every charge was also a row of ledger_entries: the
// copies go, the statement and the balance stay as they were, and a
// charge row without its record (posted apart) is kept.
func TestChargeEntriesBecomeTheirRecords(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		u := url(t)
		ctx := t.Context()
		at := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
		old, err := sqldb.OpenAt(ctx, u, 11)
		if err != nil {
			t.Fatal(err)
		}
		// Written as the build before did: the records and the balance
		// total of the one charged, then its charge row in the same ledger.
		oldRecord(t, old, oldCharge{id: "r1", at: at, account: "acme", price: 1500})
		oldRecord(t, old, oldCharge{id: "r2", at: at.Add(time.Minute), account: "acme", price: 700, unmeasured: true})
		if _, err := old.Exec(ctx, `INSERT INTO billing_totals (day, scope, id, amount_micros, cost_micros) VALUES (0, 'balance', 'acme', -1500, 0)`); err != nil {
			t.Fatal(err)
		}
		for _, row := range [][]any{
			{"r1", "charge", "acme", int64(-1500), "", "", at.UnixMicro()},
			{"apart", "charge", "acme", int64(-300), "", "", at.Add(time.Hour).UnixMicro()},
			{"inv-1", "topup", "acme", int64(5000), "", "ops", at.Add(-time.Hour).UnixMicro()},
		} {
			if _, err := old.Exec(ctx, `INSERT INTO ledger_entries (request_id, kind, account, amount_micros, reason, admin, at)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, row...); err != nil {
				t.Fatal(err)
			}
		}
		old.Close()

		db := sqldbtest.Open(t, u)
		var left []string
		rows, err := db.Query(ctx, `SELECT request_id FROM ledger_entries ORDER BY request_id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			left = append(left, id)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"apart", "inv-1"}; !cmp.Equal(left, want) {
			t.Errorf("ledger_entries after the upgrade = %v, want %v (r1's copy removed)", left, want)
		}
		got, err := sqlledger.New(db).Statement(ctx, "acme", time.Time{}, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.Entry{
			{Account: "acme", RequestID: "inv-1", Kind: ledger.EntryTopUp, Amount: 5000, Admin: "ops", At: at.Add(-time.Hour)},
			{Account: "acme", RequestID: "r1", Kind: ledger.EntryCharge, Amount: -1500, At: at},
			{Account: "acme", RequestID: "apart", Kind: ledger.EntryCharge, Amount: -300, At: at.Add(time.Hour)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("statement after the upgrade (-want +got):\n%s", diff)
		}
		// The migration leaves billing_totals alone: the balance the old
		// build kept (here, r1's charge only) is the balance still.
		b, err := sqlledger.New(db).Balances(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Accounts["acme"].Balance; got != -1500 {
			t.Errorf("balance after the upgrade = %s, want -0.0015", got)
		}
	})
}

// TestPriceVersionsByID upgrades records that named their price and cost
// versions in full (before migration 13): they read back the same, the
// versions are in price_versions once each, a new record reuses their ids
// and adds a version it is the first to name, and the statement, on its
// narrower index, lists the charges as before.
func TestPriceVersionsByID(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		u := url(t)
		ctx := t.Context()
		at := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
		const price, cost, newCost = "standard/fast@2025-01-01T00:00:00Z", "gpt-4o-mini@2025-01-01T00:00:00Z", "gpt-4o@2025-06-01T00:00:00Z"
		old, err := sqldb.OpenAt(ctx, u, 12)
		if err != nil {
			t.Fatal(err)
		}
		oldRecord(t, old, oldCharge{id: "r1", at: at, account: "acme", price: 1500, plan: "standard", priceVersion: price, costVersion: cost})
		oldRecord(t, old, oldCharge{id: "r2", at: at.Add(time.Minute), account: "acme", price: 700, plan: "standard", priceVersion: price})
		oldRecord(t, old, oldCharge{id: "r3", at: at.Add(2 * time.Minute)}) // unbilled
		old.Close()

		db := sqldbtest.Open(t, u)
		store := sqlledger.New(db)
		err = store.RecordUsage(ctx, []sluice.UsageRecord{{RequestID: "r4", Started: at.Add(3 * time.Minute),
			Billing: &sluice.Charge{Account: "acme", Plan: "standard", PriceVersion: price, CostVersion: newCost, Price: 900}}})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := store.ListUsage(ctx, ledger.UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var got [][3]string
		for _, r := range recs {
			var c sluice.Charge
			if r.Billing != nil {
				c = *r.Billing
			}
			got = append(got, [3]string{r.RequestID, c.PriceVersion, c.CostVersion})
		}
		want := [][3]string{{"r1", price, cost}, {"r2", price, ""}, {"r3", "", ""}, {"r4", price, newCost}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("records' versions after the upgrade (-want +got):\n%s", diff)
		}
		var versions int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM price_versions`).Scan(&versions); err != nil {
			t.Fatal(err)
		}
		if versions != 3 {
			t.Errorf("price_versions holds %d rows, want the 3 versions once each", versions)
		}
		entries, err := store.Statement(ctx, "acme", time.Time{}, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var charged []string
		for _, e := range entries {
			charged = append(charged, e.RequestID)
		}
		if want := []string{"r1", "r2", "r4"}; !cmp.Equal(charged, want) {
			t.Errorf("statement after the upgrade lists %v, want %v", charged, want)
		}
	})
}

// oldCharge is a usage record as an earlier schema held it: its charge's
// columns, the version strings included (none: an unbilled record).
type oldCharge struct {
	id                        string
	at                        time.Time
	account, plan             string
	priceVersion, costVersion string
	price                     int64
	unmeasured                bool
}

// oldRecord inserts c into db, at a schema version from 7 (billing's
// columns) to 12, as the builds of those versions wrote it.
func oldRecord(t *testing.T, db *sqldb.DB, c oldCharge) {
	t.Helper()
	_, err := db.Exec(t.Context(), `INSERT INTO usage_records (request_id, key_id, tenant, alias, protocol, stream, status, code,
			started_at, latency_us, ttft_us, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, total_tokens, measured,
			billed, billing_account, price_plan, price_version, cost_version, price_micros, unmeasured)
		VALUES (?, '', '', '', '', FALSE, 0, '', ?, 0, 0, 0, 0, 0, 0, 0, FALSE, ?, ?, ?, ?, ?, ?, ?)`,
		c.id, c.at.UnixMicro(), c.account != "", c.account, c.plan, c.priceVersion, c.costVersion, c.price, c.unmeasured)
	if err != nil {
		t.Fatal(err)
	}
}

// TestOneEntryPerIdempotencyKey upgrades a ledger in which one key named
// both a top-up and an adjustment (before migration 14): both amounts are
// kept, the adjustment under <key>:adjustment, and from then on the
// database takes no second entry of the two kinds under one key; stored
// billing accounts gain an overdraft of 0.
func TestOneEntryPerIdempotencyKey(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		u := url(t)
		ctx := t.Context()
		old, err := sqldb.OpenAt(ctx, u, 13)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"topup", "adjustment"} {
			if _, err := old.Exec(ctx, `INSERT INTO ledger_entries (request_id, kind, account, amount_micros, reason, admin, at)
				VALUES ('inv-1', ?, 'acme', 5000000, 'r', 'ops', 0)`, kind); err != nil {
				t.Fatal(err)
			}
		}
		// A balance the old upsert carried past the end of int64: a float
		// on SQLite, no row at all on PostgreSQL (which refused the sum).
		for _, add := range []int64{math.MaxInt64, 1} {
			if _, err := old.Exec(ctx, `INSERT INTO billing_totals (day, scope, id, amount_micros, cost_micros) VALUES (0, 'balance', 'acme', ?, 0)
				ON CONFLICT (day, scope, id) DO UPDATE SET amount_micros = billing_totals.amount_micros + excluded.amount_micros`, add); err != nil &&
				!strings.Contains(err.Error(), "out of range") {
				t.Fatal(err)
			}
		}
		if _, err := old.Exec(ctx, `INSERT INTO billing_accounts (id, plan, max_inflight, on_limit, reserve, allowance_micros, cycle,
			budget_day_micros, budget_month_micros, updated_at) VALUES ('acme', 'standard', 1, 'wait', TRUE, 0, '', 0, 0, 0)`); err != nil {
			t.Fatal(err)
		}
		old.Close()

		db := sqldbtest.Open(t, u)
		var ids []string
		rows, err := db.Query(ctx, `SELECT request_id || '/' || kind FROM ledger_entries ORDER BY kind`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if want := []string{"inv-1:adjustment/adjustment", "inv-1/topup"}; !slices.Equal(ids, want) {
			t.Errorf("entries after the upgrade = %v, want %v", ids, want)
		}
		_, err = db.Exec(ctx, `INSERT INTO ledger_entries (request_id, kind, account, amount_micros, reason, admin, at)
			VALUES ('inv-1', 'adjustment', 'acme', 1, 'r', 'ops', 0)`)
		if !sqldb.IsUniqueViolation(err) {
			t.Errorf("an adjustment under a top-up's key = %v, want a unique violation", err)
		}
		var overdraft int64
		if err := db.QueryRow(ctx, `SELECT overdraft_micros FROM billing_accounts WHERE id = 'acme'`).Scan(&overdraft); err != nil || overdraft != 0 {
			t.Errorf("overdraft of a stored account after the upgrade = %d, %v; want 0", overdraft, err)
		}
		b, err := sqlledger.New(db).Balances(ctx, time.Now())
		if err != nil {
			t.Fatalf("Balances after the upgrade = %v; want the overflowed balance readable", err)
		}
		if got := b.Accounts["acme"].Balance; got != math.MaxInt64 {
			t.Errorf("overflowed balance after the upgrade = %s, want it held at %s", got, billing.Micros(math.MaxInt64))
		}
	})
}
