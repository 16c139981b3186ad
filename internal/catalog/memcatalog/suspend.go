package memcatalog

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/internal/catalog"
)

var _ catalog.Suspensions = (*Store)(nil)

// suspensions are the Store's suspensions, by subject.
type suspensions struct {
	mu sync.Mutex
	by map[subject]catalog.Suspension
}

type subject struct {
	kind catalog.SuspensionKind
	id   string
}

// Suspend stores s, its time in UTC, replacing the subject's suspension.
func (s *Store) Suspend(_ context.Context, sp catalog.Suspension) error {
	ss := &s.suspensions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.by == nil {
		ss.by = map[subject]catalog.Suspension{}
	}
	sp.Since = sp.Since.UTC()
	ss.by[subject{sp.Kind, sp.ID}] = sp
	return nil
}

// Resume removes the subject's suspension and reports whether it had one.
func (s *Store) Resume(_ context.Context, kind catalog.SuspensionKind, id string) (bool, error) {
	ss := &s.suspensions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, ok := ss.by[subject{kind, id}]
	delete(ss.by, subject{kind, id})
	return ok, nil
}

// ListSuspensions returns every suspension, ordered by kind then ID.
func (s *Store) ListSuspensions(context.Context) ([]catalog.Suspension, error) {
	ss := &s.suspensions
	ss.mu.Lock()
	out := slices.Collect(maps.Values(ss.by))
	ss.mu.Unlock()
	slices.SortFunc(out, func(a, b catalog.Suspension) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}
