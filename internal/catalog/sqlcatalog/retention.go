package sqlcatalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
)

// auditRetainLock is the PostgreSQL advisory lock key held by the
// transaction that removes audit entries: one replica at a time.
const auditRetainLock int64 = 0x736c75696365 + 17 // "sluice" + 17

// auditBatch is how many entries one transaction of RetainAudit deletes.
const auditBatch = 1000

// RetainAudit removes the audit entries made before cutoff, with their
// targets, and returns how many. On PostgreSQL the partitions of the days
// before cutoff's day are dropped whole; what else is older, and every
// entry on SQLite, is deleted auditBatch at a time. Another replica's
// RetainAudit meanwhile returns at once, having removed nothing.
func (s *Store) RetainAudit(ctx context.Context, cutoff time.Time) (removed int64, err error) {
	removed, err = s.db.DropDays(ctx, "audit_log", cutoff, auditRetainLock, func(tx *sqldb.Tx, p sqldb.Partition) (int64, error) {
		var n int64
		err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %q`, p.Name)).Scan(&n)
		return n, err
	})
	if err == nil && s.db.PartitionedByDay() {
		// The targets of the entries dropped: every ID below the lowest
		// left is gone (IDs are never reused).
		_, err = s.db.Exec(ctx, `DELETE FROM audit_targets
			WHERE entry_id < COALESCE((SELECT MIN(id) FROM audit_log), (SELECT id + 1 FROM audit_next))`)
	}
	if err == nil {
		batch := cmp.Or(s.auditBatch, auditBatch)
		var n int64
		n, err = s.db.InBatches(ctx, auditRetainLock, batch, func(tx *sqldb.Tx) (int, error) {
			ids, err := tx.Column(ctx, `SELECT id FROM audit_log WHERE at < ? ORDER BY at, id LIMIT ?`, cutoff.UnixMicro(), batch)
			if err != nil || len(ids) == 0 {
				return 0, err
			}
			in := sqldb.Placeholders(1, len(ids))
			if _, err := tx.Exec(ctx, `DELETE FROM audit_targets WHERE entry_id IN `+in, ids...); err != nil {
				return 0, err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM audit_log WHERE at < ? AND id IN `+in, append([]any{cutoff.UnixMicro()}, ids...)...); err != nil {
				return 0, err
			}
			return len(ids), nil
		}, nil)
		removed += n
	}
	if err != nil && !errors.Is(err, sqldb.ErrLocked) {
		return removed, fmt.Errorf("retain audit log: %w", err)
	}
	return removed, nil
}
