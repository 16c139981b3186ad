package sqldb_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
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
		// Written as the build before did: the record (and its balance
		// total), then its charge row in the same ledger.
		err = sqlledger.New(old).RecordUsage(ctx, []sluice.UsageRecord{
			{RequestID: "r1", Started: at, Billing: &sluice.Charge{Account: "acme", Price: 1500}},
			{RequestID: "r2", Started: at.Add(time.Minute), Billing: &sluice.Charge{Account: "acme", Price: 700, Unmeasured: true}},
		})
		if err != nil {
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
