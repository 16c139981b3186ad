package sqldb

import (
	"context"
	"database/sql"
	"strings"
)

// Stmt is a statement prepared once and run many times in the DB's
// transactions (Tx.ExecStmt, Tx.QueryStmt): the database parses and plans it
// once instead of on every call, which matters for long statements on a hot
// path (SQLite parses a 64-row VALUES list on each call otherwise). It is
// safe for concurrent use, and is released when the DB closes.
type Stmt struct {
	s *sql.Stmt
}

// Prepare prepares query, written with ? placeholders, for the dialect of
// the DB. It takes a connection of its own: on a database limited to one
// connection, call it outside InTx.
func (db *DB) Prepare(ctx context.Context, query string) (*Stmt, error) {
	s, err := db.pool.PrepareContext(ctx, db.d.rebind(query))
	if err != nil {
		return nil, err
	}
	return &Stmt{s: s}, nil
}

// ExecStmt runs the statement, which returns no rows, in the transaction.
func (tx *Tx) ExecStmt(ctx context.Context, s *Stmt, args ...any) (sql.Result, error) {
	return tx.stx.StmtContext(ctx, s.s).ExecContext(ctx, args...)
}

// QueryStmt runs the statement, which returns rows, in the transaction; the
// caller closes the rows.
func (tx *Tx) QueryStmt(ctx context.Context, s *Stmt, args ...any) (*sql.Rows, error) {
	return tx.stx.StmtContext(ctx, s.s).QueryContext(ctx, args...)
}

// Placeholders is "(?, …), (?, …)": rows groups of cols parameters, for a
// multi-row INSERT (rebound for PostgreSQL like any other statement).
func Placeholders(rows, cols int) string {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	var b strings.Builder
	b.Grow(rows * (len(row) + 2))
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}
