// Package sqlledger stores usage records and their executions, and the
// billing ledger, in the SQL database opened by sqldb (SQLite or
// PostgreSQL, the same queries for both).
//
// It must not depend on anything but package sluice, package billing, the
// ledger interfaces and sqldb; it never touches the schema, which sqldb owns.
package sqlledger

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// Store implements ledger.Usage and ledger.Billing on a *sqldb.DB, which the caller owns and
// closes. Times and durations are kept to the microsecond; times come back
// in UTC. It is safe for concurrent use, also by several processes sharing
// one database.
type Store struct {
	db *sqldb.DB

	mu    sync.Mutex  // guards stmts while they are prepared, and versions' writes
	stmts *statements // nil until the first write prepares them
	// versions are the ids of the price and cost versions committed to
	// price_versions that this Store has met: the writer looks one up
	// there only the first time. Replaced whole, never changed.
	versions atomic.Pointer[map[string]int64]

	// For tests of Retain: records per transaction (0: retainBatch), and
	// what runs after each transaction commits.
	retainBatch int
	afterBatch  func()
}

var (
	_ ledger.Usage   = (*Store)(nil)
	_ ledger.Billing = (*Store)(nil)
)

// New returns a store on db.
func New(db *sqldb.DB) *Store { return &Store{db: db} }

const (
	usageColumns = `prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, total_tokens, measured, cache_write_tokens`
	// A record's columns before and after its price and cost versions,
	// which the table holds as ids in price_versions: written as ids, read
	// back joined to their versions.
	recordHead = `request_id, key_id, tenant, alias, protocol, stream, status, code, started_at, latency_us, ttft_us, ` + usageColumns +
		`, end_user, task_type, pool, priority, billed, billing_account, price_plan, `
	recordTail = `, price_micros, cost_micros, unmeasured, affinity, profile, cache_hit`
	// model is written, never read back: it is the last execution's, kept
	// on the record for reports by model.
	recordInsertColumns = recordHead + `price_version_id, cost_version_id` + recordTail + `, model`
	selectRecords       = `SELECT ` + recordHead + `COALESCE(pv.version, ''), COALESCE(cv.version, '')` + recordTail + ` FROM usage_records
		LEFT JOIN price_versions pv ON pv.id = price_version_id LEFT JOIN price_versions cv ON cv.id = cost_version_id`
	execColumns = `request_id, seq, edge_id, credential_id, account_id, endpoint_id, model, status, http_status, error, started_at, first_byte_us, duration_us, ` + usageColumns + `, expected, fallback, owner_tenant, owner_user`
)

// Parameters per row of each table: the columns above.
const (
	recordParams = 34
	execParams   = 24
)

// RecordUsage writes the records in one transaction, idempotently by
// RequestID: a record whose RequestID is already stored, or appeared earlier
// in recs, changes nothing, and neither do its executions. Rows go in
// multi-row statements (a few per batch, not one per row), prepared once per
// Store: the writer runs beside the request path, and per-row statements, or
// statements parsed again on every call, cost as much CPU as the requests
// themselves.
func (s *Store) RecordUsage(ctx context.Context, recs []sluice.UsageRecord) error {
	recs = firstOfEach(recs)
	if len(recs) == 0 {
		return nil
	}
	// Prepared before the transaction begins: preparing takes a connection,
	// and an in-memory database has only the one the transaction holds.
	st, err := s.statements(ctx)
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	var fresh map[string]int64 // versions this write added to price_versions, or found there
	err = s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		w := writer{tx: tx, st: st, args: make([]any, 0, rowsPerStatement*max(recordParams, execParams)), known: s.versions.Load()}
		defer func() { fresh = w.fresh }()
		inserted, err := w.insertRecords(ctx, recs)
		if err != nil {
			return err
		}
		if err := w.insertExecutions(ctx, recs, inserted); err != nil {
			return err
		}
		if err := w.insertJobs(ctx, recs, inserted); err != nil {
			return err
		}
		if err := w.addCharges(ctx, recs, inserted); err != nil {
			return err
		}
		return w.addLate(ctx, recs, inserted)
	})
	if sqldb.IsDataError(err) {
		return fmt.Errorf("record usage: %w: %w", ledger.ErrRecordRefused, err)
	}
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	s.learn(fresh) // only once committed: a rolled-back insert leaves no id
	return nil
}

// learn adds committed version ids to s.versions.
func (s *Store) learn(ids map[string]int64) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make(map[string]int64, len(ids))
	if known := s.versions.Load(); known != nil {
		maps.Copy(all, *known)
	}
	maps.Copy(all, ids)
	s.versions.Store(&all)
}

// Statements are prepared for shapes row counts, 1, 2, 4, … up to
// rowsPerStatement, which bounds the rows of one statement (32 parameters
// each at most, far below SQLite's limit of 32,766 a statement).
const (
	shapes           = 7
	rowsPerStatement = 1 << (shapes - 1)
)

// statements are the INSERTs of each table for 1<<i rows at index i. A batch
// of n rows is written as the binary digits of n (37 rows: 32 + 4 + 1), so a
// few prepared shapes serve every batch size, at most shapes statements
// per rowsPerStatement rows.
type statements struct {
	records    [shapes]*sqldb.Stmt
	executions [shapes]*sqldb.Stmt
	totals     [shapes]*sqldb.Stmt
}

// statements returns the prepared statements, preparing them on first use;
// a failed prepare is tried again by the next write.
func (s *Store) statements(ctx context.Context) (*statements, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stmts != nil {
		return s.stmts, nil
	}
	st := new(statements)
	for i := range shapes {
		var err error
		// RETURNING tells which records were new: only their executions are
		// written, so a record written twice never gains executions. The
		// conflict names no columns: the key is request_id on SQLite, and
		// (request_id, started_at) where PostgreSQL partitions the table
		// by day, which a record written again repeats (its start is fixed
		// when it is made).
		st.records[i], err = s.db.Prepare(ctx, `INSERT INTO usage_records (`+recordInsertColumns+`) VALUES `+
			sqldb.Placeholders(1<<i, recordParams)+` ON CONFLICT DO NOTHING RETURNING request_id`)
		if err != nil {
			return nil, err
		}
		st.executions[i], err = s.db.Prepare(ctx, `INSERT INTO executions (`+execColumns+`) VALUES `+sqldb.Placeholders(1<<i, execParams))
		if err != nil {
			return nil, err
		}
		st.totals[i], err = s.db.Prepare(ctx, addTotals(1<<i))
		if err != nil {
			return nil, err
		}
	}
	s.stmts = st
	return st, nil
}

// chunk is the rows the next statement writes of n left: the largest
// prepared shape that fits.
func chunk(n int) (rows, shape int) {
	shape = min(bits.Len(uint(n)), shapes) - 1
	return 1 << shape, shape
}

// writer writes one batch in its transaction, reusing one argument slice
// for all of its statements. Arguments are the driver's own types (string,
// int64, bool): database/sql converts anything else by reflection.
type writer struct {
	tx    *sqldb.Tx
	st    *statements
	args  []any
	boxes chargeBoxes
	known *map[string]int64 // the Store's versions when the write began (nil: none yet)
	fresh map[string]int64  // versions it met that known has not
	// The last price and cost versions looked up: records of a batch
	// mostly repeat their neighbours'.
	lastPrice, lastCost lastVersion
}

// lastVersion is a version and its id.
type lastVersion struct {
	version string
	id      int64
}

// versionID is the id of a price or cost version in price_versions, 0
// for none; a version met for the first time is added to the table. last
// is the column's last one.
func (w *writer) versionID(ctx context.Context, last *lastVersion, version string) (int64, error) {
	switch {
	case version == "":
		return 0, nil
	case version == last.version:
		return last.id, nil
	}
	id, ok := w.fresh[version]
	if !ok && w.known != nil {
		id, ok = (*w.known)[version]
	}
	if !ok {
		// Another writer (another replica) may add it meanwhile: the
		// conflict leaves its row, whose id the SELECT returns.
		if _, err := w.tx.Exec(ctx, `INSERT INTO price_versions (version) VALUES (?) ON CONFLICT (version) DO NOTHING`, version); err != nil {
			return 0, fmt.Errorf("price version %s: %w", version, err)
		}
		if err := w.tx.QueryRow(ctx, `SELECT id FROM price_versions WHERE version = ?`, version).Scan(&id); err != nil {
			return 0, fmt.Errorf("price version %s: %w", version, err)
		}
		if w.fresh == nil {
			w.fresh = make(map[string]int64)
		}
		w.fresh[version] = id
	}
	*last = lastVersion{version, id}
	return id, nil
}

// insertRecords inserts recs, which have distinct RequestIDs, and reports
// which of them were new (inserted[i] for recs[i]).
func (w *writer) insertRecords(ctx context.Context, recs []sluice.UsageRecord) ([]bool, error) {
	index := make(map[string]int, len(recs)) // RequestID → position in recs
	for i := range recs {
		index[recs[i].RequestID] = i
	}
	inserted := make([]bool, len(recs))
	for rest := recs; len(rest) > 0; {
		n, shape := chunk(len(rest))
		args := w.args[:0]
		for i := range rest[:n] {
			r := &rest[i]
			u := &r.Usage
			c := r.Billing
			if c == nil {
				c = &noCharge
			}
			priceVersion, err := w.versionID(ctx, &w.lastPrice, c.PriceVersion)
			if err != nil {
				return nil, err
			}
			costVersion, err := w.versionID(ctx, &w.lastCost, c.CostVersion)
			if err != nil {
				return nil, err
			}
			args = append(args, r.RequestID, r.KeyID, r.Tenant, r.Alias, string(r.Protocol), r.Stream, int64(r.Status), string(r.Code),
				r.Started.UnixMicro(), r.Latency.Microseconds(), r.TTFT.Microseconds(),
				u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens, u.TotalTokens, u.Measured, u.CacheWriteTokens,
				r.EndUser, r.TaskType, r.Pool, r.Priority, r.Billing != nil, w.boxes.account.of(c.Account), w.boxes.plan.of(c.Plan),
				priceVersion, costVersion,
				c.Price, c.Cost, c.Unmeasured, r.Affinity, r.Profile, r.CacheHit, ledger.ModelOf(r))
		}
		if err := w.returned(ctx, shape, args, index, inserted); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return inserted, nil
}

// returned runs a records statement and marks the IDs it returned.
func (w *writer) returned(ctx context.Context, shape int, args []any, index map[string]int, inserted []bool) error {
	rows, err := w.tx.QueryStmt(ctx, w.st.records[shape], args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var id sql.RawBytes // valid until the next row; looked up without a copy
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if i, ok := index[string(id)]; ok {
			inserted[i] = true
		}
	}
	return rows.Err()
}

// insertExecutions inserts the executions of the records that were new.
func (w *writer) insertExecutions(ctx context.Context, recs []sluice.UsageRecord, inserted []bool) error {
	type ref struct{ rec, seq int }
	var todo []ref
	for i := range recs {
		if !inserted[i] {
			continue // stored before, executions included
		}
		for seq := range recs[i].Executions {
			todo = append(todo, ref{i, seq})
		}
	}
	for len(todo) > 0 {
		n, shape := chunk(len(todo))
		args := w.args[:0]
		for _, t := range todo[:n] {
			r := &recs[t.rec]
			e := &r.Executions[t.seq]
			u := &e.Usage
			args = append(args, r.RequestID, int64(t.seq), e.EdgeID, e.CredentialID, e.AccountID, e.EndpointID, e.Model, string(e.Status),
				int64(e.HTTPStatus), e.Error, e.Started.UnixMicro(), e.FirstByte.Microseconds(), e.Duration.Microseconds(),
				u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens, u.TotalTokens, u.Measured, u.CacheWriteTokens,
				joinAccounts(e.Expected), e.Fallback, e.Owner.Tenant, e.Owner.User)
		}
		if _, err := w.tx.ExecStmt(ctx, w.st.executions[shape], args...); err != nil {
			return err
		}
		todo = todo[n:]
	}
	return nil
}

// firstOfEach drops records whose RequestID appeared earlier in recs.
func firstOfEach(recs []sluice.UsageRecord) []sluice.UsageRecord {
	seen := make(map[string]bool, len(recs))
	out := recs[:0:0]
	for _, r := range recs {
		if !seen[r.RequestID] {
			seen[r.RequestID] = true
			out = append(out, r)
		}
	}
	return out
}

// ListUsage returns the records f selects, oldest first (ties by
// RequestID), at most f.Limit of them, executions included in the order
// they ran.
func (s *Store) ListUsage(ctx context.Context, f ledger.UsageFilter) ([]sluice.UsageRecord, error) {
	recs, err := s.listRecords(ctx, f)
	if err != nil || len(recs) == 0 {
		return recs, err
	}
	if err := s.attachExecutions(ctx, recs); err != nil {
		return nil, err
	}
	if err := s.attachJobs(ctx, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// usageWhere is the WHERE clause (without the keyword) of the records f
// selects, and its arguments. Its time bounds come first, so the planner
// reads usage_records_started (and, on PostgreSQL, only the day
// partitions of the range); the rest filter what the range holds.
func usageWhere(f ledger.UsageFilter) (string, []any) {
	where, args := []string{"started_at >= ?"}, []any{f.Since.UnixMicro()}
	if f.Since.IsZero() {
		where, args = where[:0], args[:0]
	}
	if !f.Until.IsZero() {
		where, args = append(where, "started_at < ?"), append(args, f.Until.UnixMicro())
	}
	for _, c := range []struct{ column, value string }{
		{"tenant", f.Tenant}, {"key_id", f.KeyID}, {"alias", f.Alias}, {"model", f.Model},
		{"end_user", f.EndUser}, {"task_type", f.TaskType},
	} {
		if c.value != "" {
			where, args = append(where, c.column+" = ?"), append(args, c.value)
		}
	}
	switch f.Code {
	case "":
	case ledger.CodeOK:
		where = append(where, "code = ''")
	default:
		where, args = append(where, "code = ?"), append(args, f.Code)
	}
	if len(where) == 0 {
		return "TRUE", nil
	}
	return strings.Join(where, " AND "), args
}

func (s *Store) listRecords(ctx context.Context, f ledger.UsageFilter) ([]sluice.UsageRecord, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = math.MaxInt64 // one query for both dialects: neither needs LIMIT ALL / -1 then
	}
	where, args := usageWhere(f)
	rows, err := s.db.Query(ctx, selectRecords+`
		WHERE `+where+` ORDER BY started_at, request_id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	defer rows.Close()
	var recs []sluice.UsageRecord
	for rows.Next() {
		var (
			r                      sluice.UsageRecord
			started, latency, ttft int64
			billed                 bool
			c                      sluice.Charge
		)
		if err := rows.Scan(append(append([]any{&r.RequestID, &r.KeyID, &r.Tenant, &r.Alias, &r.Protocol, &r.Stream, &r.Status,
			&r.Code, &started, &latency, &ttft}, usageDest(&r.Usage)...),
			&r.EndUser, &r.TaskType, &r.Pool, &r.Priority, &billed, &c.Account, &c.Plan, &c.PriceVersion, &c.CostVersion,
			&c.Price, &c.Cost, &c.Unmeasured, &r.Affinity, &r.Profile, &r.CacheHit)...); err != nil {
			return nil, fmt.Errorf("list usage: %w", err)
		}
		if billed {
			r.Billing = &c
		}
		r.Started = time.UnixMicro(started).UTC()
		r.Latency = time.Duration(latency) * time.Microsecond
		r.TTFT = time.Duration(ttft) * time.Microsecond
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	return recs, nil
}

// attachExecutions loads the executions of recs, which are ordered by
// start, a chunk of records at a time. It names the records by ID: a
// filtered page may hold a few records of a long range, whose other
// executions it must not read. No execution starts before its record, so
// the first record's start bounds them, and on PostgreSQL skips the day
// partitions before it.
func (s *Store) attachExecutions(ctx context.Context, recs []sluice.UsageRecord) error {
	return byChunks(recs, func(chunk []sluice.UsageRecord, ids []any) error {
		return s.attachExecutionChunk(ctx, chunk, ids)
	})
}

// idsPerQuery bounds the request IDs one query names: far below the
// parameters a statement may hold on SQLite (32,766) and PostgreSQL (65,535).
const idsPerQuery = 1000

// byChunks calls load with recs a chunk of at most idsPerQuery at a time,
// and the chunk's request IDs.
func byChunks(recs []sluice.UsageRecord, load func(chunk []sluice.UsageRecord, ids []any) error) error {
	for len(recs) > 0 {
		chunk := recs[:min(len(recs), idsPerQuery)]
		ids := make([]any, len(chunk))
		for i := range chunk {
			ids[i] = chunk[i].RequestID
		}
		if err := load(chunk, ids); err != nil {
			return err
		}
		recs = recs[len(chunk):]
	}
	return nil
}

// idList is the placeholders of an IN list of n values.
func idList(n int) string { return "(" + strings.Repeat("?, ", n-1) + "?)" }

func (s *Store) attachExecutionChunk(ctx context.Context, recs []sluice.UsageRecord, ids []any) error {
	byID := make(map[string]*sluice.UsageRecord, len(recs))
	for i := range recs {
		byID[recs[i].RequestID] = &recs[i]
	}
	rows, err := s.db.Query(ctx, `SELECT `+execColumns+` FROM executions
		WHERE started_at >= ? AND request_id IN `+idList(len(ids))+` ORDER BY request_id, seq`,
		append([]any{recs[0].Started.UnixMicro()}, ids...)...)
	if err != nil {
		return fmt.Errorf("list executions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e                           sluice.Execution
			id, expected                string
			seq                         int
			started, firstByte, elapsed int64
		)
		if err := rows.Scan(append(append([]any{&id, &seq, &e.EdgeID, &e.CredentialID, &e.AccountID, &e.EndpointID, &e.Model,
			&e.Status, &e.HTTPStatus, &e.Error, &started, &firstByte, &elapsed}, usageDest(&e.Usage)...), &expected, &e.Fallback, &e.Owner.Tenant, &e.Owner.User)...); err != nil {
			return fmt.Errorf("list executions: %w", err)
		}
		e.Expected = splitAccounts(expected)
		r, ok := byID[id]
		if !ok {
			continue
		}
		e.Started = time.UnixMicro(started).UTC()
		e.FirstByte = time.Duration(firstByte) * time.Microsecond
		e.Duration = time.Duration(elapsed) * time.Microsecond
		r.Executions = append(r.Executions, e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list executions: %w", err)
	}
	return nil
}

// usageDest is where the values of usageColumns go, in order.
func usageDest(u *sluice.Usage) []any {
	return []any{&u.PromptTokens, &u.CompletionTokens, &u.CachedTokens, &u.ReasoningTokens, &u.TotalTokens, &u.Measured, &u.CacheWriteTokens}
}
