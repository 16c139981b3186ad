package sqldb_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// historyView is what migration 17 must keep of a database.
type historyView struct {
	Usage     []sluice.UsageRecord
	Statement []ledger.Entry
	Balances  ledger.Balances
	Audit     []catalog.AuditEntry
}

func viewHistory(t *testing.T, db *sqldb.DB, at time.Time) historyView {
	t.Helper()
	ctx := t.Context()
	s := sqlledger.New(db)
	var v historyView
	var err error
	if v.Usage, err = s.ListUsage(ctx, ledger.UsageFilter{}); err != nil {
		t.Fatal(err)
	}
	if v.Statement, err = s.Statement(ctx, "acme", time.Time{}, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if v.Balances, err = s.Balances(ctx, at); err != nil {
		t.Fatal(err)
	}
	if v.Audit, err = sqlcatalog.New(db).ListAudit(ctx, catalog.AuditFilter{}); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHistoryByDayMigratesInPlace upgrades a database written by the
// build before migration 17 — records over two days with executions and
// a job, charges, a top-up, audit entries with targets — and finds every
// row where it was: on PostgreSQL, in the default partition of its now
// partitioned table, then, once PartitionDays has run, in the partition
// of its day. Written again after the upgrade, the records change nothing;
// an audit entry appended takes the next ID.
func TestHistoryByDayMigratesInPlace(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		u := url(t)
		ctx := t.Context()
		day := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
		recs := []sluice.UsageRecord{{
			RequestID: "r1", KeyID: "k1", Tenant: "web", Status: 200, Started: day.Add(10 * time.Hour),
			Usage:      sluice.Usage{PromptTokens: 10, TotalTokens: 12, Measured: true},
			Executions: []sluice.Execution{{EdgeID: "e1", Started: day.Add(10 * time.Hour)}, {EdgeID: "e2", Started: day.Add(10*time.Hour + time.Second)}},
			Billing:    &sluice.Charge{Account: "acme", Plan: "std", Price: 1500, Cost: 300},
		}, {
			RequestID: "video_1", KeyID: "k1", Tenant: "web", Status: 200, Started: day.Add(30 * time.Hour),
			Job:        &sluice.JobUsage{State: "completed", Submitted: day.Add(30 * time.Hour), Ended: day.Add(31 * time.Hour), Seconds: 8},
			Executions: []sluice.Execution{{EdgeID: "e1", Started: day.Add(30 * time.Hour)}},
			Billing:    &sluice.Charge{Account: "acme", Plan: "std", Price: 700},
		}}
		old, err := sqldb.OpenAt(ctx, u, 16)
		if err != nil {
			t.Fatal(err)
		}
		// This build's ledger writes and reads the cache_hit column of
		// migration 20, and looks up the rolled-up days of migration 21
		// when it writes records of past days: the old schema has them
		// only while the ledger uses it.
		for _, stmt := range []string{`ALTER TABLE usage_records ADD COLUMN cache_hit BOOLEAN NOT NULL DEFAULT FALSE`,
			`CREATE TABLE usage_days_rolled (day BIGINT NOT NULL PRIMARY KEY, rolled_at BIGINT NOT NULL)`} {
			if _, err := old.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		if err := sqlledger.New(old).RecordUsage(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if _, err := sqlledger.New(old).Post(ctx, ledger.Entry{Account: "acme", RequestID: "inv-1", Kind: ledger.EntryTopUp,
			Amount: 5000, Admin: "ops", At: day}); err != nil {
			t.Fatal(err)
		}
		// As the build before appended them: ID MAX(id) + 1.
		for id, at := range map[int64]time.Time{1: day.Add(time.Hour), 2: day.Add(26 * time.Hour)} {
			if _, err := old.Exec(ctx, `INSERT INTO audit_log (id, at, token_id, remote, method, path, action, targets, status, error)
				VALUES (?, ?, 'ops', '', 'POST', '/admin/keys', 'key.create', '["k1"]', 201, '')`, id, at.UnixMicro()); err != nil {
				t.Fatal(err)
			}
			if _, err := old.Exec(ctx, `INSERT INTO audit_targets (entry_id, target) VALUES (?, 'k1')`, id); err != nil {
				t.Fatal(err)
			}
		}
		// Read by this build, whose statement reads ledger_charges too,
		// which the old schema lacks: the statement is written out.
		want := historyView{Statement: []ledger.Entry{
			{Account: "acme", RequestID: "inv-1", Kind: ledger.EntryTopUp, Amount: 5000, Admin: "ops", At: day},
			{Account: "acme", RequestID: "r1", Kind: ledger.EntryCharge, Amount: -1500, At: day.Add(10 * time.Hour)},
			{Account: "acme", RequestID: "video_1", Kind: ledger.EntryCharge, Amount: -700, At: day.Add(30 * time.Hour)},
		}}
		if want.Usage, err = sqlledger.New(old).ListUsage(ctx, ledger.UsageFilter{}); err == nil {
			want.Balances, err = sqlledger.New(old).Balances(ctx, day.Add(30*time.Hour))
		}
		if err == nil {
			want.Audit, err = sqlcatalog.New(old).ListAudit(ctx, catalog.AuditFilter{})
		}
		if err == nil {
			_, err = old.Exec(ctx, `ALTER TABLE usage_records DROP COLUMN cache_hit`)
		}
		if err == nil {
			_, err = old.Exec(ctx, `DROP TABLE usage_days_rolled`)
		}
		if err != nil {
			t.Fatal(err)
		}
		old.Close()

		db := sqldbtest.Open(t, u)
		if diff := cmp.Diff(want, viewHistory(t, db, day.Add(30*time.Hour))); diff != "" {
			t.Errorf("after the upgrade (-before +after):\n%s", diff)
		}
		if db.PartitionedByDay() {
			for _, table := range []string{"usage_records", "executions", "ledger_charges", "audit_log"} {
				var partitioned bool
				if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(?))`,
					table).Scan(&partitioned); err != nil {
					t.Fatal(err)
				}
				if !partitioned {
					t.Errorf("%s is not partitioned after the upgrade", table)
				}
			}
			if err := db.PartitionDays(ctx, day); err != nil {
				t.Fatal(err)
			}
			for table, want := range map[string]int{"usage_records_20261103": 1, "usage_records_20261104": 1, "executions_20261103": 2,
				"executions_20261104": 1, "audit_log_20261103": 1, "audit_log_20261104": 1, "usage_records_default": 0,
				"executions_default": 0, "audit_log_default": 0} {
				var n int
				if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != want {
					t.Errorf("%s holds %d rows, want %d", table, n, want)
				}
			}
		}
		if err := sqlledger.New(db).RecordUsage(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, viewHistory(t, db, day.Add(30*time.Hour))); diff != "" {
			t.Errorf("after the records were written again (-before +after):\n%s", diff)
		}
		e := &catalog.AuditEntry{At: day.Add(40 * time.Hour), Action: "key.revoke", Status: 200}
		if err := sqlcatalog.New(db).AppendAudit(ctx, e); err != nil || e.ID != 3 {
			t.Errorf("AppendAudit after the upgrade = ID %d, %v; want 3", e.ID, err)
		}
	})
}

// BenchmarkRecordUsageOnPostgreSQL writes batches of 256 billed records of
// one execution each, as the usage writer does, to PostgreSQL with the
// schema before migration 17 (unpartitioned) and after it (partitioned by
// day, the partitions made): ns/op is per record, and is mostly the
// database server's time, which runs beside the benchmark.
func BenchmarkRecordUsageOnPostgreSQL(b *testing.B) {
	for _, version := range []int64{16, 17} {
		b.Run(map[int64]string{16: "unpartitioned", 17: "partitioned"}[version], func(b *testing.B) {
			db, err := sqldb.OpenAt(b.Context(), testenv.Postgres(b), version)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			if err := db.PartitionDays(b.Context(), time.Now()); version == 17 && err != nil {
				b.Fatal(err)
			}
			s := sqlledger.New(db)
			const batch = 256
			recs := make([]sluice.UsageRecord, batch)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				if n%batch == 0 && n > 0 {
					if err := s.RecordUsage(b.Context(), recs); err != nil {
						b.Fatal(err)
					}
				}
				now := time.Now()
				recs[n%batch] = sluice.UsageRecord{
					RequestID: fmt.Sprintf("req_%d", n), KeyID: "bench", Tenant: "bench", Alias: "bench", Protocol: sluice.ProtocolOpenAIChat,
					Status: 200, Started: now, Latency: 40 * time.Millisecond, Usage: sluice.Usage{PromptTokens: 146, TotalTokens: 246, Measured: true},
					Executions: []sluice.Execution{{EdgeID: "sim-1/sim/gpt-4o-mini", Model: "gpt-4o-mini", Status: sluice.ExecutionOK, Started: now}},
					Billing:    &sluice.Charge{Account: "bench", Plan: "standard", Price: 427600, Cost: 81900},
				}
				n++
			}
		})
	}
}

// TestPartitionMadeWhileTheWriterWrites makes the partition of a day
// while a writer records requests of that day, which went to the default
// partition until then: the partition is made, every record is stored
// once, and none is left in the default partition.
func TestPartitionMadeWhileTheWriterWrites(t *testing.T) {
	ctx := t.Context()
	db := sqldbtest.Open(t, testenv.Postgres(t))
	s := sqlledger.New(db)
	day := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	stop, done := make(chan struct{}), make(chan error)
	written := 0
	go func() {
		defer close(done)
		for ; ; written++ {
			select {
			case <-stop:
				return
			default:
			}
			r := sluice.UsageRecord{RequestID: fmt.Sprintf("r%05d", written), Status: 200, Started: day.Add(time.Duration(written) * time.Second)}
			if err := s.RecordUsage(ctx, []sluice.UsageRecord{r}); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // some records in the default partition first
	err := db.AddPartitions(ctx, "usage_records", day, day)
	time.Sleep(100 * time.Millisecond) // and some after
	close(stop)
	if werr := <-done; werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	if err != nil {
		t.Fatalf("AddPartitions beside the writer: %v", err)
	}
	var inDay, inDefault int
	if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM usage_records_20260201`).Scan(&inDay); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM usage_records_default`).Scan(&inDefault); err != nil {
		t.Fatal(err)
	}
	if inDay != written || inDefault != 0 || written == 0 {
		t.Errorf("%d records written: %d in the day's partition, %d in the default one", written, inDay, inDefault)
	}
}
