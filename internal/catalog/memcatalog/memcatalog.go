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

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
)

// Store implements catalog.Keys, catalog.Documents, catalog.Audit and catalog.Suspensions. The zero value is an
// empty store ready for use. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	keys    map[string]*sluice.Key // by ID
	hashes  map[string]string      // key hash → key ID
	doc     []byte                 // latest catalog document
	version int64                  // of doc; 0 = none saved
	audit   auditLog

	suspensions suspensions
}

var (
	_ catalog.Keys      = (*Store)(nil)
	_ catalog.Documents = (*Store)(nil)
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

// SaveCatalog stores a copy of doc as the next version if the current
// version is ifVersion (0 = no check); otherwise it returns ErrConflict.
func (s *Store) SaveCatalog(_ context.Context, doc []byte, ifVersion int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ifVersion != 0 && ifVersion != s.version {
		return 0, fmt.Errorf("save catalog: version is %d, not %d: %w", s.version, ifVersion, catalog.ErrConflict)
	}
	s.doc = slices.Clone(doc)
	s.version++
	return s.version, nil
}

// LoadCatalog returns a copy of the latest document and its version, or
// ErrNotFound when none was saved.
func (s *Store) LoadCatalog(context.Context) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version == 0 {
		return nil, 0, fmt.Errorf("catalog document: %w", catalog.ErrNotFound)
	}
	return slices.Clone(s.doc), s.version, nil
}
