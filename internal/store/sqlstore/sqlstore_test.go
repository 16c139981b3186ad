package sqlstore_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/sqlstore"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

// TestJobsContract runs the job bindings' contract suite on SQLite and
// PostgreSQL; every replica handle is a connection pool of its own on one
// database, as separate processes would have.
func TestJobsContract(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		storetest.RunJobs(t, func(t *testing.T) func() store.Jobs {
			u := url(t)
			return func() store.Jobs { return sqlstore.New(sqldbtest.Open(t, u)) }
		})
	})
}
