// Package sqldb opens the database that holds Sluice's durable records —
// an SQLite file on a single node, PostgreSQL in a cluster — and brings its
// schema up to date. Stores (sqlcatalog, sqlledger) write each query once,
// with ? placeholders; DB rewrites them for the dialect it is connected to.
//
// It owns the schema of every table, and must not depend on any Sluice
// package: it knows tables and columns, not keys or usage.
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DB is an open, migrated database. It is safe for concurrent use; the
// caller that opened it closes it.
type DB struct {
	runner
	pool *sql.DB
}

// Postgres reports whether db is PostgreSQL (else SQLite), for the few
// queries a store writes only for one of them.
func (db *DB) Postgres() bool { return db.d == &postgresDialect }

// Tx is a transaction begun by DB.InTx. Like DB, it takes queries with ?
// placeholders. It must not be used after the function it was passed to returns.
type Tx struct {
	runner
	stx *sql.Tx // for binding prepared statements (Stmt)
}

// Open connects to the database named by url, creating an SQLite file and
// its parent directories when they do not exist yet, and applies any pending
// migrations.
//
// Accepted forms:
//
//	sqlite://data/sluice.db         a file, relative to the working directory
//	sqlite:///var/lib/sluice.db     an absolute path
//	sqlite://:memory:               a private in-memory database (one connection)
//	sqlite://file::memory:?cache=shared   the same, as an SQLite URI
//	postgres://user@host:5432/db?sslmode=disable   (or postgresql://)
//
// An SQLite file runs in WAL mode with a busy timeout and foreign keys on.
// Query parameters of a postgres URL are passed to pgx (search_path=… selects
// the schema).
func Open(ctx context.Context, url string) (*DB, error) {
	return open(ctx, url, migrations[len(migrations)-1].version)
}

// open is Open with the migrations up to version applied.
func open(ctx context.Context, url string, version int64) (*DB, error) {
	d, dsn, dir, err := parse(url)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("database directory: %w", err)
		}
	}
	sdb, err := sql.Open(d.driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.name, err)
	}
	if d == &sqliteDialect && inMemory(dsn) {
		// Every connection to :memory: is a database of its own, and a shared
		// cache disappears with its last connection: keep exactly one (the
		// pool keeps idle connections open by default).
		sdb.SetMaxOpenConns(1)
	}
	db := &DB{runner: runner{q: sdb, d: d}, pool: sdb}
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("connect %s: %w", d.name, err)
	}
	if err := db.migrate(ctx, version); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("migrate %s: %w", d.name, err)
	}
	return db, nil
}

// parse picks the dialect of url and returns the driver's data source name
// and, for an SQLite file, the directory it goes in.
func parse(url string) (d *dialect, dsn, dir string, err error) {
	// Errors name the scheme, never the URL: it may hold a password.
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return nil, "", "", errors.New("database url: want sqlite://path or postgres://…")
	}
	switch scheme {
	case "postgres", "postgresql":
		return &postgresDialect, url, "", nil
	case "sqlite":
		path, query, _ := strings.Cut(rest, "?")
		if path == "" {
			return nil, "", "", errors.New("database url: sqlite:// without a file path")
		}
		if !inMemory(rest) {
			dir = filepath.Dir(strings.TrimPrefix(path, "file:"))
		}
		// _txlock=immediate takes the write lock at BEGIN, so a transaction
		// that reads then writes waits for busy_timeout instead of failing
		// when another writer got there first. temp_store(memory) keeps a
		// statement's journal in memory: on a file, SQLite spills it to a
		// new temporary file past 64 KiB, which the usage writer's
		// multi-row inserts did in most batches (an open, writes and a
		// close per batch, about 1 µs per request under load).
		params := "_busy_timeout=5000&_journal_mode=WAL&_foreign_keys=1&_txlock=immediate&_pragma=temp_store(memory)"
		if query != "" {
			params = query + "&" + params
		}
		return &sqliteDialect, path + "?" + params, dir, nil
	}
	return nil, "", "", fmt.Errorf("database url: unknown scheme %q (want sqlite or postgres)", scheme)
}

// File is the file of an SQLite database URL: "" for PostgreSQL, a
// database in memory, or a URL that is not valid.
func File(url string) string {
	d, dsn, _, err := parse(url)
	if err != nil || d != &sqliteDialect || inMemory(dsn) {
		return ""
	}
	path, _, _ := strings.Cut(dsn, "?")
	return strings.TrimPrefix(path, "file:")
}

// inMemory reports whether an SQLite name (with its query) is a memory database.
func inMemory(name string) bool {
	return strings.Contains(name, ":memory:") || strings.Contains(name, "mode=memory")
}

// Close closes every connection. Calls on a closed DB return an error.
func (db *DB) Close() error { return db.pool.Close() }

// InTx runs fn in a transaction and commits it if fn returns nil; otherwise,
// or if fn panics, it rolls back. On SQLite the transaction holds the write
// lock from its start, so read-then-write sequences are serialised.
func (db *DB) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	stx, err := db.pool.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer stx.Rollback() // a no-op after Commit; otherwise fn's error is the one to report
	if err := fn(&Tx{runner: runner{q: stx, d: db.d}, stx: stx}); err != nil {
		return err
	}
	return stx.Commit()
}

// IsUniqueViolation reports whether err is a primary key or unique
// constraint violation, in either dialect.
func IsUniqueViolation(err error) bool {
	if e, ok := errors.AsType[*sqlite.Error](err); ok {
		return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	if e, ok := errors.AsType[*pgconn.PgError](err); ok {
		return e.Code == "23505" // unique_violation
	}
	return false
}

// IsDataError reports whether err is the database refusing the values a
// statement carried, not failing to run it: a value out of range or text
// it cannot hold (PostgreSQL's data exceptions, SQLSTATE class 22), a
// constraint violated (class 23; SQLite's constraint errors), a value too
// large or of the wrong type (SQLite). The same values will be refused
// again; a connection lost, a timeout or a busy database is not this.
func IsDataError(err error) bool {
	if e, ok := errors.AsType[*sqlite.Error](err); ok {
		switch e.Code() & 0xff { // the primary code of an extended one
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
			return true
		}
		return false
	}
	if e, ok := errors.AsType[*pgconn.PgError](err); ok {
		return strings.HasPrefix(e.Code, "22") || strings.HasPrefix(e.Code, "23")
	}
	return false
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// runner runs queries written with ? placeholders in the dialect of d.
type runner struct {
	q querier
	d *dialect
}

// Exec runs a statement that returns no rows. query uses ? placeholders.
func (r runner) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.q.ExecContext(ctx, r.d.rebind(query), args...)
}

// Query runs a query that returns rows; the caller closes them.
func (r runner) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.q.QueryContext(ctx, r.d.rebind(query), args...)
}

// QueryRow runs a query expected to return at most one row; errors are
// reported by the row's Scan.
func (r runner) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return r.q.QueryRowContext(ctx, r.d.rebind(query), args...)
}

// dialect is what differs between SQLite and PostgreSQL, and nothing else.
type dialect struct {
	name    string
	driver  string
	dollars bool // placeholders are $1, $2, … instead of ?
	// lock serialises migrations between processes; it runs first in the
	// migration's transaction and is released when that ends. SQLite's
	// write lock (see _txlock) already does this.
	lock  string
	types *strings.Replacer // DDL type names that differ
}

var (
	sqliteDialect = dialect{
		name:   "sqlite",
		driver: "sqlite",
		types:  strings.NewReplacer("{{bytes}}", "BLOB", "{{ordered_text}}", "TEXT", "{{id}}", "INTEGER PRIMARY KEY"),
	}
	postgresDialect = dialect{
		name:    "postgres",
		driver:  "pgx",
		dollars: true,
		lock:    "SELECT pg_advisory_xact_lock(" + AdvisoryKey + ")",
		types:   strings.NewReplacer("{{bytes}}", "BYTEA", "{{ordered_text}}", `TEXT COLLATE "C"`, "{{id}}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
	}
)

// rebind rewrites ? placeholders for the dialect. A ? inside a quoted
// string literal or identifier is left alone.
func (d *dialect) rebind(query string) string {
	if !d.dollars || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Column runs a query of one column and returns its values as the driver
// reads them, to be passed back as arguments of another statement (the
// IDs of rows to delete).
func (r runner) Column(ctx context.Context, query string, args ...any) ([]any, error) {
	rows, err := r.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []any
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
