package sqlcatalog

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/catalog"
)

// BeatReplica inserts or replaces the row of r.ID.
func (s *Store) BeatReplica(ctx context.Context, r catalog.Replica) error {
	_, err := s.db.Exec(ctx, `INSERT INTO catalog_replicas (id, source, version, since, last_error, last_error_at, seen_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET source = excluded.source, version = excluded.version, since = excluded.since,
			last_error = excluded.last_error, last_error_at = excluded.last_error_at, seen_at = excluded.seen_at`,
		r.ID, r.Source, r.Version, unixMicro(r.Since), r.LastError, unixMicro(r.LastErrorAt), unixMicro(r.SeenAt))
	if err != nil {
		return fmt.Errorf("replica heartbeat: %w", err)
	}
	return nil
}

// ListReplicas returns the replicas seen at or after since, ordered by ID.
func (s *Store) ListReplicas(ctx context.Context, since time.Time) ([]catalog.Replica, error) {
	rows, err := s.db.Query(ctx, `SELECT id, source, version, since, last_error, last_error_at, seen_at
		FROM catalog_replicas WHERE seen_at >= ? ORDER BY id`, since.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	defer rows.Close()
	var out []catalog.Replica
	for rows.Next() {
		var (
			r                     catalog.Replica
			from, errorAt, seenAt int64
		)
		if err := rows.Scan(&r.ID, &r.Source, &r.Version, &from, &r.LastError, &errorAt, &seenAt); err != nil {
			return nil, fmt.Errorf("list replicas: %w", err)
		}
		r.Since, r.LastErrorAt, r.SeenAt = fromMicro(from), fromMicro(errorAt), fromMicro(seenAt)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return out, nil
}

// PruneReplicas deletes the rows last seen before before.
func (s *Store) PruneReplicas(ctx context.Context, before time.Time) (int, error) {
	res, err := s.db.Exec(ctx, `DELETE FROM catalog_replicas WHERE seen_at < ?`, before.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("prune replicas: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune replicas: %w", err)
	}
	return int(n), nil
}

// unixMicro is t in microseconds since the epoch; the zero time is 0.
func unixMicro(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicro is unixMicro's inverse, in UTC.
func fromMicro(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
