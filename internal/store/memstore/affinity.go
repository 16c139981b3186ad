package memstore

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

var _ store.Affinity = (*Store)(nil)

// MaxBindings bounds the affinity bindings a memory store keeps: past it,
// the least recently used binding is forgotten (a cache miss for a
// conversation idle the longest), so memory stays flat however many
// conversations come and go. About 100 bytes each.
const MaxBindings = 100_000

// bindings are the affinity bindings, most recently used first. The zero
// value is empty and ready.
type bindings struct {
	mu     sync.Mutex
	bySeed map[string]*list.Element // domain + "\x00" + seed → *binding in lru
	lru    list.List
}

type binding struct {
	key     string
	account string
	expires time.Time
}

// Touch implements store.Affinity.
func (s *Store) Touch(_ context.Context, domain, seed string, ttl time.Duration) (string, error) {
	b := &s.bindings
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	e := b.live(domain+"\x00"+seed, now)
	if e == nil {
		return "", nil
	}
	b.use(e, now.Add(ttl))
	return e.Value.(*binding).account, nil
}

// Bind implements store.Affinity.
func (s *Store) Bind(_ context.Context, domain, seed, from, to string, ttl time.Duration) (string, error) {
	b := &s.bindings
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	key := domain + "\x00" + seed
	e := b.live(key, now)
	switch {
	case e == nil:
		if b.bySeed == nil {
			b.bySeed = make(map[string]*list.Element)
		}
		e = b.lru.PushFront(&binding{key: key, account: to})
		b.bySeed[key] = e
		for b.lru.Len() > MaxBindings {
			b.remove(b.lru.Back())
		}
	case e != nil && e.Value.(*binding).account == from:
		e.Value.(*binding).account = to
	}
	b.use(e, now.Add(ttl))
	return e.Value.(*binding).account, nil
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
	v := e.Value.(*binding)
	return store.Binding{Account: v.account, TTL: v.expires.Sub(now)}, true, nil
}

// live returns the binding of key unless it lapsed (then it is dropped).
func (b *bindings) live(key string, now time.Time) *list.Element {
	e := b.bySeed[key]
	if e != nil && !now.Before(e.Value.(*binding).expires) {
		b.remove(e)
		return nil
	}
	return e
}

func (b *bindings) use(e *list.Element, expires time.Time) {
	e.Value.(*binding).expires = expires
	b.lru.MoveToFront(e)
}

func (b *bindings) remove(e *list.Element) {
	delete(b.bySeed, e.Value.(*binding).key)
	b.lru.Remove(e)
}
