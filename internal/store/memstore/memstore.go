// Package memstore holds the hot shared state of package store in one
// process: claims (leases), the wait queues, cooldowns with a single probe,
// wake-ups and the statuses of credentials and accounts. It serves a
// gateway running as a single replica, and tests; replicas that share state
// use redisstore. It depends only on package store and the standard library.
//
// Concurrency: each capacity domain has its own mutex, held for the whole of
// one call, so every Acquire, Release, Renew and Cancel is atomic, as a Lua
// script is in redisstore. The table of domains is a sync.Map; the wake
// subscribers and the statuses have a mutex each, never held while a
// domain's is taken. Wake-ups decided under a domain's lock are sent after
// it is released, on buffered channels, without blocking. All times of the
// claims come from time.Now, or from Options.Now when a test sets it.
package memstore

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// Store is the in-memory state store. It is safe for concurrent use; every
// replica handle of one process is the same *Store, and Wake still routes a
// hint only to the subscribers of the replica it names.
type Store struct {
	domains  sync.Map // capacity domain ID → *domain; never deleted
	wake     hub
	statuses statuses
	bindings bindings // session affinity
	clock    func() time.Time
}

// Options configure a Store. The zero value is New's.
type Options struct {
	// Now, if set, is the clock of the claims (leases, queues, cooldowns,
	// windows, days) instead of time.Now: tests drive it to check those
	// rules without sleeping. Nothing in the catalog sets it.
	Now func() time.Time
}

var (
	_ store.Claims     = (*Store)(nil)
	_ store.Waker      = (*Store)(nil)
	_ store.Inspector  = (*Store)(nil)
	_ store.Statuses   = (*Store)(nil)
	_ store.InProcess  = (*Store)(nil)
	_ store.Reasserter = (*Store)(nil)
)

// New returns an empty store.
func New() *Store { return NewWith(Options{}) }

// NewWith returns an empty store configured by opts.
func NewWith(opts Options) *Store {
	return &Store{
		clock:    opts.Now,
		wake:     hub{subs: make(map[string]map[chan string]struct{})},
		statuses: statuses{byKind: make(map[string]map[string]store.Status)},
	}
}

// now reads the store's clock: one nil check on top of time.Now unless a
// test set Options.Now.
func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// InProcess marks the store as living in this process (store.InProcess).
func (*Store) InProcess() {}

// domain returns the state of capacity domain id, creating it if need be.
func (s *Store) domain(id string) *domain {
	if d, ok := s.domains.Load(id); ok {
		return d.(*domain)
	}
	d, _ := s.domains.LoadOrStore(id, newDomain())
	return d.(*domain)
}

// lookup returns the state of capacity domain id, or nil if it has none.
func (s *Store) lookup(id string) *domain {
	v, _ := s.domains.Load(id)
	d, _ := v.(*domain)
	return d
}

// Wake returns a channel of the tickets of replica that may now be granted.
// Every call subscribes a new channel; a hint goes to every channel of its
// replica, and is dropped for a channel whose buffer is full. The channel is
// closed when ctx ends.
func (s *Store) Wake(ctx context.Context, replica string) (<-chan string, error) {
	return s.wake.subscribe(ctx, replica), nil
}

// statuses holds the non-active statuses, by kind and ID.
type statuses struct {
	mu     sync.Mutex
	byKind map[string]map[string]store.Status
}

// SetStatus records the status of the credential or account id (kind
// "credential" or "account"); State active deletes the record.
func (s *Store) SetStatus(_ context.Context, kind, id string, st store.Status) error {
	s.statuses.mu.Lock()
	defer s.statuses.mu.Unlock()
	if st.State == sluice.UpstreamActive {
		delete(s.statuses.byKind[kind], id)
		return nil
	}
	m := s.statuses.byKind[kind]
	if m == nil {
		m = make(map[string]store.Status)
		s.statuses.byKind[kind] = m
	}
	m[id] = st
	return nil
}

// Statuses returns a copy of every non-active status of kind, by ID.
func (s *Store) Statuses(_ context.Context, kind string) (map[string]store.Status, error) {
	s.statuses.mu.Lock()
	defer s.statuses.mu.Unlock()
	out := maps.Clone(s.statuses.byKind[kind])
	if out == nil {
		out = make(map[string]store.Status)
	}
	return out, nil
}
