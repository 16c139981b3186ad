package sqlledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// historyDay is the first of the days TestRetain writes records on.
var historyDay = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// historyRecords are records over five days from historyDay, four a day
// with several tenants, models and outcomes: billed and charged, billed
// and unmeasured (no charge), unbilled and failed, billed at a second
// account.
func historyRecords() []sluice.UsageRecord {
	var recs []sluice.UsageRecord
	for d := range 5 {
		day := historyDay.AddDate(0, 0, d)
		for i, r := range []sluice.UsageRecord{{
			KeyID: "k1", Tenant: "web", Alias: "fast", Status: 200,
			Usage:   sluice.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 40, TotalTokens: 120, Measured: true},
			Billing: &sluice.Charge{Account: "acme", Plan: "std", PriceVersion: "std/fast@2026-01-01T00:00:00Z", Price: 1500, Cost: 400},
		}, {
			KeyID: "k1", Tenant: "web", Alias: "fast", Status: 200, Pool: "paid", TaskType: "chat",
			Billing: &sluice.Charge{Account: "acme", Plan: "std", Price: 900, Unmeasured: true},
		}, {
			KeyID: "k2", Tenant: "batch", Alias: "slow", Status: 429, Code: sluice.CodeCapacityWaitTimeout,
		}, {
			KeyID: "k3", Tenant: "batch", Alias: "slow", Status: 200, EndUser: "u7",
			Usage:   sluice.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Measured: true},
			Billing: &sluice.Charge{Account: "globex", Plan: "std", Price: 250, Cost: 100},
		}} {
			r.RequestID = fmt.Sprintf("r%d-%d", d, i)
			r.Started = day.Add(time.Duration(6*i+1)*time.Hour + 123456789*time.Nanosecond)
			model := map[string]string{"fast": "gpt-4o-mini", "slow": "gpt-4o"}[r.Alias]
			r.Executions = []sluice.Execution{{EdgeID: "e", AccountID: "org-1", Model: model, Started: r.Started, Usage: r.Usage}}
			recs = append(recs, r)
		}
	}
	return recs
}

// ledgerView is what billing shows of the store: what retention must not
// change.
type ledgerView struct {
	Statements map[string][]ledger.Entry
	Entries    []ledger.Entry // of one removed record's request
	Balances   ledger.Balances
	Spend      map[string][]ledger.SpendRow // by the report's name
}

func viewLedger(t *testing.T, s *sqlledger.Store) ledgerView {
	t.Helper()
	ctx := t.Context()
	v := ledgerView{Statements: map[string][]ledger.Entry{}, Spend: map[string][]ledger.SpendRow{}}
	for _, account := range []string{"acme", "globex"} {
		st, err := s.Statement(ctx, account, time.Time{}, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		v.Statements[account] = st
		// A window and a limit: the kept charges and the records' are
		// merged before the limit applies.
		if v.Statements[account+" from day 1, 3 entries"], err = s.Statement(ctx, account, historyDay.AddDate(0, 0, 1), time.Time{}, 3); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if v.Entries, err = s.Entries(ctx, "r0-0"); err != nil {
		t.Fatal(err)
	}
	if v.Balances, err = s.Balances(ctx, historyDay.AddDate(0, 0, 4)); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]ledger.SpendFilter{
		"total":                  {},
		"by day and tenant":      {By: []ledger.Dimension{ledger.ByDay, ledger.ByTenant}},
		"by account, key, model": {By: []ledger.Dimension{ledger.ByAccount, ledger.ByKey, ledger.ByModel, ledger.ByAlias}},
		"by pool and task":       {By: []ledger.Dimension{ledger.ByPool, ledger.ByTaskType}},
		"tenant web, days 1-2":   {Tenant: "web", From: historyDay.AddDate(0, 0, 1), To: historyDay.AddDate(0, 0, 3), By: []ledger.Dimension{ledger.ByDay}},
		"account globex":         {Account: "globex", KeyID: "k3"},
	} {
		if v.Spend[name], err = s.Spend(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// TestRetainKeepsBalancesStatementsAndReports removes the records of the
// first three of five days: they are gone from the list, and every
// statement, balance and spend report reads as before (the charges from
// ledger_charges, the spends from the roll-ups). On PostgreSQL the
// days' partitions go whole: the records were written before their
// partitions existed (to the default partition), which moves them in.
func TestRetainKeepsBalancesStatementsAndReports(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ctx := t.Context()
		db := sqldbtest.Open(t, url(t))
		s := sqlledger.New(db)
		recs := historyRecords()
		if err := s.RecordUsage(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Post(ctx, ledger.Entry{Account: "acme", RequestID: "inv-1", Kind: ledger.EntryTopUp, Amount: 10000,
			Admin: "ops", At: historyDay.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		last := historyDay.AddDate(0, 0, 4)
		for _, table := range []string{"usage_records", "executions"} {
			if err := db.AddPartitions(ctx, table, historyDay, last); err != nil {
				t.Fatal(err)
			}
		}
		before := partitionCount(t, db, "usage_records")
		// Written again, as a spool replays them, now in their partitions:
		// nothing changes.
		if err := s.RecordUsage(ctx, recs); err != nil {
			t.Fatal(err)
		}
		want := viewLedger(t, s)

		cutoff := historyDay.AddDate(0, 0, 3)
		removed, err := s.Retain(ctx, cutoff)
		if err != nil {
			t.Fatal(err)
		}
		if removed != 12 {
			t.Errorf("Retain removed %d records, want the 12 of 3 days", removed)
		}
		if diff := cmp.Diff(want, viewLedger(t, s)); diff != "" {
			t.Errorf("after Retain (-before +after):\n%s", diff)
		}
		left, err := s.ListUsage(ctx, ledger.UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 8 || left[0].Started.Before(cutoff) || len(left[0].Executions) != 1 {
			t.Errorf("ListUsage after Retain = %d records from %v, want the 8 of the last 2 days with their executions", len(left), left[0].Started)
		}
		if db.PartitionedByDay() {
			if after := partitionCount(t, db, "usage_records"); after != before-3 {
				t.Errorf("partitions of usage_records: %d before Retain, %d after; want 3 days dropped", before, after)
			}
			if n := rowCount(t, db, "executions WHERE started_at < ?", cutoff.UnixMicro()); n != 0 {
				t.Errorf("%d executions before the cutoff are left", n)
			}
		}

		// Again: nothing left to remove, nothing counted twice.
		if removed, err := s.Retain(ctx, cutoff); err != nil || removed != 0 {
			t.Errorf("second Retain = %d, %v; want 0, nil", removed, err)
		}
		if diff := cmp.Diff(want, viewLedger(t, s)); diff != "" {
			t.Errorf("after a second Retain (-before +after):\n%s", diff)
		}
	})
}

// TestSpendBeyondRetentionHasNoEndUser: records removed are rolled up
// without their end user, and a report by end user counts them under "".
func TestSpendBeyondRetentionHasNoEndUser(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ctx := t.Context()
		s := sqlledger.New(sqldbtest.Open(t, url(t)))
		if err := s.RecordUsage(ctx, historyRecords()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Retain(ctx, historyDay.AddDate(0, 0, 4)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Spend(ctx, ledger.SpendFilter{Account: "globex", By: []ledger.Dimension{ledger.ByEndUser}})
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.SpendRow{
			{Requests: 4, Tokens: 60, Price: 1000, Cost: 400},               // 4 days rolled up
			{EndUser: "u7", Requests: 1, Tokens: 15, Price: 250, Cost: 100}, // the last day's record
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Spend by end user (-want +got):\n%s", diff)
		}
	})
}

// TestRetainDeletesInBatchesWhileTheWriterWrites removes 2,000 records
// of SQLite, 100 per transaction, while a writer goes on recording: after
// each batch, the writer stores a record before the next batch begins,
// which it could not if one transaction held the write lock throughout.
func TestRetainDeletesInBatchesWhileTheWriterWrites(t *testing.T) {
	ctx := t.Context()
	s := sqlledger.New(sqldbtest.Open(t, "sqlite://"+t.TempDir()+"/sluice.db"))
	old := make([]sluice.UsageRecord, 2000)
	for i := range old {
		old[i] = sluice.UsageRecord{RequestID: fmt.Sprintf("old-%04d", i), Tenant: "web", Status: 200,
			Started: historyDay.Add(time.Duration(i) * time.Second), Executions: []sluice.Execution{{EdgeID: "e", Started: historyDay}}}
	}
	if err := s.RecordUsage(ctx, old); err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		defer close(done)
		for i := 0; wctx.Err() == nil; i++ {
			r := sluice.UsageRecord{RequestID: fmt.Sprintf("new-%05d", i), Tenant: "web", Status: 200, Started: historyDay.AddDate(0, 1, 0)}
			if err := s.RecordUsage(ctx, []sluice.UsageRecord{r}); err != nil {
				done <- err
				return
			}
			written.Add(1)
		}
	}()
	batches := 0
	s.SetRetainBatch(100, func() {
		batches++
		mark := written.Load()
		deadline := time.Now().Add(10 * time.Second)
		for written.Load() == mark && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if written.Load() == mark {
			t.Errorf("after batch %d the writer stored nothing in 10s", batches)
		}
	})
	removed, err := s.Retain(ctx, historyDay.AddDate(0, 0, 1))
	stop()
	if werr := <-done; werr != nil {
		t.Errorf("writer: %v", werr)
	}
	if err != nil || removed != 2000 {
		t.Fatalf("Retain = %d, %v; want 2000, nil", removed, err)
	}
	if batches != 21 { // 20 full, the last finds none
		t.Errorf("Retain ran %d batches, want 21", batches)
	}
	spend, err := s.Spend(ctx, ledger.SpendFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(spend) != 0 {
		t.Errorf("Spend = %v: unbilled records counted", spend)
	}
}

func partitionCount(t *testing.T, db *sqldb.DB, table string) int {
	t.Helper()
	parts, err := db.Partitions(t.Context(), table)
	if err != nil {
		t.Fatal(err)
	}
	return len(parts)
}

func rowCount(t *testing.T, db *sqldb.DB, from string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(t.Context(), `SELECT COUNT(*) FROM `+from, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetainInterruptedLosesNothing stops a Retain after its first batch
// (the database going away mid-run looks the same to it): what it did is
// done, what it did not is untouched, statements and reports read as
// before, and the next Retain finishes without counting anything twice.
// The records have no partitions, so PostgreSQL deletes them in batches
// too.
func TestRetainInterruptedLosesNothing(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		s := sqlledger.New(sqldbtest.Open(t, url(t)))
		if err := s.RecordUsage(t.Context(), historyRecords()); err != nil {
			t.Fatal(err)
		}
		want := viewLedger(t, s)
		ctx, cancel := context.WithCancel(t.Context())
		s.SetRetainBatch(5, cancel)
		cutoff := historyDay.AddDate(0, 0, 3)
		removed, err := s.Retain(ctx, cutoff)
		if err == nil || removed != 5 {
			t.Fatalf("interrupted Retain = %d, %v; want 5 and an error", removed, err)
		}
		if diff := cmp.Diff(want, viewLedger(t, s)); diff != "" {
			t.Errorf("after an interrupted Retain (-before +after):\n%s", diff)
		}
		s.SetRetainBatch(5, nil)
		if removed, err := s.Retain(t.Context(), cutoff); err != nil || removed != 7 {
			t.Errorf("next Retain = %d, %v; want the other 7", removed, err)
		}
		if diff := cmp.Diff(want, viewLedger(t, s)); diff != "" {
			t.Errorf("after the next Retain (-before +after):\n%s", diff)
		}
	})
}

// TestRetainGivesWayToALongReader holds a long transaction reading
// usage_records on PostgreSQL: dropping a partition would queue every
// insert behind it, so Retain gives up (after the lock timeout, 2s),
// having removed nothing, and succeeds once the reader is done.
func TestRetainGivesWayToALongReader(t *testing.T) {
	ctx := t.Context()
	db, s := historyOnPostgres(t, true)
	reading, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- db.InTx(ctx, func(tx *sqldb.Tx) error {
			if _, err := tx.Exec(ctx, `LOCK TABLE usage_records IN ACCESS SHARE MODE`); err != nil {
				return err
			}
			close(reading)
			<-release
			return nil
		})
	}()
	<-reading
	removed, err := s.Retain(ctx, historyDay.AddDate(0, 0, 3))
	if err == nil || removed != 0 {
		t.Errorf("Retain beside a long reader = %d, %v; want 0 and the lock timeout", removed, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if removed, err := s.Retain(ctx, historyDay.AddDate(0, 0, 3)); err != nil || removed != 12 {
		t.Errorf("Retain after the reader = %d, %v; want 12", removed, err)
	}
}

// TestRetainLeavesTheWorkToTheReplicaDoingIt holds Retain's lock in a
// transaction of its own, as another replica's Retain would: this one
// returns at once, removing nothing and reporting no failure.
func TestRetainLeavesTheWorkToTheReplicaDoingIt(t *testing.T) {
	ctx := t.Context()
	db, s := historyOnPostgres(t, false)
	whileAnotherReplicaRetains(t, db, func() {
		removed, err := s.Retain(ctx, historyDay.AddDate(0, 0, 3))
		if err != nil || removed != 0 {
			t.Errorf("Retain while another holds its lock = %d, %v; want 0, nil", removed, err)
		}
	})
	if n := rowCount(t, db, "usage_records"); n != 20 {
		t.Errorf("%d records left, want all 20", n)
	}
}

// TestRetainWaitsForARecordOfTheDayBeingWritten writes a record of a day
// that retention removes, in a transaction left open while Retain runs:
// Retain waits for it, and the record's charge and spend are kept, not
// dropped with the partition uncounted.
func TestRetainWaitsForARecordOfTheDayBeingWritten(t *testing.T) {
	ctx := t.Context()
	db, s := historyOnPostgres(t, true)
	late := historyRecords()[0]
	late.RequestID = "late"
	whileARecordIsWritten(t, db, late, func() error {
		_, err := s.Retain(ctx, historyDay.AddDate(0, 0, 1))
		return err
	})
	entries, err := s.Entries(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Amount != -1500 {
		t.Errorf("entries of the late record after retention = %v, want its charge", entries)
	}
	spend, err := s.Spend(ctx, ledger.SpendFilter{Account: "acme", To: historyDay.AddDate(0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(spend) != 1 || spend[0].Requests != 3 {
		t.Errorf("spend of acme on the day removed = %+v, want its 2 records and the late one", spend)
	}
}

// historyOnPostgres is a ledger on PostgreSQL holding historyRecords, and
// with partitioned, the partitions of their days (else they wait in the
// default partition).
func historyOnPostgres(t *testing.T, partitioned bool) (*sqldb.DB, *sqlledger.Store) {
	t.Helper()
	db := sqldbtest.Open(t, testenv.Postgres(t))
	s := sqlledger.New(db)
	if err := s.RecordUsage(t.Context(), historyRecords()); err != nil {
		t.Fatal(err)
	}
	if partitioned {
		if err := db.AddPartitions(t.Context(), "usage_records", historyDay, historyDay.AddDate(0, 0, 4)); err != nil {
			t.Fatal(err)
		}
	}
	return db, s
}

// whileAnotherReplicaRetains runs run while a transaction of its own
// holds the retention lock, as another replica's Retain or RollUp would.
func whileAnotherReplicaRetains(t *testing.T, db *sqldb.DB, run func()) {
	t.Helper()
	ctx := t.Context()
	err := db.InTx(ctx, func(tx *sqldb.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+sqldb.AdvisoryKey+`)`, sqlledger.RetainLock); err != nil {
			return err
		}
		run()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// whileARecordIsWritten inserts late (as the usage writer would, with its
// charge of 1,500 micros to acme) in a transaction it leaves open while
// run starts; once run waits on a lock the transaction holds, it commits,
// and returns when both have ended, failing the test on either's error.
func whileARecordIsWritten(t *testing.T, db *sqldb.DB, late sluice.UsageRecord, run func() error) {
	t.Helper()
	ctx := t.Context()
	ready, commit, written := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		written <- db.InTx(ctx, func(tx *sqldb.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO usage_records (request_id, key_id, tenant, alias, protocol, stream, status, code,
				started_at, latency_us, ttft_us, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, total_tokens, measured,
				billed, billing_account, price_micros) VALUES ('late', 'k1', 'web', 'fast', '', FALSE, 200, '', ?, 0, 0, 0, 0, 0, 0, 0, FALSE,
				TRUE, 'acme', 1500)`, late.Started.UnixMicro()); err != nil {
				return err
			}
			close(ready)
			<-commit
			return nil
		})
	}()
	<-ready
	ran := make(chan error)
	go func() { ran <- run() }()
	// run is waiting for the writer's lock before the writer commits.
	for waiting := 0; waiting == 0; time.Sleep(10 * time.Millisecond) {
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	close(commit)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}
