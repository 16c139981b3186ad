package sqlledger

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The synthetic year: 2025, recordsPerDay records a day.
var (
	yearStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	yearEnd   = yearStart.AddDate(1, 0, 0)
	// yearCutoff keeps 90 days of records, as database.retention.usage
	// 90d would on the year's last day.
	yearCutoff = yearEnd.AddDate(0, 0, -90)
)

const recordsPerDay = 1000

// yearOfUsage opens a PostgreSQL schema of its own with a partition per
// day of 2025 and fills it with recordsPerDay records a day, 20 keys of 5
// tenants and 5 billing accounts, nine in ten billed, one in fifty
// refused (see sqldbtest.Year), and a top-up.
func yearOfUsage(tb testing.TB) (*Store, *sqldb.DB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("a year of usage on PostgreSQL: not with -short")
	}
	ctx := tb.Context()
	db := sqldbtest.Open(tb, testenv.Postgres(tb))
	tb.Cleanup(func() { sqldbtest.DropPartitions(tb, db) })
	// The records have no executions: a partition of executions per
	// day would add 20 s of DDL to the test and nothing to what it shows.
	sqldbtest.LoadYear(tb, db, sqldbtest.Year{Start: yearStart, Days: 365, PerDay: recordsPerDay, Keys: 20, Tenants: 5, UnbilledEvery: 10})
	s := New(db)
	if _, err := s.Post(ctx, ledger.Entry{Account: "acct-1", RequestID: "inv-1", Kind: ledger.EntryTopUp, Amount: 50_000_000,
		Admin: "ops", At: yearStart.AddDate(0, 2, 0)}); err != nil {
		tb.Fatal(err)
	}
	return s, db
}

// monthlyReport is a tenant's spend in the month starting at month, by
// day and model.
func monthlyReport(month time.Time) ledger.SpendFilter {
	return ledger.SpendFilter{Tenant: "tenant-1", From: month, To: month.AddDate(0, 1, 0), By: []ledger.Dimension{ledger.ByDay, ledger.ByModel}}
}

// TestYearOfUsageOnPostgreSQL removes the records of all but the last 90
// days of a year: whole partitions go, the statement of a billing account
// and every month's report of a tenant read as before, and a month's
// report reads only the daily roll-ups (a month before the cutoff, rolled
// up as retention removed it) or the month's partitions and the roll-ups
// (a month after it); once the rest of the year is rolled up, reports read
// the same from the daily roll-ups alone.
func TestYearOfUsageOnPostgreSQL(t *testing.T) {
	s, db := yearOfUsage(t)
	ctx := t.Context()
	statement := func() []ledger.Entry {
		st, err := s.Statement(ctx, "acct-1", time.Time{}, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	reports := func() map[time.Month][]ledger.SpendRow {
		out := map[time.Month][]ledger.SpendRow{}
		for m := yearStart; m.Before(yearEnd); m = m.AddDate(0, 1, 0) {
			rows, err := s.Spend(ctx, monthlyReport(m))
			if err != nil {
				t.Fatal(err)
			}
			out[m.Month()] = rows
		}
		return out
	}
	wantStatement, wantReports := statement(), reports()
	if len(wantStatement) != 365*recordsPerDay/5+1 { // the records of one account (all billed), and the top-up
		t.Fatalf("statement of acct-1 has %d entries before retention", len(wantStatement))
	}
	partitions := func() int {
		parts, err := db.Partitions(ctx, "usage_records")
		if err != nil {
			t.Fatal(err)
		}
		return len(parts)
	}
	before := partitions()

	removed, err := s.Retain(ctx, yearCutoff)
	if err != nil {
		t.Fatal(err)
	}
	dropped := int(yearCutoff.Sub(yearStart).Hours() / 24)
	if after := partitions(); after != before-dropped {
		t.Errorf("partitions of usage_records: %d before retention, %d after; want %d days dropped", before, after, dropped)
	}
	if want := int64(dropped * recordsPerDay); removed != want {
		t.Errorf("Retain removed %d records, want %d", removed, want)
	}
	if diff := cmp.Diff(wantStatement, statement()); diff != "" {
		t.Errorf("statement of acct-1 changed by retention (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(wantReports, reports()); diff != "" {
		t.Errorf("monthly reports of tenant-1 changed by retention (-before +after):\n%s", diff)
	}

	checkPlans := func(t *testing.T, plans []monthPlan) {
		for _, tt := range plans {
			f := monthlyReport(tt.month)
			queries, err := s.spendQueries(ctx, f, f.By)
			if err != nil {
				t.Fatal(err)
			}
			var read []string
			for _, q := range queries {
				read = append(read, planRelations(t, db, q)...)
			}
			if len(read) == 0 || slices.ContainsFunc(read, func(r string) bool { return !tt.want(r) }) {
				t.Errorf("report of %s reads %q", tt.month.Format("2006-01"), read)
			}
		}
	}
	checkPlans(t, []monthPlan{
		// Rolled up before retention removed its records: read from its
		// daily roll-ups alone.
		{time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), func(r string) bool { return r == "usage_days" }},
		{time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC), func(r string) bool {
			return r == "usage_rollups" || strings.HasPrefix(r, "usage_records_202511")
		}},
	})

	// Once the rest of the year is rolled up, every month reads the same
	// from its daily roll-ups alone.
	if err := s.RollUp(ctx, yearEnd.AddDate(0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantReports, reports()); diff != "" {
		t.Errorf("monthly reports of tenant-1 changed by the roll-ups (-before +after):\n%s", diff)
	}
	checkPlans(t, []monthPlan{{time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC), func(r string) bool { return r == "usage_days" }}})
}

// monthPlan is what the plan of a month's report may read: want reports
// whether a relation is one.
type monthPlan struct {
	month time.Time
	want  func(relation string) bool
}

// relationInPlan finds the table or partition a plan node reads.
var relationInPlan = regexp.MustCompile(` on (\w+)`)

// planRelations are the relations PostgreSQL's plan of q reads.
func planRelations(t *testing.T, db *sqldb.DB, q query) []string {
	t.Helper()
	rows, err := db.Query(t.Context(), `EXPLAIN `+q.sql, q.args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		if m := relationInPlan.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkMonthlyReport times a tenant's monthly report by day and model
// over the synthetic year after retention: a month of roll-ups (March),
// and a month still held as records (November, 30,000 of them; 6,000 the
// tenant's).
func BenchmarkMonthlyReport(b *testing.B) {
	s, _ := yearOfUsage(b)
	if _, err := s.Retain(b.Context(), yearCutoff); err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct {
		name  string
		month time.Time
	}{{"rolled-up", time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}, {"held", time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)}} {
		b.Run(m.name, func(b *testing.B) {
			f := monthlyReport(m.month)
			for b.Loop() {
				rows, err := s.Spend(b.Context(), f)
				if err != nil || len(rows) == 0 {
					b.Fatalf("Spend = %d rows, %v", len(rows), err)
				}
			}
		})
	}
}
