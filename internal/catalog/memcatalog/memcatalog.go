// Package memcatalog keeps virtual keys and catalog documents in memory, for
// tests and for a single process that needs no durability. It copies on
// every save and load, so callers never share state with the store.
//
// It must not depend on anything but package sluice and the catalog interfaces.
package memcatalog

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
)

// Store implements catalog.Keys, catalog.Documents, catalog.Replicas,
// catalog.Audit and catalog.Suspensions. The zero value is an empty store
// ready for use. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	keys     map[string]*sluice.Key // by ID
	hashes   map[string]string      // key hash → key ID
	versions []catalog.CatalogVersion
	replicas map[string]catalog.Replica // by ID
	audit    auditLog

	suspensions suspensions
}

var (
	_ catalog.Keys      = (*Store)(nil)
	_ catalog.Documents = (*Store)(nil)
	_ catalog.Replicas  = (*Store)(nil)
	_ catalog.Audit     = (*Store)(nil)
)

// SaveKey stores a copy of k, with its times in UTC, replacing the key with the same ID. It returns
// ErrConflict when another key has k.Hash.
func (s *Store) SaveKey(_ context.Context, k *sluice.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner, ok := s.hashes[k.Hash]; ok && owner != k.ID {
		return fmt.Errorf("save key %s: hash already used by another key: %w", k.ID, catalog.ErrConflict)
	}
	if s.keys == nil {
		s.keys = make(map[string]*sluice.Key)
		s.hashes = make(map[string]string)
	}
	if old, ok := s.keys[k.ID]; ok {
		delete(s.hashes, old.Hash)
	}
	c := k.Clone()
	c.ExpiresAt, c.CreatedAt, c.UpdatedAt = k.ExpiresAt.UTC(), k.CreatedAt.UTC(), k.UpdatedAt.UTC()
	s.keys[k.ID] = c
	s.hashes[k.Hash] = k.ID
	return nil
}

// LoadKey returns a copy of the key with the ID, or ErrNotFound.
func (s *Store) LoadKey(_ context.Context, id string) (*sluice.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok {
		return nil, fmt.Errorf("key %s: %w", id, catalog.ErrNotFound)
	}
	return k.Clone(), nil
}

// ListKeys returns copies of every key, ordered by CreatedAt then ID.
func (s *Store) ListKeys(context.Context) ([]*sluice.Key, error) {
	s.mu.Lock()
	keys := make([]*sluice.Key, 0, len(s.keys))
	for _, k := range s.keys {
		keys = append(keys, k.Clone())
	}
	s.mu.Unlock()
	slices.SortFunc(keys, func(a, b *sluice.Key) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return keys, nil
}

// ListKeysAfter returns copies of the limit keys after the key with the
// ID after, in ListKeys' order, and how many there are.
func (s *Store) ListKeysAfter(ctx context.Context, after string, limit int) ([]*sluice.Key, int, error) {
	keys, _ := s.ListKeys(ctx)
	from := 0
	if after != "" {
		i := slices.IndexFunc(keys, func(k *sluice.Key) bool { return k.ID == after })
		if i < 0 {
			return nil, 0, fmt.Errorf("key %s: %w", after, catalog.ErrNotFound)
		}
		from = i + 1
	}
	return keys[from:min(from+limit, len(keys))], len(keys), nil
}

// SaveCatalog stores a copy of next.Doc as the next version if the current
// version is ifVersion (0 = no check); otherwise it returns ErrConflict.
func (s *Store) SaveCatalog(_ context.Context, next catalog.CatalogVersion, ifVersion int64) (catalog.CatalogVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	current := int64(len(s.versions))
	if ifVersion != 0 && ifVersion != current {
		return catalog.CatalogVersion{}, fmt.Errorf("save catalog: version is %d, not %d: %w", current, ifVersion, catalog.ErrConflict)
	}
	var prev []byte
	if current > 0 {
		prev = s.versions[current-1].Doc
	}
	v := catalog.CatalogVersion{Version: current + 1, At: time.Now().UTC().Truncate(time.Microsecond), By: next.By,
		RollbackOf: next.RollbackOf, Bytes: len(next.Doc), Doc: slices.Clone(next.Doc)}
	var err error
	if v.Diff, v.LinesAdded, v.LinesRemoved, err = catalog.Diff(prev, v.Doc, current, v.Version); err != nil {
		return catalog.CatalogVersion{}, fmt.Errorf("save catalog: %w", err)
	}
	s.versions = append(s.versions, v)
	return withDoc(v), nil
}

// LoadCatalog returns a copy of the latest document and its version, or
// ErrNotFound when none was saved.
func (s *Store) LoadCatalog(context.Context) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.versions) == 0 {
		return nil, 0, fmt.Errorf("catalog document: %w", catalog.ErrNotFound)
	}
	v := s.versions[len(s.versions)-1]
	return slices.Clone(v.Doc), v.Version, nil
}

// LoadCatalogVersion returns a copy of the version, or ErrNotFound.
func (s *Store) LoadCatalogVersion(_ context.Context, version int64) (catalog.CatalogVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if version < 1 || version > int64(len(s.versions)) {
		return catalog.CatalogVersion{}, fmt.Errorf("catalog version %d: %w", version, catalog.ErrNotFound)
	}
	return withDoc(s.versions[version-1]), nil
}

// ListCatalogVersions returns up to limit versions (0 = all), newest first,
// without their documents and diffs.
func (s *Store) ListCatalogVersions(_ context.Context, limit int) ([]catalog.CatalogVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.versions)
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]catalog.CatalogVersion, 0, n)
	for i := len(s.versions) - 1; len(out) < n; i-- {
		v := s.versions[i]
		v.Doc, v.Diff = nil, ""
		out = append(out, v)
	}
	return out, nil
}

// LatestCatalogVersion returns the latest version's number, 0 when none was saved.
func (s *Store) LatestCatalogVersion(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.versions)), nil
}

// withDoc is v with a copy of its document, for a caller to keep.
func withDoc(v catalog.CatalogVersion) catalog.CatalogVersion {
	v.Doc = slices.Clone(v.Doc)
	return v
}

// BeatReplica stores r, with its times in UTC to the microsecond, in
// place of the row of r.ID.
func (s *Store) BeatReplica(_ context.Context, r catalog.Replica) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replicas == nil {
		s.replicas = make(map[string]catalog.Replica)
	}
	r.Since, r.LastErrorAt, r.SeenAt = micros(r.Since), micros(r.LastErrorAt), micros(r.SeenAt)
	s.replicas[r.ID] = r
	return nil
}

// ListReplicas returns the replicas seen at or after since, ordered by ID.
func (s *Store) ListReplicas(_ context.Context, since time.Time) ([]catalog.Replica, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.Replica
	for _, r := range s.replicas {
		if !r.SeenAt.Before(since) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b catalog.Replica) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// PruneReplicas deletes the replicas last seen before before.
func (s *Store) PruneReplicas(_ context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, r := range s.replicas {
		if r.SeenAt.Before(before) {
			delete(s.replicas, id)
			n++
		}
	}
	return n, nil
}

// micros is t in UTC to the microsecond, as the SQL store keeps times; the
// zero time stays zero.
func micros(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}
