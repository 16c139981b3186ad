package sqlcatalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/sqldb"
)

var _ catalog.Audit = (*Store)(nil)

const auditColumns = `id, at, token_id, remote, method, path, action, targets, status, error, before_state, after_state`

// AppendAudit stores e and sets e.ID, the next number after the last one
// handed out (audit_next, locked until the entry commits: concurrent
// appends take their IDs one after the other).
func (s *Store) AppendAudit(ctx context.Context, e *catalog.AuditEntry) error {
	if err := s.insertAudit(ctx, e); err != nil {
		return fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return nil
}

func (s *Store) insertAudit(ctx context.Context, e *catalog.AuditEntry) error {
	targets := e.Targets
	if targets == nil {
		targets = []string{} // stored as [], not null
	}
	list, err := json.Marshal(targets)
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `UPDATE audit_next SET id = id + 1 RETURNING id`).Scan(&id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO audit_log (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, e.At.UnixMicro(), e.TokenID, e.Remote, e.Method, e.Path, e.Action, string(list), e.Status, e.Error,
			nullJSON(e.Before), nullJSON(e.After)); err != nil {
			return err
		}
		for _, t := range e.Targets {
			// A target named twice is one row: the primary key would refuse the second.
			if _, err := tx.Exec(ctx, `INSERT INTO audit_targets (entry_id, target) VALUES (?, ?) ON CONFLICT DO NOTHING`, id, t); err != nil {
				return err
			}
		}
		e.ID = id
		return nil
	})
}

// nullJSON stores absent JSON as NULL.
func nullJSON(b json.RawMessage) sql.Null[string] {
	return sql.Null[string]{V: string(b), Valid: b != nil}
}

// ListAudit returns the entries f selects, newest first.
func (s *Store) ListAudit(ctx context.Context, f catalog.AuditFilter) ([]catalog.AuditEntry, error) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, `at >= ?`), append(args, f.Since.UnixMicro())
	}
	if f.Action != "" {
		where, args = append(where, `action = ?`), append(args, f.Action)
	}
	if f.Target != "" {
		where, args = append(where, `id IN (SELECT entry_id FROM audit_targets WHERE target = ?)`), append(args, f.Target)
	}
	q := `SELECT ` + auditColumns + ` FROM audit_log`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	defer rows.Close()
	var out []catalog.AuditEntry
	for rows.Next() {
		var (
			e             catalog.AuditEntry
			at            int64
			targets       string
			before, after sql.Null[string]
		)
		if err := rows.Scan(&e.ID, &at, &e.TokenID, &e.Remote, &e.Method, &e.Path, &e.Action, &targets,
			&e.Status, &e.Error, &before, &after); err != nil {
			return nil, fmt.Errorf("list audit entries: %w", err)
		}
		if err := json.Unmarshal([]byte(targets), &e.Targets); err != nil {
			return nil, fmt.Errorf("audit entry %d targets: %w", e.ID, err)
		}
		if len(e.Targets) == 0 {
			e.Targets = nil
		}
		e.At = time.UnixMicro(at).UTC()
		if before.Valid {
			e.Before = json.RawMessage(before.V)
		}
		if after.Valid {
			e.After = json.RawMessage(after.V)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	return out, nil
}
