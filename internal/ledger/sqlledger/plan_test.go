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
	db := sqldbtest.Open(t, "sqlite://"+t.TempDir()+"/sluice.db")
	rows, err := db.Query(t.Context(), `EXPLAIN QUERY PLAN `+statementCharges, "acme", 0, 1, 10)
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
	if len(plan) == 0 || !strings.HasPrefix(plan[0], "SEARCH usage_records USING INDEX usage_records_charges (billing_account=? AND started_at>? AND started_at<?)") {
		t.Errorf("statement's plan = %q, want a search of usage_records_charges by account and time", plan)
	}
}
