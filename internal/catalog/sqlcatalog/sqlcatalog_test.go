package sqlcatalog_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog/catalogtest"
	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

func TestContract(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		catalogtest.Run(t, func(t *testing.T) catalogtest.Store {
			return sqlcatalog.New(sqldbtest.Open(t, url(t)))
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
		s := sqlcatalog.New(db)
		db.Close()
		ctx := t.Context()
		if err := s.SaveKey(ctx, &sluice.Key{ID: "k", Hash: "h"}); err == nil {
			t.Error("SaveKey = nil, want an error")
		}
		if _, err := s.LoadKey(ctx, "k"); err == nil {
			t.Error("LoadKey = nil error, want an error")
		}
		if _, err := s.ListKeys(ctx); err == nil {
			t.Error("ListKeys = nil error, want an error")
		}
		if _, err := s.SaveCatalog(ctx, []byte("doc"), 0); err == nil {
			t.Error("SaveCatalog = nil error, want an error")
		}
		if _, _, err := s.LoadCatalog(ctx); err == nil {
			t.Error("LoadCatalog = nil error, want an error")
		}
	})
}
