package sqldb_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

// TestPreparedStatements checks a statement prepared once (with ?
// placeholders, rebound for the dialect) runs in several transactions, also
// on an in-memory SQLite database, whose only connection a transaction holds.
func TestPreparedStatements(t *testing.T) {
	run := func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		insert, err := db.Prepare(ctx, `INSERT INTO catalog_documents (version, doc, created_at) VALUES (?, ?, ?) RETURNING version`)
		if err != nil {
			t.Fatal(err)
		}
		count, err := db.Prepare(ctx, `UPDATE catalog_documents SET created_at = ? WHERE version >= ?`)
		if err != nil {
			t.Fatal(err)
		}
		for v := int64(1); v <= 3; v++ {
			err := db.InTx(ctx, func(tx *sqldb.Tx) error {
				rows, err := tx.QueryStmt(ctx, insert, v, []byte("d"), int64(0))
				if err != nil {
					return err
				}
				defer rows.Close()
				var got int64
				for rows.Next() {
					if err := rows.Scan(&got); err != nil {
						return err
					}
				}
				if got != v {
					t.Errorf("RETURNING version = %d, want %d", got, v)
				}
				return rows.Err()
			})
			if err != nil {
				t.Fatalf("transaction %d: %v", v, err)
			}
		}
		err = db.InTx(ctx, func(tx *sqldb.Tx) error {
			res, err := tx.ExecStmt(ctx, count, int64(7), int64(2))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 2 {
				t.Errorf("rows updated = %d, %v; want 2", n, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sqldbtest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		run(t, sqldbtest.Open(t, newURL(t)))
	})
	t.Run("sqlite in memory", func(t *testing.T) {
		run(t, sqldbtest.Open(t, "sqlite://:memory:"))
	})
}

func TestPlaceholders(t *testing.T) {
	for _, tt := range []struct {
		rows, cols int
		want       string
	}{
		{1, 1, "(?)"},
		{1, 3, "(?, ?, ?)"},
		{2, 2, "(?, ?), (?, ?)"},
	} {
		if got := sqldb.Placeholders(tt.rows, tt.cols); got != tt.want {
			t.Errorf("Placeholders(%d, %d) = %q, want %q", tt.rows, tt.cols, got, tt.want)
		}
	}
}
