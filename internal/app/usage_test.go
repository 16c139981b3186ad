package app_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb"
)

type usageRecord = sluice.UsageRecord

// usage waits until the gateway's batch writer has stored at least n usage
// records and returns them, oldest first.
func (h *harness) usage(t *testing.T, n int) []usageRecord {
	t.Helper()
	db, err := sqldb.Open(t.Context(), "sqlite://"+h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := sqlledger.New(db)
	var recs []usageRecord
	eventually(t, 5*time.Second, "usage records written", func() bool {
		recs, err = store.ListUsage(t.Context(), time.Time{}, 0)
		return err == nil && len(recs) >= n
	})
	return recs
}
