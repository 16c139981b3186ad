// Package sqldbtest runs tests of the stores built on sqldb against both
// real dialects: an SQLite file in a temporary directory and a PostgreSQL
// schema of the test's own (see testenv.Postgres for when that is skipped).
//
// It is imported by tests only, and must not depend on any store package.
package sqldbtest

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// Each runs f as the subtests "sqlite" and "postgres". Each call of url
// names a new, empty database of that dialect, removed when its test ends.
func Each(t *testing.T, f func(t *testing.T, url func(t testing.TB) string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, sqliteURL) })
	t.Run("postgres", func(t *testing.T) { f(t, testenv.Postgres) })
}

func sqliteURL(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "sluice.db")
}

// Open opens url with sqldb.Open, failing the test on error, and closes the
// DB when the test ends.
func Open(t testing.TB, url string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("sqldb.Open(%q): %v", url, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close %s: %v", url, err)
		}
	})
	return db
}
