package sqlledger_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

// dayTotals are the requests and price of the day summary and of the
// spend report of historyDay's first day, and whether the summary came
// from roll-ups.
type dayTotals struct {
	SummaryRequests, SpendRequests int64
	Price                          int64
	Approximate                    bool
}

func firstDayTotals(t *testing.T, s *sqlledger.Store) dayTotals {
	t.Helper()
	day := ledger.UsageFilter{Since: historyDay, Until: historyDay.AddDate(0, 0, 1)}
	sum, err := s.SummarizeUsage(t.Context(), day, ledger.BucketDay)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Spend(t.Context(), ledger.SpendFilter{From: day.Since, To: day.Until})
	if err != nil || len(rows) != 1 {
		t.Fatalf("Spend = %+v, %v; want one row", rows, err)
	}
	return dayTotals{sum.Total.Requests, rows[0].Requests, int64(rows[0].Price), sum.Approximate}
}

// TestRollUpDayAgainCountsEachRecordOnce rolls a day up, writes a record
// of it late (added to the roll-up as a row of its own), then rolls the
// day up again: the day's rows are replaced, the late record counted
// once, by the summary and the spend report alike.
func TestRollUpDayAgainCountsEachRecordOnce(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ctx := t.Context()
		db := sqldbtest.Open(t, url(t))
		s := sqlledger.New(db)
		if err := s.RecordUsage(ctx, historyRecords()); err != nil {
			t.Fatal(err)
		}
		if err := s.RollUp(ctx, historyDay.AddDate(0, 0, 2)); err != nil {
			t.Fatal(err)
		}
		// 4 records, 3 billed; 1500 + 900 + 250 charged.
		if got, want := firstDayTotals(t, s), (dayTotals{4, 3, 2650, true}); got != want {
			t.Errorf("rolled up: %+v, want %+v", got, want)
		}
		late := historyRecords()[0]
		late.RequestID, late.Started = "late", late.Started.Add(time.Hour)
		for range 2 { // written twice, as a spool replays it
			if err := s.RecordUsage(ctx, []sluice.UsageRecord{late}); err != nil {
				t.Fatal(err)
			}
		}
		want := dayTotals{5, 4, 4150, true}
		if got := firstDayTotals(t, s); got != want {
			t.Errorf("with a late record: %+v, want %+v", got, want)
		}
		if n := rowCount(t, db, `usage_days WHERE late <> ''`); n != 1 {
			t.Errorf("%d rows of late records, want 1", n)
		}
		if err := s.RollUpDay(ctx, historyDay); err != nil {
			t.Fatal(err)
		}
		if got := firstDayTotals(t, s); got != want {
			t.Errorf("rolled up again: %+v, want %+v", got, want)
		}
		if n := rowCount(t, db, `usage_days WHERE late <> ''`); n != 0 {
			t.Errorf("%d rows of late records after the day was rolled up again, want 0", n)
		}
	})
}

// TestRollUpLeavesADayRetentionTouched leaves alone a day whose records
// retention removed in part before roll-ups were kept (its usage_rollups
// rows exist): the records left are not the day's, and the day is read
// from them and usage_rollups as before.
func TestRollUpLeavesADayRetentionTouched(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ctx := t.Context()
		db := sqldbtest.Open(t, url(t))
		s := sqlledger.New(db)
		if err := s.RecordUsage(ctx, historyRecords()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO usage_rollups (day, tenant, key_id, billing_account, alias, model, pool, task_type,
			billed, requests, errors, unmeasured, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, total_tokens,
			price_micros, cost_micros) VALUES (?, 'web', 'k9', 'acme', 'fast', '', '', '', TRUE, 1, 0, 0, 0, 0, 0, 0, 0, 100, 0)`,
			historyDay.Unix()/86400); err != nil {
			t.Fatal(err)
		}
		if err := s.RollUp(ctx, historyDay.AddDate(0, 0, 2)); err != nil {
			t.Fatal(err)
		}
		if n := rowCount(t, db, `usage_days_rolled WHERE day = ?`, historyDay.Unix()/86400); n != 0 {
			t.Errorf("the touched day is rolled up (%d rows)", n)
		}
		// The summary reads the records held; the spend report adds the
		// removed record's roll-up.
		if got, want := firstDayTotals(t, s), (dayTotals{4, 4, 2750, false}); got != want {
			t.Errorf("touched day: %+v, want %+v", got, want)
		}
	})
}

// TestRollUpLeavesTheWorkToTheReplicaDoingIt holds the lock RollUp takes
// (Retain's), as another replica would: RollUp returns at once, rolling
// nothing up and reporting no failure.
func TestRollUpLeavesTheWorkToTheReplicaDoingIt(t *testing.T) {
	ctx := t.Context()
	db, s := historyOnPostgres(t, true)
	whileAnotherReplicaRetains(t, db, func() {
		if err := s.RollUp(ctx, historyDay.AddDate(0, 0, 3)); err != nil {
			t.Errorf("RollUp while another holds its lock = %v, want nil", err)
		}
	})
	if n := rowCount(t, db, "usage_days_rolled"); n != 0 {
		t.Errorf("%d days rolled up, want none", n)
	}
}

// TestRollUpWaitsForARecordOfTheDayBeingWritten writes a record of a day
// in a transaction left open while RollUp rolls the day up: RollUp waits
// for it, and the record is counted once.
func TestRollUpWaitsForARecordOfTheDayBeingWritten(t *testing.T) {
	ctx := t.Context()
	db, s := historyOnPostgres(t, true)
	late := historyRecords()[0]
	late.RequestID, late.Started = "late", late.Started.Add(time.Hour)
	whileARecordIsWritten(t, db, late, func() error { return s.RollUp(ctx, historyDay.AddDate(0, 0, 2)) })
	if got, want := firstDayTotals(t, s), (dayTotals{5, 4, 4150, true}); got != want {
		t.Errorf("after the roll-up: %+v, want %+v", got, want)
	}
}
