// Package sqlcatalog stores virtual keys and catalog documents in the SQL
// database opened by sqldb (SQLite or PostgreSQL, the same queries for both).
//
// It must not depend on anything but package sluice, the catalog interfaces
// and sqldb; it never touches the schema, which sqldb owns.
package sqlcatalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// Store implements catalog.Keys, catalog.Documents and catalog.Replicas
// (and catalog.Audit, see audit.go) on a *sqldb.DB, which
// the caller owns and closes. Times are kept to the microsecond and come
// back in UTC. It is safe for concurrent use, also by several processes
// sharing one database.
type Store struct {
	db *sqldb.DB
	// auditBatch is RetainAudit's entries per transaction (0:
	// auditBatch), set by tests.
	auditBatch int
}

var (
	_ catalog.Keys      = (*Store)(nil)
	_ catalog.Documents = (*Store)(nil)
	_ catalog.Replicas  = (*Store)(nil)
)

// New returns a store on db.
func New(db *sqldb.DB) *Store { return &Store{db: db} }

const keyColumns = `id, name, tenant, hash, prefix, status, models, priority, expires_at, created_at, updated_at, static, labels, settings`

// settings is the settings column: the key's settings (sluice.KeySettings)
// in their JSON form, except for what rows have always held as integers —
// the policy's wait in microseconds (wait_us) and the budgets in
// micro-units — and for the labels, which have a column of their own. The
// names stay stable: rows written by an older build decode with the fields
// they lack left zero, and an older build reads these rows.
type settings struct {
	sluice.KeySettings
	Policy  policy  `json:"policy,omitzero"` // in place of KeySettings.Policy
	Budgets budgets `json:"budgets,omitzero"`
}

// policy is a route policy with its wait in microseconds.
type policy struct {
	sluice.RoutePolicy       // its Wait is left zero, so not written
	WaitUS             int64 `json:"wait_us,omitempty"`
}

type budgets struct {
	Day   int64 `json:"day_micros,omitempty"`
	Month int64 `json:"month_micros,omitempty"`
}

func settingsOf(k *sluice.Key) settings {
	st := settings{KeySettings: k.KeySettings, Budgets: budgets(k.Budgets)}
	st.Labels = nil
	st.Policy = policy{RoutePolicy: k.Policy, WaitUS: k.Policy.Wait.D().Microseconds()}
	st.Policy.Wait = 0
	return st
}

// apply sets the settings of k to st's; k's labels, read from their own
// column, stay.
func (st *settings) apply(k *sluice.Key) {
	labels := k.Labels
	k.KeySettings = st.KeySettings
	k.Labels = labels
	k.Policy = st.Policy.RoutePolicy
	k.Policy.Wait = sluice.Duration(time.Duration(st.Policy.WaitUS) * time.Microsecond)
	k.Budgets = sluice.Budgets(st.Budgets)
}

// SaveKey inserts or replaces the key with k.ID. It returns ErrConflict when
// another key already has k.Hash.
func (s *Store) SaveKey(ctx context.Context, k *sluice.Key) error {
	err := s.upsertKey(ctx, k)
	if sqldb.IsUniqueViolation(err) {
		// Either another key has the hash, or (on PostgreSQL) a concurrent
		// first save of the same ID committed first and tripped the hash
		// index before the ID conflict was seen. Once it has committed, a
		// retry updates that row; only a real duplicate fails twice.
		err = s.upsertKey(ctx, k)
	}
	if sqldb.IsUniqueViolation(err) {
		return fmt.Errorf("save key %s: hash already used by another key: %w", k.ID, catalog.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("save key %s: %w", k.ID, err)
	}
	return nil
}

func (s *Store) upsertKey(ctx context.Context, k *sluice.Key) error {
	aliases := k.Models
	if aliases == nil {
		aliases = []string{} // stored as [], not null
	}
	models, err := json.Marshal(aliases)
	if err != nil {
		return err
	}
	labels, err := json.Marshal(k.Labels) // nil is stored as null, read back as none
	if err != nil {
		return err
	}
	set, err := json.Marshal(settingsOf(k))
	if err != nil {
		return err
	}
	var expires sql.Null[int64]
	if !k.ExpiresAt.IsZero() {
		expires = sql.Null[int64]{V: k.ExpiresAt.UnixMicro(), Valid: true}
	}
	_, err = s.db.Exec(ctx, `INSERT INTO keys (`+keyColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			name = excluded.name, tenant = excluded.tenant, hash = excluded.hash,
			prefix = excluded.prefix, status = excluded.status, models = excluded.models,
			priority = excluded.priority, expires_at = excluded.expires_at,
			created_at = excluded.created_at, updated_at = excluded.updated_at,
			static = excluded.static, labels = excluded.labels, settings = excluded.settings`,
		k.ID, k.Name, k.Tenant, k.Hash, k.Prefix, string(k.Status), string(models), k.Priority,
		expires, k.CreatedAt.UnixMicro(), k.UpdatedAt.UnixMicro(), k.Static, string(labels), string(set))
	return err
}

// LoadKey returns the key with the ID, or ErrNotFound.
func (s *Store) LoadKey(ctx context.Context, id string) (*sluice.Key, error) {
	k, err := scanKey(s.db.QueryRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("key %s: %w", id, catalog.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load key %s: %w", id, err)
	}
	return k, nil
}

// ListKeys returns every stored key, ordered by CreatedAt then ID.
func (s *Store) ListKeys(ctx context.Context) ([]*sluice.Key, error) {
	return s.queryKeys(ctx, `SELECT `+keyColumns+` FROM keys ORDER BY created_at, id`)
}

// queryKeys runs query, which selects keyColumns, and reads its keys.
func (s *Store) queryKeys(ctx context.Context, query string, args ...any) ([]*sluice.Key, error) {
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var keys []*sluice.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return keys, nil
}

// ListKeysAfter reads one page of keys from the index keys_created,
// (created_at, id): the keys after the one named, whose place in that
// order its start and ID give.
func (s *Store) ListKeysAfter(ctx context.Context, after string, limit int) ([]*sluice.Key, int, error) {
	var total int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM keys`).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list keys: %w", err)
	}
	query, args := `SELECT `+keyColumns+` FROM keys ORDER BY created_at, id LIMIT ?`, []any{limit}
	if after != "" {
		var created int64
		err := s.db.QueryRow(ctx, `SELECT created_at FROM keys WHERE id = ?`, after).Scan(&created)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, fmt.Errorf("key %s: %w", after, catalog.ErrNotFound)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("list keys: %w", err)
		}
		query, args = `SELECT `+keyColumns+` FROM keys WHERE (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`,
			[]any{created, after, limit}
	}
	keys, err := s.queryKeys(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	return keys, total, nil
}

// scanKey reads the keyColumns of one row.
func scanKey(row interface{ Scan(dest ...any) error }) (*sluice.Key, error) {
	var (
		k                sluice.Key
		models, labels   string
		set              string
		st               settings
		expires          sql.Null[int64]
		created, updated int64
	)
	if err := row.Scan(&k.ID, &k.Name, &k.Tenant, &k.Hash, &k.Prefix, &k.Status, &models, &k.Priority,
		&expires, &created, &updated, &k.Static, &labels, &set); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(models), &k.Models); err != nil {
		return nil, fmt.Errorf("key %s models: %w", k.ID, err)
	}
	if err := json.Unmarshal([]byte(labels), &k.Labels); err != nil {
		return nil, fmt.Errorf("key %s labels: %w", k.ID, err)
	}
	if len(k.Labels) == 0 {
		k.Labels = nil
	}
	if err := json.Unmarshal([]byte(set), &st); err != nil {
		return nil, fmt.Errorf("key %s settings: %w", k.ID, err)
	}
	st.apply(&k)
	if len(k.Models) == 0 {
		k.Models = nil
	}
	if expires.Valid {
		k.ExpiresAt = time.UnixMicro(expires.V).UTC()
	}
	k.CreatedAt = time.UnixMicro(created).UTC()
	k.UpdatedAt = time.UnixMicro(updated).UTC()
	return &k, nil
}

// SaveCatalog stores next.Doc as the next version if the current version
// is ifVersion (0 = no check); otherwise it returns ErrConflict.
func (s *Store) SaveCatalog(ctx context.Context, next catalog.CatalogVersion, ifVersion int64) (catalog.CatalogVersion, error) {
	for {
		v, err := s.insertCatalog(ctx, next, ifVersion)
		if ifVersion == 0 && sqldb.IsUniqueViolation(err) {
			// A concurrent save (PostgreSQL) took the version this one read;
			// it has committed, so the retry reads a newer one.
			continue
		}
		if sqldb.IsUniqueViolation(err) {
			err = catalog.ErrConflict // a concurrent save with the same ifVersion won
		}
		if err != nil {
			return catalog.CatalogVersion{}, fmt.Errorf("save catalog: %w", err)
		}
		return v, nil
	}
}

// insertCatalog reads the latest version and inserts the next one, with
// its diff from the latest, in one transaction.
func (s *Store) insertCatalog(ctx context.Context, next catalog.CatalogVersion, ifVersion int64) (catalog.CatalogVersion, error) {
	v := catalog.CatalogVersion{By: next.By, RollbackOf: next.RollbackOf, Bytes: len(next.Doc), Doc: next.Doc}
	err := s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		var (
			current int64
			prev    []byte
		)
		err := tx.QueryRow(ctx, `SELECT version, doc FROM catalog_documents ORDER BY version DESC LIMIT 1`).Scan(&current, &prev)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if ifVersion != 0 && ifVersion != current {
			return fmt.Errorf("version is %d, not %d: %w", current, ifVersion, catalog.ErrConflict)
		}
		v.Version = current + 1
		if v.Diff, v.LinesAdded, v.LinesRemoved, err = catalog.Diff(prev, next.Doc, current, v.Version); err != nil {
			return err
		}
		v.At = time.Now().UTC().Truncate(time.Microsecond)
		_, err = tx.Exec(ctx, `INSERT INTO catalog_documents
			(version, doc, created_at, saved_by, rollback_of, size, lines_added, lines_removed, diff)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			v.Version, next.Doc, v.At.UnixMicro(), v.By, v.RollbackOf, v.Bytes, v.LinesAdded, v.LinesRemoved, []byte(v.Diff))
		return err
	})
	return v, err
}

// LoadCatalog returns the latest document, or ErrNotFound when none was saved.
func (s *Store) LoadCatalog(ctx context.Context) ([]byte, int64, error) {
	var (
		doc     []byte
		version int64
	)
	err := s.db.QueryRow(ctx, `SELECT doc, version FROM catalog_documents ORDER BY version DESC LIMIT 1`).Scan(&doc, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("catalog document: %w", catalog.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load catalog: %w", err)
	}
	return doc, version, nil
}

// versionColumns are a catalog version's columns but its document and diff.
const versionColumns = `version, created_at, saved_by, rollback_of, size, lines_added, lines_removed`

// scanVersion reads versionColumns, then into the further destinations.
func scanVersion(row interface{ Scan(dest ...any) error }, more ...any) (catalog.CatalogVersion, error) {
	var (
		v  catalog.CatalogVersion
		at int64
	)
	err := row.Scan(append([]any{&v.Version, &at, &v.By, &v.RollbackOf, &v.Bytes, &v.LinesAdded, &v.LinesRemoved}, more...)...)
	v.At = time.UnixMicro(at).UTC()
	return v, err
}

// LoadCatalogVersion returns the version with its document and diff, or ErrNotFound.
func (s *Store) LoadCatalogVersion(ctx context.Context, version int64) (catalog.CatalogVersion, error) {
	var doc, diff []byte
	v, err := scanVersion(s.db.QueryRow(ctx, `SELECT `+versionColumns+`, doc, diff FROM catalog_documents WHERE version = ?`, version), &doc, &diff)
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.CatalogVersion{}, fmt.Errorf("catalog version %d: %w", version, catalog.ErrNotFound)
	}
	if err != nil {
		return catalog.CatalogVersion{}, fmt.Errorf("load catalog version %d: %w", version, err)
	}
	v.Doc, v.Diff = doc, string(diff)
	return v, nil
}

// ListCatalogVersions returns up to limit versions (0 = all), newest first,
// without their documents and diffs.
func (s *Store) ListCatalogVersions(ctx context.Context, limit int) ([]catalog.CatalogVersion, error) {
	q, args := `SELECT `+versionColumns+` FROM catalog_documents ORDER BY version DESC`, []any{}
	if limit > 0 {
		q, args = q+` LIMIT ?`, append(args, limit)
	}
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list catalog versions: %w", err)
	}
	defer rows.Close()
	var out []catalog.CatalogVersion
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("list catalog versions: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list catalog versions: %w", err)
	}
	return out, nil
}

// LatestCatalogVersion returns the latest version's number, 0 when none was
// saved: one lookup in the primary key's index.
func (s *Store) LatestCatalogVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.db.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM catalog_documents`).Scan(&v); err != nil {
		return 0, fmt.Errorf("latest catalog version: %w", err)
	}
	return v, nil
}
