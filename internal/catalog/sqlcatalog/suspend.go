package sqlcatalog

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/catalog"
)

var _ catalog.Suspensions = (*Store)(nil)

// Suspend stores sp, replacing the subject's suspension.
func (s *Store) Suspend(ctx context.Context, sp catalog.Suspension) error {
	_, err := s.db.Exec(ctx, `INSERT INTO suspensions (kind, id, reason, since, by_token) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (kind, id) DO UPDATE SET reason = excluded.reason, since = excluded.since, by_token = excluded.by_token`,
		string(sp.Kind), sp.ID, sp.Reason, sp.Since.UnixMicro(), sp.By)
	if err != nil {
		return fmt.Errorf("suspend %s %s: %w", sp.Kind, sp.ID, err)
	}
	return nil
}

// Resume removes the subject's suspension and reports whether it had one.
func (s *Store) Resume(ctx context.Context, kind catalog.SuspensionKind, id string) (bool, error) {
	res, err := s.db.Exec(ctx, `DELETE FROM suspensions WHERE kind = ? AND id = ?`, string(kind), id)
	if err != nil {
		return false, fmt.Errorf("resume %s %s: %w", kind, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("resume %s %s: %w", kind, id, err)
	}
	return n > 0, nil
}

// ListSuspensions returns every suspension, ordered by kind then ID.
func (s *Store) ListSuspensions(ctx context.Context) ([]catalog.Suspension, error) {
	rows, err := s.db.Query(ctx, `SELECT kind, id, reason, since, by_token FROM suspensions ORDER BY kind, id`)
	if err != nil {
		return nil, fmt.Errorf("list suspensions: %w", err)
	}
	defer rows.Close()
	var out []catalog.Suspension
	for rows.Next() {
		var (
			sp    catalog.Suspension
			since int64
		)
		if err := rows.Scan(&sp.Kind, &sp.ID, &sp.Reason, &since, &sp.By); err != nil {
			return nil, fmt.Errorf("list suspensions: %w", err)
		}
		sp.Since = time.UnixMicro(since).UTC()
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list suspensions: %w", err)
	}
	return out, nil
}
