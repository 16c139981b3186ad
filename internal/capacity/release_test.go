package capacity

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memstore"
)

// sharedStore is a store that is not in this process: its Release fails as
// unreachable while down is set, and waits while stalled is (a frozen
// server), until the call's context ends or the stall is lifted.
type sharedStore struct {
	s       *memstore.Store
	down    atomic.Bool
	stalled chan struct{} // closed to lift the stall; nil: no stall
}

func (f *sharedStore) Acquire(ctx context.Context, a store.Acquire) (store.Grant, error) {
	return f.s.Acquire(ctx, a)
}

func (f *sharedStore) Release(ctx context.Context, domain, lease string, out store.Outcome) error {
	if f.stalled != nil {
		select {
		case <-f.stalled:
		case <-ctx.Done():
			return store.ErrUnavailable
		}
	}
	if f.down.Load() {
		return store.ErrUnavailable
	}
	return f.s.Release(ctx, domain, lease, out)
}

func (f *sharedStore) Renew(ctx context.Context, domain string, leases []string, ttl time.Duration) error {
	return f.s.Renew(ctx, domain, leases, ttl)
}

func (f *sharedStore) Cancel(ctx context.Context, domain, queue, ticket string) error {
	return f.s.Cancel(ctx, domain, queue, ticket)
}

func (f *sharedStore) ProbeSucceeded(ctx context.Context, domain, lease string) error {
	return f.s.ProbeSucceeded(ctx, domain, lease)
}

func inFlight(t *testing.T, s *memstore.Store, id string) int {
	t.Helper()
	us, err := s.Units(t.Context(), "d", []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return us[0].InFlight
}

// eventually polls cond until it holds, failing the test after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, limit)
		}
	}
}

// TestReleaseNeverWaitsForAStalledStore: with the store frozen, Release
// returns at once; the slot comes back when the store does, and Flush
// waits for it.
func TestReleaseNeverWaitsForAStalledStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sharedStore{s: memstore.New(), stalled: make(chan struct{})}
		e := New(s, s.s, "r", time.Minute, quiet)
		c, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		returned := make(chan struct{})
		go func() {
			c.Release(t.Context(), store.Outcome{Success: true})
			close(returned)
		}()
		select {
		case <-returned:
		case <-time.After(releaseTimeout / 2):
			t.Fatal("Release waited for a stalled store")
		}
		if n := inFlight(t, s.s, "a"); n != 1 {
			t.Fatalf("in flight while the store is frozen = %d, want 1", n)
		}
		close(s.stalled)
		if err := e.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := inFlight(t, s.s, "a"); n != 0 {
			t.Errorf("in flight after the store came back = %d, want 0", n)
		}
	})
}

// TestReleaseIsRetriedUntilTheStoreIsBack: a release the store refused is
// tried again in the background, so the slot returns soon after the store
// does, not when the lease expires (here a minute).
func TestReleaseIsRetriedUntilTheStoreIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sharedStore{s: memstore.New()}
		e := New(s, s.s, "r", time.Minute, quiet)
		c, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		s.down.Store(true)
		c.Release(t.Context(), store.Outcome{Success: true})
		c.WaitReleased()
		if n := inFlight(t, s.s, "a"); n != 1 {
			t.Fatalf("in flight while the store is down = %d, want 1", n)
		}
		s.down.Store(false)
		eventually(t, 4*retryMax, "slot back after the store", func() bool { return inFlight(t, s.s, "a") == 0 })
		if err := e.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFlushGivesUp: Flush waits no longer than its context for a store
// that stays down, and stops the retries.
func TestFlushGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sharedStore{s: memstore.New()}
		e := New(s, s.s, "r", time.Minute, quiet)
		c, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		s.down.Store(true)
		c.Release(t.Context(), store.Outcome{})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := e.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush with a store that stays down = %v, want the deadline", err)
		}
	})
}

func (f *sharedStore) Reassert(ctx context.Context, domain string, held []store.Held) error {
	return f.s.Reassert(ctx, domain, held)
}
