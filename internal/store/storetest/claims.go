package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

func testGrantWithinCap(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 2), "c", 0)
	before := time.Now()
	grants := []store.Grant{mustGrant(t, f.s, f.req("t1", c)), mustGrant(t, f.s, f.req("t2", c))}
	after := time.Now()
	for i, g := range grants {
		if g.Index != 0 || g.Probe {
			t.Errorf("grant #%d = %+v, want Index 0 and no probe", i, g)
		}
		within(t, fmt.Sprintf("grant #%d Expires", i), g.Expires, before.Add(longTTL), after.Add(longTTL))
	}
	g := mustQueueAt(t, f.s, f.req("t3", c), 0)
	if !g.RetryAt.IsZero() {
		t.Errorf("queued RetryAt = %v, want zero (nothing is cooling)", g.RetryAt)
	}
	if got := f.unitState(f.s, "u").InFlight; got != 2 {
		t.Errorf("InFlight = %d, want 2", got)
	}
}

func testQueueWhenFull(t *testing.T, f *fixture) {
	wake := f.wake(f.s, f.replica)
	c := f.cand(f.unit("u", 2), "c", 0)
	mustGrant(t, f.s, f.req("t1", c))
	mustGrant(t, f.s, f.req("t2", c))
	if g := mustQueueAt(t, f.s, f.req("t3", c), 0); g.Cooling {
		t.Errorf("Acquire(t3) on a full unit = %+v, want Cooling false", g)
	}

	f.release(f.s, "t1", store.Outcome{Success: true})
	waitWake(t, wake, f.name("t3"))
	mustGrant(t, f.s, f.req("t3", c))
	mustQueueAt(t, f.s, f.req("t4", c), 0)

	ctx, cancel := context.WithCancel(t.Context())
	ch, err := f.s.Wake(ctx, f.name("other"))
	if err != nil {
		t.Fatalf("Wake error: %v", err)
	}
	cancel()
	timer := time.NewTimer(wakeWait)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("wake channel still open %v after its context ended", wakeWait)
		}
	}
}

func testCredentialInnerCap(t *testing.T, f *fixture) {
	one := f.cand(f.unit("u", 3), "c1", 1)
	mustGrant(t, f.s, f.req("t1", one))
	mustQueueAt(t, f.s, f.req("t2", one), 0)

	// Two credentials of one unit: the second request lands on the second
	// credential, and a third waits although the unit has a slot left.
	v := f.unit("v", 3)
	a, b := f.cand(v, "c2", 1), f.cand(v, "c3", 1)
	if g := mustGrant(t, f.s, f.in("q2", f.req("t3", a, b))); g.Index != 0 {
		t.Errorf("t3 Index = %d, want 0", g.Index)
	}
	if g := mustGrant(t, f.s, f.in("q2", f.req("t4", a, b))); g.Index != 1 {
		t.Errorf("t4 Index = %d, want 1", g.Index)
	}
	mustQueueAt(t, f.s, f.in("q2", f.req("t5", a, b)), 0)
}

func testAccountCapAcrossCredentials(t *testing.T, f *fixture) {
	u := f.unit("u", 2)
	cands := []store.Candidate{f.cand(u, "c1", 0), f.cand(u, "c2", 0), f.cand(u, "c3", 0)}
	reqs := make([]store.Acquire, 10)
	for i := range reqs {
		reqs[i] = f.req(fmt.Sprintf("t%d", i), cands...)
	}
	grants := acquireAll(t, f.s, reqs)
	var holders []int
	for i, g := range grants {
		if g.Granted {
			holders = append(holders, i)
		}
	}
	if len(holders) != 2 {
		t.Fatalf("%d of 10 racing tickets granted, want 2", len(holders))
	}
	queue := slices.Repeat([]int{-1}, len(reqs)-2)
	for i, g := range grants {
		switch {
		case g.Granted:
		case g.Position < 0 || g.Position >= len(queue) || queue[g.Position] != -1:
			t.Fatalf("%s queued at Position %d, want a free place in 0..%d", reqs[i].Ticket, g.Position, len(queue)-1)
		default:
			queue[g.Position] = i
		}
	}

	// One slot frees at a time; of all waiters retrying at once, only the
	// head gets it.
	for len(queue) > 0 {
		f.release(f.s, fmt.Sprintf("t%d", holders[0]), store.Outcome{Success: true})
		holders = holders[1:]
		retry := make([]store.Acquire, len(queue))
		for j, i := range queue {
			retry[j] = reqs[i]
		}
		for j, g := range acquireAll(t, f.s, retry) {
			if g.Granted != (j == 0) {
				t.Fatalf("waiter #%d (%s) granted = %v, want only the head granted", j, retry[j].Ticket, g.Granted)
			}
		}
		holders = append(holders, queue[0])
		queue = queue[1:]
		if got := f.unitState(f.s, "u").InFlight; got != 2 {
			t.Fatalf("InFlight = %d, want 2", got)
		}
	}
	for _, i := range holders {
		f.release(f.s, fmt.Sprintf("t%d", i), store.Outcome{Success: true})
	}
	if got := f.unitState(f.s, "u").InFlight; got != 0 {
		t.Errorf("InFlight after releasing all = %d, want 0", got)
	}
}

func testIdempotentAcquire(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 1), "c", 0)
	g1 := mustGrant(t, f.s, f.req("t1", c))
	g2 := mustGrant(t, f.s, f.req("t1", c))
	if g2.Index != g1.Index || g2.Probe != g1.Probe {
		t.Errorf("second grant = %+v, want the first %+v", g2, g1)
	}
	within(t, "second grant Expires", g2.Expires, g1.Expires, g1.Expires)
	if got := f.unitState(f.s, "u").InFlight; got != 1 {
		t.Errorf("InFlight = %d, want 1", got)
	}

	mustQueueAt(t, f.s, f.req("t2", c), 0)
	mustQueueAt(t, f.s, f.req("t3", c), 1)
	mustQueueAt(t, f.s, f.req("t2", c), 0)
	mustQueueAt(t, f.s, f.req("t3", c), 1)
	if got := f.unitState(f.s, "u").Waiting; got != 2 {
		t.Errorf("Waiting = %d, want 2", got)
	}
}

func testReleaseExactlyOnce(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 2), "c", 0)
	mustGrant(t, f.s, f.req("t1", c))
	mustGrant(t, f.s, f.req("t2", c))
	if g := mustQueueAt(t, f.s, f.req("t3", c), 0); g.Cooling {
		t.Errorf("Acquire(t3) on a full unit = %+v, want Cooling false", g)
	}

	f.release(f.s, "t1", store.Outcome{Success: true})
	f.release(f.s, "t1", store.Outcome{Success: true})
	mustGrant(t, f.s, f.req("t3", c))
	mustQueueAt(t, f.s, f.req("t4", c), 0) // only one slot came back

	f.release(f.s, "nobody", store.Outcome{})
	if err := f.s.Release(t.Context(), f.name("other-domain"), f.name("t2"), store.Outcome{}); err != nil {
		t.Errorf("Release in an unknown domain error: %v", err)
	}
	if got := f.unitState(f.s, "u").InFlight; got != 2 {
		t.Errorf("InFlight = %d, want 2", got)
	}
}

func testLeaseExpires(t *testing.T, f *fixture) {
	const short = 300 * time.Millisecond
	c := f.cand(f.unit("u", 2), "c", 0)
	g1 := mustGrant(t, f.s, ttl(short, f.req("t1", c)))
	g2 := mustGrant(t, f.s, ttl(short, f.req("t2", c)))
	mustQueueAt(t, f.s, f.req("t3", c), 0)
	sleepPast(latest(g1.Expires, g2.Expires))

	// Too late: an expired lease can be neither released (its outcome does
	// not count) nor renewed.
	f.release(f.s, "t1", limited)
	if err := f.s.Renew(t.Context(), f.domain, []string{f.name("t2")}, longTTL); err != nil {
		t.Fatalf("Renew error: %v", err)
	}
	if us := f.unitState(f.s, "u"); us.InFlight != 0 || us.Level != 0 || !us.CoolingUntil.IsZero() {
		t.Errorf("after the leases expired: %+v, want InFlight 0, Level 0, not cooling", us)
	}
	mustGrant(t, f.s, f.req("t3", c))
	mustGrant(t, f.s, f.req("t4", c))
	mustQueueAt(t, f.s, f.req("t5", c), 0)

	// Renewal keeps a lease alive past its first expiry; unknown leases in
	// the batch are ignored.
	cv := f.cand(f.unit("v", 1), "cv", 0)
	g6 := mustGrant(t, f.s, f.in("q2", ttl(short, f.req("t6", cv))))
	var renewed time.Time
	for time.Now().Before(g6.Expires.Add(2 * clockSlop)) {
		time.Sleep(short / 4)
		if err := f.s.Renew(t.Context(), f.domain, []string{f.name("nobody"), f.name("t6")}, short); err != nil {
			t.Fatalf("Renew error: %v", err)
		}
		renewed = time.Now()
	}
	mustQueueAt(t, f.s, f.in("q2", f.req("t7", cv)), 0)
	sleepPast(renewed.Add(short))
	mustGrant(t, f.s, f.in("q2", f.req("t7", cv)))
}

func testNoBarging(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	mustQueueAt(t, f.s, f.req("t1", c), 0)
	f.release(f.s, "t0", store.Outcome{Success: true})
	mustQueueAt(t, f.s, f.req("t2", c), 1) // the newcomer must not take t1's slot
	mustGrant(t, f.s, f.req("t1", c))

	// Barring is per unit: with t2 waiting for u, a newcomer skips u and
	// gets a free unit further down its list.
	f.release(f.s, "t1", store.Outcome{Success: true})
	cv := f.cand(f.unit("v", 1), "cv", 0)
	if g := mustGrant(t, f.s, f.req("t3", c, cv)); g.Index != 1 {
		t.Errorf("t3 Index = %d, want 1 (u is t2's)", g.Index)
	}
	mustGrant(t, f.s, f.req("t2", c))
}

func testFIFO(t *testing.T, f *fixture) {
	wake := f.wake(f.s, f.replica)
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	queue := []string{"t1", "t2", "t3"}
	for i, tk := range queue {
		mustQueueAt(t, f.s, f.req(tk, c), i)
	}
	holder := "t0"
	for len(queue) > 0 {
		f.release(f.s, holder, store.Outcome{Success: true})
		waitWake(t, wake, f.name(queue[0]))
		// Newest first: only the oldest may take the slot.
		for j := len(queue) - 1; j > 0; j-- {
			mustQueueAt(t, f.s, f.req(queue[j], c), j)
		}
		mustGrant(t, f.s, f.req(queue[0], c))
		holder, queue = queue[0], queue[1:]
	}
}

func testSkipsToNextCandidate(t *testing.T, f *fixture) {
	ca := f.cand(f.unit("a", 1), "ca", 0)
	mustGrant(t, f.s, f.req("t1", ca))
	if g := mustGrant(t, f.s, f.req("t2", ca, f.cand(f.unit("b", 1), "cb", 0))); g.Index != 1 {
		t.Errorf("past a full unit: Index = %d, want 1", g.Index)
	}

	f.release(f.s, "t1", store.Outcome{RateLimited: true, RetryAfter: maxCool})
	if g := mustGrant(t, f.s, f.req("t3", ca, f.cand(f.unit("c", 1), "cc", 0))); g.Index != 1 || g.Probe {
		t.Errorf("past a cooling unit: grant = %+v, want Index 1, no probe", g)
	}

	d := f.unit("d", 5)
	mustGrant(t, f.s, f.req("t4", f.cand(d, "d1", 1)))
	if g := mustGrant(t, f.s, f.req("t5", f.cand(d, "d1", 1), f.cand(d, "d2", 1))); g.Index != 1 {
		t.Errorf("past a full credential: Index = %d, want 1", g.Index)
	}
}

func testCancel(t *testing.T, f *fixture) {
	wake := f.wake(f.s, f.replica)
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	mustQueueAt(t, f.s, f.req("t1", c), 0)
	mustQueueAt(t, f.s, f.req("t2", c), 1)

	f.cancel(f.s, "t1")
	mustQueueAt(t, f.s, f.req("t2", c), 0)
	if got := f.unitState(f.s, "u").Waiting; got != 1 {
		t.Errorf("Waiting after a cancel = %d, want 1", got)
	}

	// Cancelling a granted ticket releases its lease and wakes the next.
	f.cancel(f.s, "t0")
	waitWake(t, wake, f.name("t2"))
	mustGrant(t, f.s, f.req("t2", c))

	f.cancel(f.s, "t0")
	f.cancel(f.s, "nobody")
	mustQueueAt(t, f.s, f.req("t3", c), 0) // t2 still holds the only slot
	if got := f.unitState(f.s, "u").InFlight; got != 1 {
		t.Errorf("InFlight = %d, want 1", got)
	}
}

func testDeadWaiterReaped(t *testing.T, f *fixture) {
	const short = 200 * time.Millisecond
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	mustQueueAt(t, f.s, ttl(short, f.req("t1", c)), 0)
	seen := time.Now()
	f.release(f.s, "t0", store.Outcome{Success: true})
	mustQueueAt(t, f.s, f.req("t2", c), 1) // t1 still bars it

	// t1 never comes back.
	sleepPast(seen.Add(short))
	mustGrant(t, f.s, f.req("t2", c))
}
