package sqldb_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// migrationCount is how many rows schema_migrations holds after Open.
func migrationCount(t *testing.T, db *sqldb.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatalf("count migrations: %v", err)
	}
	return n
}

func TestReopenIsNoOp(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		u := newURL(t)
		db := sqldbtest.Open(t, u)
		want := migrationCount(t, db)
		if want == 0 {
			t.Fatal("no migration recorded after Open")
		}
		if _, err := db.Exec(t.Context(), `INSERT INTO catalog_documents (version, doc, created_at) VALUES (?, ?, ?)`,
			1, []byte("kept"), 0); err != nil {
			t.Fatal(err)
		}
		again := sqldbtest.Open(t, u)
		if got := migrationCount(t, again); got != want {
			t.Errorf("migrations after re-open = %d, want %d", got, want)
		}
		var doc []byte
		if err := again.QueryRow(t.Context(), `SELECT doc FROM catalog_documents WHERE version = ?`, 1).Scan(&doc); err != nil || string(doc) != "kept" {
			t.Errorf("doc after re-open = %q, %v; want %q", doc, err, "kept")
		}
	})
}

func TestConcurrentOpenAppliesOnce(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		u := newURL(t)
		const n = 8
		dbs := make([]*sqldb.DB, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { dbs[i], errs[i] = sqldb.Open(t.Context(), u) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Errorf("Open #%d: %v", i, errs[i])
				continue
			}
			t.Cleanup(func() { dbs[i].Close() })
		}
		if t.Failed() {
			return
		}
		if got, want := migrationCount(t, dbs[0]), migrationCount(t, sqldbtest.Open(t, newURL(t))); got != want {
			t.Errorf("migrations after concurrent opens = %d, want %d", got, want)
		}
	})
}

func TestNewerSchemaIsRefused(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		u := newURL(t)
		db := sqldbtest.Open(t, u)
		if _, err := db.Exec(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			1_000_000, "from the future", 0); err != nil {
			t.Fatal(err)
		}
		if db2, err := sqldb.Open(t.Context(), u); err == nil {
			db2.Close()
			t.Error("Open of a database migrated by a newer build succeeded, want error")
		}
	})
}

func TestInTx(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		db := sqldbtest.Open(t, newURL(t))
		ctx := t.Context()
		insert := func(tx *sqldb.Tx, v int) error {
			_, err := tx.Exec(ctx, `INSERT INTO catalog_documents (version, doc, created_at) VALUES (?, ?, ?)`, v, []byte("d"), 0)
			return err
		}
		errBoom := errors.New("boom")
		if err := db.InTx(ctx, func(tx *sqldb.Tx) error { return errors.Join(insert(tx, 1), errBoom) }); !errors.Is(err, errBoom) {
			t.Errorf("InTx = %v, want the function's error", err)
		}
		func() {
			defer func() {
				if p := recover(); p != "panic" {
					t.Errorf("recovered %v, want the function's panic", p)
				}
			}()
			db.InTx(ctx, func(tx *sqldb.Tx) error {
				insert(tx, 2)
				panic("panic")
			})
		}()
		if err := db.InTx(ctx, func(tx *sqldb.Tx) error { return insert(tx, 3) }); err != nil {
			t.Fatalf("InTx = %v, want nil", err)
		}
		var got []int
		rows, err := db.Query(ctx, `SELECT version FROM catalog_documents ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if err := rows.Err(); err != nil || len(got) != 1 || got[0] != 3 {
			t.Errorf("committed versions = %v, %v; want [3] (the failed and panicked transactions rolled back)", got, err)
		}
	})
}

func TestIsUniqueViolation(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		db := sqldbtest.Open(t, newURL(t))
		const insert = `INSERT INTO catalog_documents (version, doc, created_at) VALUES (?, ?, ?)`
		if _, err := db.Exec(t.Context(), insert, 1, []byte("a"), 0); err != nil {
			t.Fatal(err)
		}
		_, err := db.Exec(t.Context(), insert, 1, []byte("b"), 0)
		if !sqldb.IsUniqueViolation(err) {
			t.Errorf("IsUniqueViolation(%v) = false, want true", err)
		}
		_, err = db.Exec(t.Context(), `INSERT INTO catalog_documents (version, created_at) VALUES (?, ?)`, 2, 0)
		if err == nil || sqldb.IsUniqueViolation(err) {
			t.Errorf("IsUniqueViolation(%v) = true, want false for a NOT NULL violation", err)
		}
	})
}

func TestClosedDBReturnsError(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		db, err := sqldb.Open(t.Context(), newURL(t))
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		if _, err := db.Exec(t.Context(), `SELECT 1`); err == nil {
			t.Error("Exec on a closed DB = nil error, want an error")
		}
		if err := db.InTx(t.Context(), func(*sqldb.Tx) error { return nil }); err == nil {
			t.Error("InTx on a closed DB = nil error, want an error")
		}
	})
}

// TestPostgresBackendTerminated kills the server side of every connection:
// the next call must come back (with an error or, retried on a new
// connection, without) instead of hanging, and the DB must recover.
func TestPostgresBackendTerminated(t *testing.T) {
	u := testenv.Postgres(t)
	db := sqldbtest.Open(t, u)
	ctx := t.Context()
	if _, err := db.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	admin := sqldbtest.Open(t, testenv.Postgres(t)) // a schema of its own; pg_stat_activity spans schemas
	var killed int
	if err := admin.QueryRow(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = ?`,
		parsed.Query().Get("application_name")).Scan(&killed); err != nil || killed == 0 {
		t.Fatalf("terminated %d backends, %v; want at least 1", killed, err)
	}

	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = db.Exec(callCtx, `SELECT 1`)
	if callCtx.Err() != nil {
		t.Fatalf("Exec after the backend was terminated hung until the deadline: %v", err)
	}
	t.Logf("first call after termination: %v", err)
	var one int
	if err := db.QueryRow(callCtx, `SELECT 1`).Scan(&one); err != nil {
		t.Errorf("second call after termination = %v, want the pool to reconnect", err)
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		give string
	}{
		{"CreatesParentDirectories", "sqlite://" + filepath.Join(dir, "a", "b", "sluice.db")},
		{"Memory", "sqlite://:memory:"},
		{"SharedMemory", "sqlite://file::memory:?cache=shared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := sqldbtest.Open(t, tt.give)
			// Two statements on a pool: a memory database must still be the same one.
			if _, err := db.Exec(t.Context(), `INSERT INTO catalog_documents (version, doc, created_at) VALUES (?, ?, ?)`, 1, []byte("d"), 0); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := db.QueryRow(t.Context(), `SELECT COUNT(*) FROM catalog_documents`).Scan(&n); err != nil || n != 1 {
				t.Errorf("documents = %d, %v; want 1", n, err)
			}
			// Statement journals in memory (see parse), on every connection.
			var store int
			if err := db.QueryRow(t.Context(), `PRAGMA temp_store`).Scan(&store); err != nil || store != 2 {
				t.Errorf("temp_store = %d, %v; want 2 (memory)", store, err)
			}
		})
	}
}

func TestOpenRejectsBadURL(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{"NoScheme", "data/sluice.db"},
		{"UnknownScheme", "mysql://localhost/sluice"},
		{"NoPath", "sqlite://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if db, err := sqldb.Open(t.Context(), tt.give); err == nil {
				db.Close()
				t.Errorf("Open(%q) = nil error, want an error", tt.give)
			}
		})
	}
}
