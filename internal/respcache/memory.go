package respcache

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Backend stores entries by key for a time to live. Get returns nil, nil
// for a key it does not hold (or holds expired).
type Backend interface {
	Get(ctx context.Context, key string) (*Entry, error)
	Put(ctx context.Context, key string, e *Entry, ttl time.Duration) error
}

// Memory is a replica's own Backend, bounded by entries and by bytes: the
// least recently used entries go first when either bound is reached, and
// an expired entry is dropped when it is met.
type Memory struct {
	maxEntries int
	maxBytes   int
	now        func() time.Time // for tests

	mu    sync.Mutex
	byKey map[string]*list.Element // of *memEntry
	lru   list.List                // front: most recently used
	bytes int
}

type memEntry struct {
	key     string
	e       *Entry
	expires time.Time
}

// NewMemory returns an empty Memory that holds at most maxEntries
// entries and maxBytes bytes of answers.
func NewMemory(maxEntries, maxBytes int) *Memory {
	return &Memory{maxEntries: maxEntries, maxBytes: maxBytes, now: time.Now, byKey: map[string]*list.Element{}}
}

func (m *Memory) Get(_ context.Context, key string) (*Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[key]
	if !ok {
		return nil, nil
	}
	me := el.Value.(*memEntry)
	if !m.now().Before(me.expires) {
		m.remove(el)
		return nil, nil
	}
	m.lru.MoveToFront(el)
	return me.e, nil
}

// Put stores e (which the caller no longer changes); an entry larger than
// the whole bound is not stored.
func (m *Memory) Put(_ context.Context, key string, e *Entry, ttl time.Duration) error {
	size := e.Size()
	if size > m.maxBytes {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byKey[key]; ok {
		m.remove(el)
	}
	m.byKey[key] = m.lru.PushFront(&memEntry{key: key, e: e, expires: m.now().Add(ttl)})
	m.bytes += size
	for m.lru.Len() > m.maxEntries || m.bytes > m.maxBytes {
		m.remove(m.lru.Back())
	}
	return nil
}

// Len returns the entries and bytes held (expired ones not yet met
// included).
func (m *Memory) Len() (entries, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len(), m.bytes
}

func (m *Memory) remove(el *list.Element) {
	me := m.lru.Remove(el).(*memEntry)
	delete(m.byKey, me.key)
	m.bytes -= me.e.Size()
}
