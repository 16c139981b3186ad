package app

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

// TestHistoryJob runs the history job over 40 days of records and audit
// entries, one of each a day, with retention {usage: 10d, audit: 30d}:
// what is older is gone, the rest is kept, and on PostgreSQL every
// partitioned table has its partitions from today on and an empty default
// partition (the rows the migration put there moved to their days). With
// no retention, a run removes nothing.
func TestHistoryJob(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ctx := t.Context()
		db := sqldbtest.Open(t, url(t))
		var logs bytes.Buffer
		h := &history{db: db, usage: sqlledger.New(db), audit: sqlcatalog.New(db), log: slog.New(slog.NewTextHandler(&logs, nil))}
		now := time.Date(2026, 6, 15, 13, 0, 0, 0, time.UTC)
		for d := range 40 {
			at := now.AddDate(0, 0, -d)
			if err := h.usage.RecordUsage(ctx, []sluice.UsageRecord{{RequestID: fmt.Sprintf("r%02d", d), Tenant: "web", Status: 200, Started: at}}); err != nil {
				t.Fatal(err)
			}
			if err := h.audit.AppendAudit(ctx, &catalog.AuditEntry{At: at, Action: "key.create", Status: 201}); err != nil {
				t.Fatal(err)
			}
		}

		h.retention = func() config.Retention { return config.Retention{} }
		h.run(ctx, now)
		count := func(table string) (n int) {
			if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if r, a := count("usage_records"), count("audit_log"); r != 40 || a != 40 {
			t.Errorf("without retention: %d records and %d audit entries left, want 40 of each", r, a)
		}

		h.retention = func() config.Retention { return config.Retention{Usage: 10, Audit: 30} }
		h.run(ctx, now)
		// Today and the 10 (30) days before it.
		if r, a := count("usage_records"), count("audit_log"); r != 11 || a != 31 {
			t.Errorf("with retention: %d records and %d audit entries left, want 11 and 31", r, a)
		}
		if db.PartitionedByDay() {
			for _, table := range []string{"usage_records", "executions", "ledger_charges", "audit_log"} {
				if n := count(table + "_default"); n != 0 {
					t.Errorf("%s_default holds %d rows, want none", table, n)
				}
				parts, err := db.Partitions(ctx, table)
				if err != nil {
					t.Fatal(err)
				}
				if len(parts) == 0 || !parts[len(parts)-1].Day.Equal(time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)) {
					t.Errorf("partitions of %s = %v, want them to reach 7 days ahead", table, parts)
				}
			}
		}
		for _, want := range []string{`msg="history removed: usage records" before=2026-06-05T00:00:00.000Z count=29`,
			`msg="history removed: audit entries" before=2026-05-16T00:00:00.000Z count=9`} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %s:\n%s", want, logs.String())
			}
		}
	})
}
