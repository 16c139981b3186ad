package memstore

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Entitlements holds end users' entitlements in this process: for a
// gateway without a database to share them through, and for tests. Safe
// for concurrent use.
type Entitlements struct {
	mu      sync.Mutex
	byUser  map[store.EndUser]store.Entitlement
	version int64
}

var _ store.Entitlements = (*Entitlements)(nil)

// PutEntitlements stores es, replacing each end user's (store.Entitlements).
func (s *Entitlements) PutEntitlements(_ context.Context, es []store.Entitlement, now time.Time) error {
	if len(es) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byUser == nil {
		s.byUser = make(map[store.EndUser]store.Entitlement, len(es))
	}
	for _, e := range es {
		e.ValidFrom, e.ValidUntil, e.UpdatedAt = kept(e.ValidFrom), kept(e.ValidUntil), kept(now)
		s.byUser[e.EndUser] = e
	}
	s.version++
	return nil
}

// kept is t as the SQL stores keep it: UTC, to the microsecond; zero stays zero.
func kept(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// DeleteEntitlements removes the users' entitlements (store.Entitlements).
func (s *Entitlements) DeleteEntitlements(_ context.Context, users []store.EndUser) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range users {
		if _, ok := s.byUser[u]; ok {
			delete(s.byUser, u)
			n++
		}
	}
	if n > 0 {
		s.version++
	}
	return n, nil
}

// ListEntitlements returns the entitlements f selects (store.Entitlements).
func (s *Entitlements) ListEntitlements(_ context.Context, f store.EntitlementFilter) ([]store.Entitlement, error) {
	s.mu.Lock()
	var out []store.Entitlement
	for _, e := range s.byUser {
		if f.Select(&e) {
			out = append(out, e)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Entitlement) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.User, b.User))
	})
	return out, nil
}

// EntitlementsVersion returns the version (store.Entitlements).
func (s *Entitlements) EntitlementsVersion(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version, nil
}
