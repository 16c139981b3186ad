package sqlledger

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

// TestStatementReadsTheChargesIndex checks that SQLite plans a statement's
// charges as a search of usage_records_charges: the index is partial, and
// a query uses it only while its condition repeats the index's (isCharge
// and the migration's WHERE are written apart), so a drift between them
// would turn every statement into a scan without failing anything else.
func TestStatementReadsTheChargesIndex(t *testing.T) {
	plan := sqlitePlan(t, statementCharges, "acme", 0, 1, 10)
	if len(plan) == 0 || !strings.HasPrefix(plan[0], "SEARCH usage_records USING INDEX usage_records_charges (billing_account=? AND started_at>? AND started_at<?)") {
		t.Errorf("statement's plan = %q, want a search of usage_records_charges by account and time", plan)
	}
}

// TestUpstreamReportReadsTheAccountIndex checks that SQLite plans an
// upstream report as a search of executions_account_started: the
// executions of one account in the range, not every one ever written.
func TestUpstreamReportReadsTheAccountIndex(t *testing.T) {
	plan := sqlitePlan(t, upstreamReport, "org-a", 0, 1)
	if len(plan) == 0 || !strings.HasPrefix(plan[0], "SEARCH executions USING INDEX executions_account_started (account_id=? AND started_at>? AND started_at<?)") {
		t.Errorf("upstream report's plan = %q, want a search of executions_account_started by account and time", plan)
	}
}

// sqlitePlan is SQLite's query plan of query with args, on a new database:
// the detail of each step.
func sqlitePlan(t *testing.T, query string, args ...any) []string {
	t.Helper()
	db := sqldbtest.Open(t, "sqlite://"+t.TempDir()+"/sluice.db")
	rows, err := db.Query(t.Context(), `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
