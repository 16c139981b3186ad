package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/store"
)

// Entitlements implements store.Entitlements on a *sqldb.DB, which the
// caller owns: the entitlements table, and the version row every write
// raises in its transaction. Safe for concurrent use, also by several
// processes sharing one database.
type Entitlements struct{ db *sqldb.DB }

var _ store.Entitlements = (*Entitlements)(nil)

// NewEntitlements returns the entitlements in db.
func NewEntitlements(db *sqldb.DB) *Entitlements { return &Entitlements{db: db} }

// micros is t in microseconds since the epoch; 0 for the zero time.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicros is micros' inverse, in UTC.
func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// putChunk is the most rows one INSERT of PutEntitlements writes (7
// parameters each, well within both dialects' limits).
const putChunk = 200

// bumpVersion raises the version in the write's own transaction, so that
// a replica that sees the new version also sees the write.
const bumpVersion = `UPDATE entitlements_version SET version = version + 1 WHERE id = 1`

// PutEntitlements stores es, replacing each end user's (store.Entitlements).
func (s *Entitlements) PutEntitlements(ctx context.Context, es []store.Entitlement, now time.Time) error {
	if len(es) == 0 {
		return nil
	}
	// One row per user, the last of es winning (one INSERT may not
	// update a row twice), in statements of up to putChunk rows: a bulk
	// change of hundreds is a few round trips, not hundreds.
	last := make(map[store.EndUser]int, len(es))
	for i, e := range es {
		last[e.EndUser] = i
	}
	args := make([]any, 0, min(len(last), putChunk)*7)
	err := s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		rows := 0
		flush := func() error {
			if rows == 0 {
				return nil
			}
			q := `INSERT INTO entitlements (tenant, end_user, profile, pool, valid_from, valid_until, updated_at) VALUES ` +
				sqldb.Placeholders(rows, 7) +
				` ON CONFLICT (tenant, end_user) DO UPDATE SET profile = excluded.profile, pool = excluded.pool,
					valid_from = excluded.valid_from, valid_until = excluded.valid_until, updated_at = excluded.updated_at`
			_, err := tx.Exec(ctx, q, args...)
			args, rows = args[:0], 0
			return err
		}
		for i, e := range es {
			if last[e.EndUser] != i {
				continue
			}
			args = append(args, e.Tenant, e.User, e.Profile, e.Pool, micros(e.ValidFrom), micros(e.ValidUntil), now.UnixMicro())
			if rows++; rows == putChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, bumpVersion)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlstore: put entitlements: %w", err)
	}
	return nil
}

// DeleteEntitlements removes the users' entitlements (store.Entitlements).
func (s *Entitlements) DeleteEntitlements(ctx context.Context, users []store.EndUser) (int, error) {
	n := 0
	err := s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		n = 0 // a retried transaction counts again
		for _, u := range users {
			res, err := tx.Exec(ctx, `DELETE FROM entitlements WHERE tenant = ? AND end_user = ?`, u.Tenant, u.User)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(k)
		}
		if n == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, bumpVersion)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete entitlements: %w", err)
	}
	return n, nil
}

// ListEntitlements returns the entitlements f selects (store.Entitlements).
func (s *Entitlements) ListEntitlements(ctx context.Context, f store.EntitlementFilter) ([]store.Entitlement, error) {
	var where []string
	var args []any
	for _, c := range []struct{ column, value string }{{"tenant", f.Tenant}, {"end_user", f.User}, {"profile", f.Profile}} {
		if c.value != "" {
			where = append(where, c.column+" = ?")
			args = append(args, c.value)
		}
	}
	q := `SELECT tenant, end_user, profile, pool, valid_from, valid_until, updated_at FROM entitlements`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	rows, err := s.db.Query(ctx, q+` ORDER BY tenant, end_user`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list entitlements: %w", err)
	}
	defer rows.Close()
	var out []store.Entitlement
	for rows.Next() {
		var e store.Entitlement
		var from, until, updated int64
		if err := rows.Scan(&e.Tenant, &e.User, &e.Profile, &e.Pool, &from, &until, &updated); err != nil {
			return nil, fmt.Errorf("sqlstore: list entitlements: %w", err)
		}
		e.ValidFrom, e.ValidUntil, e.UpdatedAt = fromMicros(from), fromMicros(until), fromMicros(updated)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: list entitlements: %w", err)
	}
	return out, nil
}

// EntitlementsVersion returns the version (store.Entitlements).
func (s *Entitlements) EntitlementsVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.db.QueryRow(ctx, `SELECT version FROM entitlements_version WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlstore: entitlements version: %w", err)
	}
	return v, nil
}
