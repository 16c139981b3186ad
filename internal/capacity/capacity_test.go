package capacity

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newEngine runs an engine on a memstore. Its tests run in synctest
// bubbles: waits, leases and cooldowns pass on the bubble's clock, which
// moves only when every goroutine of the test waits, so they take no real
// time and their durations are exact.
func newEngine(t *testing.T) (*Engine, *memstore.Store) {
	t.Helper()
	s := memstore.New()
	e := New(s, s, "replica-1", time.Second, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, s
}

func unit(id string, limit int) []store.Candidate {
	return []store.Candidate{{Unit: store.Unit{ID: id, Cap: limit, Base: 50 * time.Millisecond, Max: time.Second}, Credential: id + "-cred"}}
}

func fixed(c []store.Candidate) Plan {
	return func() (string, []store.Candidate) { return "d", c }
}

func acquire(ticket string) store.Acquire {
	return store.Acquire{Domain: "d", Ticket: ticket, Queue: "q"}
}

func TestWaitIsWokenByARelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t)
		ctx := t.Context()
		first, err := e.Wait(ctx, acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		start := time.Now()
		go func() {
			c, err := e.Wait(ctx, acquire("t2"), time.Now().Add(5*time.Second), fixed(unit("a", 1)))
			if err == nil {
				c.Release(ctx, store.Outcome{Success: true})
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond)
		first.Release(ctx, store.Outcome{Success: true})
		if err := <-got; err != nil {
			t.Fatalf("second Wait = %v, want a grant after the release", err)
		}
		// Woken by the release, not by the one-second safety tick (the
		// bubble's clock moves only when every goroutine waits).
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("second Wait took %v, want a wake-up at the release, 50ms in", d)
		}
	})
}

func TestWaitTimesOutWithRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t)
		if _, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1))); err != nil {
			t.Fatal(err)
		}
		_, err := e.Wait(t.Context(), acquire("t2"), time.Now().Add(100*time.Millisecond), fixed(unit("a", 1)))
		se, ok := errors.AsType[*sluice.Error](err)
		if !ok || se.Code != sluice.CodeCapacityWaitTimeout || se.RetryAfter <= 0 {
			t.Fatalf("Wait past its deadline = %v, want capacity_wait_timeout with a Retry-After", err)
		}
	})
}

func TestCallerThatLeavesLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, s := newEngine(t)
		if _, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1))); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := e.Wait(ctx, acquire("t2"), time.Now().Add(5*time.Second), fixed(unit("a", 1)))
			errc <- err
		}()
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
		}
		// t3 arrives after t2 left: it is first in line, not behind a ghost.
		g, err := s.Acquire(t.Context(), store.Acquire{Domain: "d", Ticket: "t3", Queue: "q", Candidates: unit("a", 1), LeaseTTL: time.Second, Replica: "x"})
		if err != nil || g.Granted || g.Position != 0 {
			t.Errorf("Acquire after the caller left = %+v, %v; want queued at position 0", g, err)
		}
	})
}

func TestWaitSeesCandidatesAddedWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t)
		if _, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1))); err != nil {
			t.Fatal(err)
		}
		added := make(chan struct{})
		plan := func() (string, []store.Candidate) {
			select {
			case <-added:
				return "d", append(unit("a", 1), unit("b", 1)...)
			default:
				return "d", unit("a", 1)
			}
		}
		go func() { time.Sleep(50 * time.Millisecond); close(added) }()
		c, err := e.Wait(t.Context(), acquire("t2"), time.Now().Add(3*time.Second), plan)
		if err != nil || c.Index != 1 {
			t.Fatalf("Wait = %+v, %v; want the added candidate (index 1)", c, err)
		}
	})
}

func TestEmptyPlanFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t)
		_, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(nil))
		if !errors.Is(err, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable}) {
			t.Errorf("Wait with no candidates = %v, want no_upstream_available", err)
		}
	})
}

// downStore fails every call, as a store whose server went away.
type downStore struct{ *memstore.Store }

func (downStore) Acquire(context.Context, store.Acquire) (store.Grant, error) {
	return store.Grant{}, store.ErrUnavailable
}

func TestStoreOutageIsStateUnavailable(t *testing.T) {
	s := downStore{memstore.New()}
	e := New(s, memstore.New(), "r", time.Second, quiet)
	_, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
	var se *sluice.Error
	if !errors.As(err, &se) || se.Code != sluice.CodeStateUnavailable || se.RetryAfter <= 0 || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Wait on a down store = %v, want state_unavailable with a Retry-After, wrapping ErrUnavailable", err)
	}
}

func TestReleaseIsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, s := newEngine(t)
		c, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 2)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Wait(t.Context(), acquire("t2"), time.Now().Add(time.Second), fixed(unit("a", 2))); err != nil {
			t.Fatal(err)
		}
		c.Release(t.Context(), store.Outcome{})
		c.Release(t.Context(), store.Outcome{})
		us, _ := s.Units(t.Context(), "d", []string{"a"})
		if us[0].InFlight != 1 {
			t.Errorf("in flight after a double release = %d, want 1", us[0].InFlight)
		}
	})
}

func TestStatusesSeenAfterRefresh(t *testing.T) {
	shared := memstore.New()
	a, b := NewStatuses(shared, quiet), NewStatuses(shared, quiet)
	if err := a.Set(t.Context(), KindCredential, "k1", store.Status{State: "disabled", Reason: "auth"}); err != nil {
		t.Fatal(err)
	}
	if got := a.Credential("k1"); got.State != "disabled" {
		t.Errorf("writer sees %+v, want disabled at once", got)
	}
	if got := b.Credential("k1"); got.State != "active" {
		t.Errorf("other replica before refresh sees %+v", got)
	}
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := b.Credential("k1"); got.State != "disabled" || got.Reason != "auth" {
		t.Errorf("other replica after refresh sees %+v, want disabled (auth)", got)
	}
}

// TestKeptClaim: a kept claim outlives renewal and Release; ReleaseLease
// frees it, and one nobody releases lapses after the kept TTL.
func TestKeptClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t) // lease TTL 1 s, renewed every 333 ms while held
		ctx := t.Context()
		try := func(ticket string) error {
			c, err := e.Wait(ctx, acquire(ticket), time.Now().Add(50*time.Millisecond), fixed(unit("a", 1)))
			if err == nil {
				c.Release(ctx, store.Outcome{Success: true})
			}
			return err
		}
		c, err := e.Wait(ctx, acquire("job1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		dom, lease, err := c.Keep(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Release(ctx, store.Outcome{Success: true}) // a no-op after Keep
		time.Sleep(1500 * time.Millisecond)          // past the engine's TTL: kept, not lapsed
		if err := try("other1"); !errors.Is(err, &sluice.Error{Code: sluice.CodeCapacityWaitTimeout}) {
			t.Fatalf("Wait while the job holds the slot = %v, want capacity_wait_timeout", err)
		}
		if err := e.ReleaseLease(ctx, dom, lease, store.Outcome{Success: true}); err != nil {
			t.Fatal(err)
		}
		if err := try("other2"); err != nil {
			t.Fatalf("Wait after ReleaseLease = %v, want a grant", err)
		}

		c, err = e.Wait(ctx, acquire("job2"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Keep(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if err := try("other3"); err != nil {
			t.Fatalf("Wait after the kept lease lapsed = %v, want a grant", err)
		}
	})
}
