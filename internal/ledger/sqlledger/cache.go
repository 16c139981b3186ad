package sqlledger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// cacheColumn is the column each dimension of a cache report groups by:
// executions e joined to their usage_records u.
var cacheColumn = map[ledger.Dimension]string{
	ledger.ByAccount: "e.account_id",
	ledger.ByAlias:   "u.alias",
	ledger.ByDay:     "u.started_at / 86400000000", // days since the Unix epoch
}

// CacheReport groups the executions of the selected records in the
// database, so one row per group comes back however many requests the
// range holds.
func (s *Store) CacheReport(ctx context.Context, f ledger.CacheFilter) ([]ledger.CacheRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	dims := slices.Compact(slices.Sorted(slices.Values(f.By)))
	var cols []string
	for _, d := range dims {
		cols = append(cols, cacheColumn[d])
	}
	// A request, and its placement, count on its first execution; tokens
	// on every measured one (see ledger.CacheRow).
	measured := func(col string) string {
		return `CAST(SUM(CASE WHEN e.measured THEN e.` + col + ` ELSE 0 END) AS BIGINT)`
	}
	const placed = `SUM(CASE WHEN e.seq = 0 AND u.affinity = ? THEN 1 ELSE 0 END)`
	sums := []string{`SUM(CASE WHEN e.seq = 0 THEN 1 ELSE 0 END)`,
		measured("prompt_tokens"), measured("cached_tokens"), measured("cache_write_tokens"), placed, placed, placed}
	args := []any{sluice.PlacementHit, sluice.PlacementNew, sluice.PlacementMoved}
	var where []string
	if !f.From.IsZero() {
		where, args = append(where, "u.started_at >= ?"), append(args, f.From.UnixMicro())
	}
	if !f.To.IsZero() {
		where, args = append(where, "u.started_at < ?"), append(args, f.To.UnixMicro())
	}
	query := `SELECT ` + strings.Join(append(slices.Clone(cols), sums...), ", ") +
		` FROM executions e JOIN usage_records u ON u.request_id = e.request_id`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	if len(cols) > 0 {
		query += ` GROUP BY ` + strings.Join(cols, ", ")
	}
	query += ` HAVING COUNT(*) > 0` // without groups, no executions is no row, not a row of zeros
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("cache report: %w", err)
	}
	defer rows.Close()
	var out []ledger.CacheRow
	for rows.Next() {
		var (
			r    ledger.CacheRow
			day  int64
			dest []any
		)
		for _, d := range dims {
			dest = append(dest, map[ledger.Dimension]any{ledger.ByAccount: &r.Account, ledger.ByAlias: &r.Alias, ledger.ByDay: &day}[d])
		}
		if err := rows.Scan(append(dest, &r.Requests, &r.PromptTokens, &r.CachedTokens, &r.CacheWriteTokens,
			&r.Hits, &r.New, &r.Moved)...); err != nil {
			return nil, fmt.Errorf("cache report: %w", err)
		}
		if slices.Contains(dims, ledger.ByDay) {
			r.Day = time.Unix(day*86400, 0).UTC()
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cache report: %w", err)
	}
	slices.SortFunc(out, ledger.CompareCacheRows) // in Go: the database's collation may order text otherwise
	return out, nil
}
