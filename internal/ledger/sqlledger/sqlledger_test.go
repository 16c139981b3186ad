package sqlledger_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

func TestContract(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ledgertest.Run(t, func(t *testing.T) ledger.Usage {
			return sqlledger.New(sqldbtest.Open(t, url(t)))
		})
	})
}

// TestClosedDatabaseReturnsErrors checks that a store whose database has
// gone away fails each call instead of hanging or panicking.
func TestClosedDatabaseReturnsErrors(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		db, err := sqldb.Open(t.Context(), url(t))
		if err != nil {
			t.Fatal(err)
		}
		s := sqlledger.New(db)
		db.Close()
		if err := s.RecordUsage(t.Context(), []sluice.UsageRecord{{RequestID: "r"}}); err == nil {
			t.Error("RecordUsage = nil, want an error")
		}
		if _, err := s.ListUsage(t.Context(), time.Time{}, 0); err == nil {
			t.Error("ListUsage = nil error, want an error")
		}
	})
}
