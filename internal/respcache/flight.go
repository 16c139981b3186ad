package respcache

import (
	"context"
	"sync"
)

// Flights coalesces concurrent identical misses on one replica: the first
// becomes the leader and goes upstream, the others wait for its answer.
type Flights struct {
	mu     sync.Mutex
	flying map[string]*Flight
}

// Flight is one leader's call, which its followers wait for.
type Flight struct {
	done  chan struct{}
	entry *Entry // what the leader stored; nil when it failed or stored nothing
}

// Join makes the caller the leader of key's flight (lead true: it must call
// Land once it has its answer, or has none), or returns the flight it
// follows.
func (f *Flights) Join(key string) (fl *Flight, lead bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.flying[key]; ok {
		return fl, false
	}
	if f.flying == nil {
		f.flying = map[string]*Flight{}
	}
	fl = &Flight{done: make(chan struct{})}
	f.flying[key] = fl
	return fl, true
}

// Land ends the leader's flight of key with the entry its followers
// replay; nil releases them to go upstream themselves.
func (f *Flights) Land(key string, fl *Flight, e *Entry) {
	f.mu.Lock()
	delete(f.flying, key)
	f.mu.Unlock()
	fl.entry = e
	close(fl.done)
}

// Wait returns the leader's entry once it lands (nil when it has none), or
// ctx's error.
func (fl *Flight) Wait(ctx context.Context) (*Entry, error) {
	select {
	case <-fl.done:
		return fl.entry, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
