package sqlcatalog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

// TestRetainAudit writes three entries a day for four days, each naming
// a key, and removes those of the first two days: they and their targets
// go, the others stay; entries appended after take IDs above every one
// handed out before. On PostgreSQL the two days' partitions go whole;
// the entries were written before their partitions existed, which moves
// them in. On SQLite, two entries a transaction.
func TestRetainAudit(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ctx := t.Context()
		db := sqldbtest.Open(t, url(t))
		s := sqlcatalog.New(db)
		s.SetAuditBatch(2)
		first := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for d := range 4 {
			for i := range 3 {
				e := &catalog.AuditEntry{At: first.AddDate(0, 0, d).Add(time.Duration(i) * time.Hour), TokenID: "ops", Method: "POST",
					Path: "/admin/keys", Action: "key.create", Targets: []string{fmt.Sprintf("key-%d-%d", d, i), "shared"}, Status: 201}
				if err := s.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.AddPartitions(ctx, "audit_log", first, first.AddDate(0, 0, 3)); err != nil {
			t.Fatal(err)
		}
		cutoff := first.AddDate(0, 0, 2)
		removed, err := s.RetainAudit(ctx, cutoff)
		if err != nil || removed != 6 {
			t.Fatalf("RetainAudit = %d, %v; want 6, nil", removed, err)
		}
		left, err := s.ListAudit(ctx, catalog.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 6 || left[len(left)-1].At.Before(cutoff) || left[len(left)-1].ID != 7 {
			t.Errorf("ListAudit after retention = %d entries, oldest %+v; want the 6 from ID 7", len(left), left[len(left)-1])
		}
		for target, want := range map[string]int{"key-0-1": 0, "key-3-1": 1, "shared": 6} {
			got, err := s.ListAudit(ctx, catalog.AuditFilter{Target: target})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != want {
				t.Errorf("entries naming %s = %d, want %d", target, len(got), want)
			}
		}
		var targets int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM audit_targets`).Scan(&targets); err != nil {
			t.Fatal(err)
		}
		if targets != 12 {
			t.Errorf("audit_targets holds %d rows, want the 12 of the entries left", targets)
		}
		if db.PartitionedByDay() {
			parts, err := db.Partitions(ctx, "audit_log")
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != 2 || !parts[0].Day.Equal(cutoff) {
				t.Errorf("partitions of audit_log after retention = %v, want the 2 days from the cutoff", parts)
			}
		}
		if removed, err := s.RetainAudit(ctx, cutoff); err != nil || removed != 0 {
			t.Errorf("second RetainAudit = %d, %v; want 0, nil", removed, err)
		}
		e := &catalog.AuditEntry{At: first.AddDate(0, 0, 4), Action: "key.revoke", Status: 200}
		if err := s.AppendAudit(ctx, e); err != nil || e.ID != 13 {
			t.Errorf("AppendAudit after retention = ID %d, %v; want 13", e.ID, err)
		}
	})
}
