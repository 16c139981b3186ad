// Package sqlledger stores usage records and their executions in the SQL
// database opened by sqldb (SQLite or PostgreSQL, the same queries for both).
//
// It must not depend on anything but package sluice, the ledger interfaces
// and sqldb; it never touches the schema, which sqldb owns.
package sqlledger

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// Store implements ledger.Usage on a *sqldb.DB, which the caller owns and
// closes. Times and durations are kept to the microsecond; times come back
// in UTC. It is safe for concurrent use, also by several processes sharing
// one database.
type Store struct {
	db *sqldb.DB
}

var _ ledger.Usage = (*Store)(nil)

// New returns a store on db.
func New(db *sqldb.DB) *Store { return &Store{db: db} }

const (
	usageColumns  = `prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, total_tokens, measured`
	recordColumns = `request_id, key_id, tenant, alias, protocol, stream, status, code, started_at, latency_us, ttft_us, ` + usageColumns
	execColumns   = `request_id, seq, edge_id, credential_id, account_id, endpoint_id, model, status, http_status, error, started_at, first_byte_us, duration_us, ` + usageColumns
)

// RecordUsage writes the records in one transaction, idempotently by
// RequestID: a record whose RequestID is already stored, or appeared earlier
// in recs, changes nothing, and neither do its executions. Rows go in
// multi-row statements (a few per batch, not one per row): the writer runs
// beside the request path, and per-row statements cost as much CPU as the
// requests themselves.
func (s *Store) RecordUsage(ctx context.Context, recs []sluice.UsageRecord) error {
	recs = firstOfEach(recs)
	if len(recs) == 0 {
		return nil
	}
	err := s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		for start := 0; start < len(recs); start += rowsPerStatement {
			batch := recs[start:min(start+rowsPerStatement, len(recs))]
			inserted, err := insertRecords(ctx, tx, batch)
			if err != nil {
				return err
			}
			if err := insertExecutions(ctx, tx, batch, inserted); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}

// rowsPerStatement bounds the records (17 parameters each) per statement.
const rowsPerStatement = 64

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

// insertRecords inserts recs and returns the IDs that were new.
func insertRecords(ctx context.Context, tx *sqldb.Tx, recs []sluice.UsageRecord) (map[string]bool, error) {
	args := make([]any, 0, len(recs)*17)
	for i := range recs {
		r := &recs[i]
		args = append(args, r.RequestID, r.KeyID, r.Tenant, r.Alias, string(r.Protocol), r.Stream, r.Status, string(r.Code),
			r.Started.UnixMicro(), r.Latency.Microseconds(), r.TTFT.Microseconds())
		args = append(args, usageArgs(r.Usage)...)
	}
	rows, err := tx.Query(ctx, `INSERT INTO usage_records (`+recordColumns+`) VALUES `+
		placeholders(len(recs), 17)+` ON CONFLICT (request_id) DO NOTHING RETURNING request_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	inserted := make(map[string]bool, len(recs))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		inserted[id] = true
	}
	return inserted, rows.Err()
}

// insertExecutions inserts the executions of the records that were new,
// at most executionsPerStatement rows per statement.
func insertExecutions(ctx context.Context, tx *sqldb.Tx, recs []sluice.UsageRecord, inserted map[string]bool) error {
	var args []any
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO executions (`+execColumns+`) VALUES `+placeholders(n, 19), args...)
		args, n = args[:0], 0
		return err
	}
	for i := range recs {
		r := &recs[i]
		if !inserted[r.RequestID] {
			continue // stored before, executions included
		}
		for seq, e := range r.Executions {
			args = append(args, r.RequestID, seq, e.EdgeID, e.CredentialID, e.AccountID, e.EndpointID, e.Model, string(e.Status),
				e.HTTPStatus, e.Error, e.Started.UnixMicro(), e.FirstByte.Microseconds(), e.Duration.Microseconds())
			args = append(args, usageArgs(e.Usage)...)
			if n++; n == executionsPerStatement {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// executionsPerStatement keeps 19 parameters a row under SQLite's limit of
// 32,766 parameters a statement.
const executionsPerStatement = 1000

// placeholders is "(?, …), (?, …)": rows groups of cols parameters.
func placeholders(rows, cols int) string {
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

// ListUsage returns records started at or after since, oldest first (ties
// by RequestID), at most limit of them (limit <= 0 means no limit),
// executions included in the order they ran.
func (s *Store) ListUsage(ctx context.Context, since time.Time, limit int) ([]sluice.UsageRecord, error) {
	recs, err := s.listRecords(ctx, since, limit)
	if err != nil || len(recs) == 0 {
		return recs, err
	}
	if err := s.attachExecutions(ctx, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

func (s *Store) listRecords(ctx context.Context, since time.Time, limit int) ([]sluice.UsageRecord, error) {
	if limit <= 0 {
		limit = math.MaxInt64 // one query for both dialects: neither needs LIMIT ALL / -1 then
	}
	rows, err := s.db.Query(ctx, `SELECT `+recordColumns+` FROM usage_records
		WHERE started_at >= ? ORDER BY started_at, request_id LIMIT ?`, since.UnixMicro(), limit)
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	defer rows.Close()
	var recs []sluice.UsageRecord
	for rows.Next() {
		var (
			r                      sluice.UsageRecord
			started, latency, ttft int64
		)
		if err := rows.Scan(append([]any{&r.RequestID, &r.KeyID, &r.Tenant, &r.Alias, &r.Protocol, &r.Stream, &r.Status,
			&r.Code, &started, &latency, &ttft}, usageDest(&r.Usage)...)...); err != nil {
			return nil, fmt.Errorf("list usage: %w", err)
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

// attachExecutions loads the executions of recs, which are ordered by start.
// It selects by the records' start range rather than by a second LIMIT:
// a record committed between the two queries could shift a LIMIT's window,
// but only adds rows to a range, and those are ignored. Every record in
// recs was committed with its executions, so all of them are seen.
func (s *Store) attachExecutions(ctx context.Context, recs []sluice.UsageRecord) error {
	byID := make(map[string]*sluice.UsageRecord, len(recs))
	for i := range recs {
		byID[recs[i].RequestID] = &recs[i]
	}
	rows, err := s.db.Query(ctx, `SELECT `+execColumns+` FROM executions
		WHERE request_id IN (SELECT request_id FROM usage_records WHERE started_at >= ? AND started_at <= ?)
		ORDER BY request_id, seq`,
		recs[0].Started.UnixMicro(), recs[len(recs)-1].Started.UnixMicro())
	if err != nil {
		return fmt.Errorf("list executions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e                           sluice.Execution
			id                          string
			seq                         int
			started, firstByte, elapsed int64
		)
		if err := rows.Scan(append([]any{&id, &seq, &e.EdgeID, &e.CredentialID, &e.AccountID, &e.EndpointID, &e.Model,
			&e.Status, &e.HTTPStatus, &e.Error, &started, &firstByte, &elapsed}, usageDest(&e.Usage)...)...); err != nil {
			return fmt.Errorf("list executions: %w", err)
		}
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

// usageArgs and usageDest are the values of usageColumns, in order.
func usageArgs(u sluice.Usage) []any {
	return []any{u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens, u.TotalTokens, u.Measured}
}

func usageDest(u *sluice.Usage) []any {
	return []any{&u.PromptTokens, &u.CompletionTokens, &u.CachedTokens, &u.ReasoningTokens, &u.TotalTokens, &u.Measured}
}
