package sqlstore_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/sqlstore"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

// TestEntitlementsContract runs the entitlements' contract suite on SQLite
// and PostgreSQL, each replica handle a connection pool of its own.
func TestEntitlementsContract(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		storetest.RunEntitlements(t, func(t *testing.T) func() store.Entitlements {
			u := url(t)
			return func() store.Entitlements { return sqlstore.NewEntitlements(sqldbtest.Open(t, u)) }
		})
	})
}
