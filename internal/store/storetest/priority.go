package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Priority classes of Acquire.Class.
const (
	interactive = 0
	standard    = 1
	background  = 2
)

// class returns a copy of a with priority class c.
func class(c int, a store.Acquire) store.Acquire {
	a.Class = c
	return a
}

// noWakeFor fails the case if ticket arrives on ch within d.
func noWakeFor(t *testing.T, ch <-chan string, ticket string, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case id, ok := <-ch:
			if !ok {
				t.Fatalf("wake channel closed")
			}
			if id == ticket {
				t.Errorf("woke %s, which could not take the slot", ticket)
				return
			}
		case <-timer.C:
			return
		}
	}
}

func testPriorityOrder(t *testing.T, f *fixture) {
	wake := f.wake(f.s, f.replica)
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	b1, s1, i1 := class(background, f.req("b1", c)), class(standard, f.req("s1", c)), class(interactive, f.req("i1", c))
	// Arrival order b1, s1, i1; queue order i1, s1, b1.
	mustQueueAt(t, f.s, b1, 0)
	mustQueueAt(t, f.s, s1, 0)
	mustQueueAt(t, f.s, i1, 0)
	mustQueueAt(t, f.s, b1, 2)
	mustQueueAt(t, f.s, s1, 1)
	if us := f.unitState(f.s, "u"); us.Waiting != 3 || us.WaitingByClass != [store.Classes]int{1, 1, 1} {
		t.Errorf("Waiting %d, WaitingByClass %v; want 3, [1 1 1]", us.Waiting, us.WaitingByClass)
	}

	holder := "t0"
	for _, step := range []struct {
		next  store.Acquire
		after []store.Acquire // still queued, in order
	}{
		{i1, []store.Acquire{s1, b1}},
		{s1, []store.Acquire{b1}},
		{b1, nil},
	} {
		f.release(f.s, holder, store.Outcome{Success: true})
		waitWake(t, wake, step.next.Ticket)
		// The others retry first, the least urgent first: none may take it.
		for j := len(step.after) - 1; j >= 0; j-- {
			mustQueueAt(t, f.s, step.after[j], j+1)
		}
		mustGrant(t, f.s, step.next)
		for j, a := range step.after {
			mustQueueAt(t, f.s, a, j)
		}
		holder = step.next.Ticket[len(f.prefix):]
	}
}

func testInteractiveNewcomerBeatsWaitingBackground(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	b1 := class(background, f.req("b1", c))
	mustQueueAt(t, f.s, b1, 0)
	f.release(f.s, "t0", store.Outcome{Success: true})

	// An interactive newcomer is ahead of every queued background ticket.
	mustGrant(t, f.s, class(interactive, f.req("i1", c)))
	mustQueueAt(t, f.s, b1, 0)
	// A background newcomer is not: it queues behind b1.
	f.release(f.s, "i1", store.Outcome{Success: true})
	mustQueueAt(t, f.s, class(background, f.req("b2", c)), 1)
	mustGrant(t, f.s, b1)
}

func testSameClassNoBarging(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	b1 := class(background, f.req("b1", c))
	s1 := class(standard, f.req("s1", c))
	mustQueueAt(t, f.s, b1, 0)
	mustQueueAt(t, f.s, s1, 0)
	f.release(f.s, "t0", store.Outcome{Success: true})

	// A standard newcomer is behind s1 (same class) and ahead of b1; a
	// background one is behind both.
	mustQueueAt(t, f.s, class(standard, f.req("s2", c)), 1)
	mustQueueAt(t, f.s, class(background, f.req("b2", c)), 3)
	mustQueueAt(t, f.s, b1, 2)
	mustGrant(t, f.s, s1)

	// Barring is per unit within a class too: with s2 waiting for u, a
	// standard newcomer skips u for a free unit further down its list.
	f.release(f.s, "s1", store.Outcome{Success: true})
	cv := f.cand(f.unit("v", 1), "cv", 0)
	if g := mustGrant(t, f.s, class(standard, f.req("s3", c, cv))); g.Index != 1 {
		t.Errorf("s3 Index = %d, want 1 (u is s2's)", g.Index)
	}
	mustQueueAt(t, f.s, b1, 1)
	mustGrant(t, f.s, class(standard, f.req("s2", c)))
}

func testReservedShare(t *testing.T, f *fixture) {
	wake := f.wake(f.s, f.replica)
	u := f.unit("u", 2)
	u.Reserve = []int{1}
	c := f.cand(u, "c", 0)
	// Background gets at most Cap - Reserve[0] = 1 slot, even with both free.
	mustGrant(t, f.s, class(background, f.req("b1", c)))
	b2 := class(background, f.req("b2", c))
	mustQueueAt(t, f.s, b2, 0)
	mustQueueAt(t, f.s, class(standard, f.req("s1", c)), 0) // Reserve[0] binds standard as well
	// Interactive may use the reserved slot, ahead of the waiting tickets.
	mustGrant(t, f.s, class(interactive, f.req("i1", c)))
	if us := f.unitState(f.s, "u"); us.InFlight != 2 {
		t.Errorf("InFlight = %d, want 2", us.InFlight)
	}

	// The reserved slot frees: nobody of a less urgent class is woken for it.
	f.release(f.s, "i1", store.Outcome{Success: true})
	noWakeFor(t, wake, f.name("s1"), 100*time.Millisecond)
	mustQueueAt(t, f.s, b2, 1)
	f.cancel(f.s, "s1")

	// The shared slot frees: the next background ticket takes it.
	f.release(f.s, "b1", store.Outcome{Success: true})
	waitWake(t, wake, b2.Ticket)
	mustGrant(t, f.s, b2)

	// Reserves add up: Cap 3, Reserve [1, 1] leaves interactive 3 slots,
	// standard 2 and background 1.
	v := f.unit("v", 3)
	v.Reserve = []int{1, 1}
	cv := f.cand(v, "cv", 0)
	mustGrant(t, f.s, f.in("q2", class(background, f.req("vb1", cv))))
	mustQueueAt(t, f.s, f.in("q2", class(background, f.req("vb2", cv))), 0)
	mustGrant(t, f.s, f.in("q2", class(standard, f.req("vs1", cv))))
	mustQueueAt(t, f.s, f.in("q2", class(standard, f.req("vs2", cv))), 0)
	mustGrant(t, f.s, f.in("q2", class(interactive, f.req("vi1", cv))))
	mustQueueAt(t, f.s, f.in("q2", class(interactive, f.req("vi2", cv))), 0)
}

func testBackgroundNeverProbesWhileInteractiveWaits(t *testing.T, f *fixture) {
	const retryAfter = 150 * time.Millisecond
	c := f.cand(f.unit("u", 2), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	_, after := f.release(f.s, "t0", store.Outcome{RateLimited: true, RetryAfter: retryAfter})
	b1 := class(background, f.req("b1", c))
	i1 := f.in("q2", class(interactive, f.req("i1", c))) // another queue: no-barging alone does not order them
	mustQueueAt(t, f.s, b1, 0)
	mustQueueAt(t, f.s, i1, 0)

	// Cooldown over: the background ticket retries first, yet the
	// interactive one probes.
	sleepPast(after.Add(retryAfter))
	mustQueueAt(t, f.s, b1, 0)
	if g := mustGrant(t, f.s, i1); !g.Probe {
		t.Errorf("i1 = %+v, want the probe", g)
	}
	mustQueueAt(t, f.s, b1, 0)
	f.release(f.s, "i1", store.Outcome{Success: true})
	if g := mustGrant(t, f.s, b1); g.Probe {
		t.Errorf("b1 = %+v after the probe reopened the unit, want no probe", g)
	}

	// With no more urgent ticket waiting, background may probe.
	cv := f.cand(f.unit("v", 2), "cv", 0)
	mustGrant(t, f.s, f.in("q3", f.req("v0", cv)))
	_, after = f.release(f.s, "v0", store.Outcome{RateLimited: true, RetryAfter: retryAfter})
	sleepPast(after.Add(retryAfter))
	if g := mustGrant(t, f.s, f.in("q3", class(background, f.req("vb", cv)))); !g.Probe {
		t.Errorf("vb = %+v with nobody more urgent waiting, want the probe", g)
	}
}

func testWaitingByClass(t *testing.T, f *fixture) {
	u, v := f.unit("u", 1), f.unit("v", 1)
	cu, cv := f.cand(u, "cu", 0), f.cand(v, "cv", 0)
	mustGrant(t, f.s, f.req("t0", cu))
	mustGrant(t, f.s, f.req("t1", cv))
	mustQueueAt(t, f.s, class(standard, f.req("s1", cu, cv)), 0)
	mustQueueAt(t, f.s, class(background, f.req("b1", cu)), 1)
	mustQueueAt(t, f.s, f.in("q2", class(standard, f.req("s2", cu))), 0)
	mustQueueAt(t, f.s, f.in("q2", class(interactive, f.req("i1", cu))), 0)
	mustQueueAt(t, f.s, class(99, f.req("x1", cv)), 2) // clamped to background: behind b1
	states := f.units(f.s, "u", "v")
	for i, want := range []struct {
		waiting int
		byClass [store.Classes]int
	}{{4, [store.Classes]int{1, 2, 1}}, {2, [store.Classes]int{0, 1, 1}}} {
		if states[i].Waiting != want.waiting || states[i].WaitingByClass != want.byClass {
			t.Errorf("%s: Waiting %d, WaitingByClass %v; want %d, %v",
				states[i].ID, states[i].Waiting, states[i].WaitingByClass, want.waiting, want.byClass)
		}
	}
	f.cancel(f.s, "s1")
	if us := f.unitState(f.s, "u"); us.Waiting != 3 || us.WaitingByClass != [store.Classes]int{1, 1, 1} {
		t.Errorf("after a cancel: Waiting %d, WaitingByClass %v; want 3, [1 1 1]", us.Waiting, us.WaitingByClass)
	}
}

// testBackgroundPausesAfterRateLimit: within Unit.BackgroundPause of the
// unit's last rate limit (scoped to one of its limits, or cooling the unit
// itself), background waits with RetryAt the end of the pause while the
// other classes run; after it, background is granted. Without a pause, a
// rate limit holds background back only while it cools the unit.
func testBackgroundPausesAfterRateLimit(t *testing.T, f *fixture) {
	const pause = 300 * time.Millisecond
	u := f.unit("u", 4)
	u.BackgroundPause = pause
	c := f.cand(u, "c", 0)
	model := store.Unit{ID: f.name("u/m"), Base: baseCool, Max: maxCool}
	m := withLimits(c, model)

	mustGrant(t, f.s, class(background, f.req("b0", c))) // no rate limit yet
	mustGrant(t, f.s, f.req("m0", m))
	before, after := f.release(f.s, "m0", store.Outcome{RateLimited: true, RetryAfter: time.Second, Cool: model.ID})
	b1 := class(background, f.req("b1", c))
	g := mustQueueAt(t, f.s, b1, 0)
	within(t, "b1 RetryAt", g.RetryAt, before.Add(pause), after.Add(pause))
	mustGrant(t, f.s, class(standard, f.req("s1", c))) // the unit itself is open
	sleepPast(after.Add(pause))
	mustGrant(t, f.s, b1)

	// A rate limit of the unit itself: the pause outlasts the cooldown.
	f.release(f.s, "s1", store.Outcome{RateLimited: true, RetryAfter: 50 * time.Millisecond})
	_, after = f.release(f.s, "b0", store.Outcome{Success: true})
	sleepPast(after.Add(50 * time.Millisecond))
	mustGrant(t, f.s, f.in("q2", class(standard, f.req("s2", c)))) // the probe
	f.release(f.s, "s2", store.Outcome{Success: true})
	mustQueue(t, f.s, f.in("q2", class(background, f.req("b2", c))))
	mustGrant(t, f.s, f.in("q2", class(interactive, f.req("i2", c))))

	// No pause: once the unit is open, background runs.
	v := f.unit("v", 4)
	cv := f.cand(v, "cv", 0)
	vm := store.Unit{ID: f.name("v/m"), Base: baseCool, Max: maxCool}
	mustGrant(t, f.s, f.in("q3", f.req("v0", withLimits(cv, vm))))
	f.release(f.s, "v0", store.Outcome{RateLimited: true, RetryAfter: time.Second, Cool: vm.ID})
	mustGrant(t, f.s, f.in("q3", class(background, f.req("vb", cv))))
}
