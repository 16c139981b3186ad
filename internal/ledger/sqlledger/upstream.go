package sqlledger

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
)

// upstreamReport sums an account's executions started in a range (account,
// from, to: unix µs) by credential and status.
const upstreamReport = `SELECT credential_id, status, COUNT(*),
		CAST(SUM(CASE WHEN measured THEN prompt_tokens ELSE 0 END) AS BIGINT),
		CAST(SUM(CASE WHEN measured THEN cached_tokens ELSE 0 END) AS BIGINT),
		CAST(SUM(duration_us) AS BIGINT)
	FROM executions
	WHERE account_id = ? AND started_at >= ? AND started_at < ?
	GROUP BY credential_id, status`

// UpstreamReport groups the account's executions in the database, found
// by the index on (account_id, started_at): the rows read are those of
// the account in the range, and one row per credential and status comes
// back.
func (s *Store) UpstreamReport(ctx context.Context, f ledger.UpstreamFilter) ([]ledger.UpstreamRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.From.IsZero() {
		from = f.From.UnixMicro()
	}
	if !f.To.IsZero() {
		to = f.To.UnixMicro()
	}
	rows, err := s.db.Query(ctx, upstreamReport, f.Account, from, to)
	if err != nil {
		return nil, fmt.Errorf("upstream report: %w", err)
	}
	defer rows.Close()
	var out []ledger.UpstreamRow
	for rows.Next() {
		var (
			r  ledger.UpstreamRow
			us int64
		)
		if err := rows.Scan(&r.Credential, &r.Status, &r.Executions, &r.PromptTokens, &r.CachedTokens, &us); err != nil {
			return nil, fmt.Errorf("upstream report: %w", err)
		}
		r.Duration = time.Duration(us) * time.Microsecond
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("upstream report: %w", err)
	}
	slices.SortFunc(out, ledger.CompareUpstreamRows) // in Go: the database's collation may order text otherwise
	return out, nil
}
