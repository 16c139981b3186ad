package memstore

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

var _ store.Affinity = (*Store)(nil)

// MaxBindings bounds the affinity bindings a memory store keeps, besides
// each owner's bounds (store.MaxKeyBindings, store.MaxTenantBindings):
// past it, the least recently used binding of the tenant holding the most
// is forgotten (a cache miss for a conversation idle the longest), so
// memory stays flat however many conversations come and go, and tenants
// that keep few bindings keep them. About 100 bytes each.
const MaxBindings = 100_000

// bindings are the affinity bindings, each in three lists, most recently
// used first: all of them, its tenant's and its key's (per domain). The
// zero value is empty and ready.
type bindings struct {
	mu      sync.Mutex
	bySeed  map[string]*binding // domain + "\x00" + seed
	lru     list.List           // of *binding
	tenants map[string]*list.List
	keys    map[string]*list.List
}

type binding struct {
	key     string
	account string
	expires time.Time
	// where the binding sits in each list, and the IDs of its owner's
	// lists in bindings.tenants and bindings.keys
	all, inTenant, inKey *list.Element
	tenant, apiKey       string
}

// Touch implements store.Affinity.
func (s *Store) Touch(_ context.Context, domain string, _ store.SeedOwner, seed string, ttl time.Duration) (string, error) {
	b := &s.bindings
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	e := b.live(domain+"\x00"+seed, now)
	if e == nil {
		return "", nil
	}
	b.use(e, now.Add(ttl))
	return e.account, nil
}

// Bind implements store.Affinity.
func (s *Store) Bind(_ context.Context, domain string, owner store.SeedOwner, seed, from, to string, ttl time.Duration) (string, error) {
	b := &s.bindings
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	key := domain + "\x00" + seed
	e := b.live(key, now)
	switch {
	case e == nil:
		e = b.add(key, domain, owner, to, now)
	case e.account == from:
		e.account = to
	}
	b.use(e, now.Add(ttl))
	return e.account, nil
}

// Binding implements store.Affinity.
func (s *Store) Binding(_ context.Context, domain, seed string) (store.Binding, bool, error) {
	b := &s.bindings
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	e := b.live(domain+"\x00"+seed, now)
	if e == nil {
		return store.Binding{}, false, nil
	}
	return store.Binding{Account: e.account, TTL: e.expires.Sub(now)}, true, nil
}

// add binds a new seed (key) of owner in domain to account, and forgets
// the least recently used bindings that lapsed by now (so that a busy
// store does not keep every idle session until a bound pushes it out),
// then those past the bounds: the key's, the tenant's, then those of the
// tenant holding the most.
func (b *bindings) add(key, domain string, owner store.SeedOwner, account string, now time.Time) *binding {
	if b.bySeed == nil {
		b.bySeed, b.tenants, b.keys = make(map[string]*binding), make(map[string]*list.List), make(map[string]*list.List)
	}
	for old := b.lru.Back(); old != nil && !now.Before(old.Value.(*binding).expires); old = b.lru.Back() {
		b.remove(old.Value.(*binding))
	}
	e := &binding{key: key, account: account, tenant: domain + "\x00" + owner.Tenant, apiKey: domain + "\x00" + owner.Key}
	e.all = b.lru.PushFront(e)
	e.inTenant = ownList(b.tenants, e.tenant).PushFront(e)
	e.inKey = ownList(b.keys, e.apiKey).PushFront(e)
	b.bySeed[key] = e
	for l := b.keys[e.apiKey]; l.Len() > store.MaxKeyBindings; {
		b.remove(l.Back().Value.(*binding))
	}
	for l := b.tenants[e.tenant]; l.Len() > store.MaxTenantBindings; {
		b.remove(l.Back().Value.(*binding))
	}
	for b.lru.Len() > MaxBindings {
		var most *list.List
		for _, l := range b.tenants {
			if most == nil || l.Len() > most.Len() {
				most = l
			}
		}
		b.remove(most.Back().Value.(*binding))
	}
	return e
}

// ownList returns the list of id in lists, made when there is none.
func ownList(lists map[string]*list.List, id string) *list.List {
	l := lists[id]
	if l == nil {
		l = list.New()
		lists[id] = l
	}
	return l
}

// live returns the binding of key unless it lapsed (then it is dropped).
func (b *bindings) live(key string, now time.Time) *binding {
	e := b.bySeed[key]
	if e != nil && !now.Before(e.expires) {
		b.remove(e)
		return nil
	}
	return e
}

func (b *bindings) use(e *binding, expires time.Time) {
	e.expires = expires
	b.lru.MoveToFront(e.all)
	b.tenants[e.tenant].MoveToFront(e.inTenant)
	b.keys[e.apiKey].MoveToFront(e.inKey)
}

func (b *bindings) remove(e *binding) {
	delete(b.bySeed, e.key)
	b.lru.Remove(e.all)
	for _, owner := range []struct {
		lists map[string]*list.List
		id    string
		at    *list.Element
	}{{b.tenants, e.tenant, e.inTenant}, {b.keys, e.apiKey, e.inKey}} {
		l := owner.lists[owner.id]
		if l.Remove(owner.at); l.Len() == 0 {
			delete(owner.lists, owner.id)
		}
	}
}
