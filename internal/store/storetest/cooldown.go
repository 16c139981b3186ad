package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// limited is the outcome of a 429 without a retry-after.
var limited = store.Outcome{RateLimited: true}

func testCooldown(t *testing.T, f *fixture) {
	const retryAfter = 150 * time.Millisecond
	c := f.cand(f.unit("u", 3), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	before, after := f.release(f.s, "t0", store.Outcome{RateLimited: true, RetryAfter: retryAfter})
	lo, hi := before.Add(retryAfter), after.Add(retryAfter)

	// Cooling: everyone waits, although the unit has free slots.
	reqs := make([]store.Acquire, 5)
	for i := range reqs {
		reqs[i] = f.req(fmt.Sprintf("w%d", i), c)
		g := mustQueueAt(t, f.s, reqs[i], i)
		within(t, reqs[i].Ticket+" RetryAt", g.RetryAt, lo, hi)
		if !g.Cooling {
			t.Errorf("cooling: Acquire(%s) = %+v, want Cooling", reqs[i].Ticket, g)
		}
	}
	if us := f.unitState(f.s, "u"); us.Level != 1 || us.Probe != "" {
		t.Errorf("cooling: Level %d, Probe %q; want 1, \"\"", us.Level, us.Probe)
	}

	// Cooldown over: of all waiters retrying at once, exactly one (the head)
	// gets a lease, as the probe; nobody else, not even from another queue.
	sleepPast(hi)
	for i, g := range acquireAll(t, f.s, reqs) {
		if g.Granted != (i == 0) || g.Probe != (i == 0) {
			t.Fatalf("after the cooldown %s = %+v, want only w0 granted, as the probe", reqs[i].Ticket, g)
		}
	}
	for i := 1; i < len(reqs); i++ {
		if g := mustQueueAt(t, f.s, reqs[i], i-1); !g.Cooling {
			t.Errorf("probing: Acquire(%s) = %+v, want Cooling (the probe is out)", reqs[i].Ticket, g)
		}
	}
	other := f.in("q2", f.req("x", c))
	mustQueueAt(t, f.s, other, 0)
	if us := f.unitState(f.s, "u"); us.Probe != "in_flight" || us.InFlight != 1 {
		t.Errorf("probing: Probe %q, InFlight %d; want in_flight, 1", us.Probe, us.InFlight)
	}

	// The probe succeeds: the unit is open, up to Cap.
	f.release(f.s, "w0", store.Outcome{Success: true})
	for i := 1; i <= 3; i++ {
		if g := mustGrant(t, f.s, reqs[i]); g.Probe {
			t.Errorf("open again: %s is a probe", reqs[i].Ticket)
		}
	}
	mustQueueAt(t, f.s, reqs[4], 0)
	if us := f.unitState(f.s, "u"); us.Level != 0 || !us.CoolingUntil.IsZero() || us.Probe != "" {
		t.Errorf("open again: Level %d, CoolingUntil %v, Probe %q; want 0, zero, \"\"", us.Level, us.CoolingUntil, us.Probe)
	}

	// A rate limit cools it for Base; the probe limited again cools it for
	// Base·2.
	_, after = f.release(f.s, "w1", limited)
	f.release(f.s, "w2", store.Outcome{})
	f.release(f.s, "w3", store.Outcome{})
	sleepPast(after.Add(baseCool))
	if g := mustGrant(t, f.s, reqs[4]); !g.Probe {
		t.Errorf("after the second cooldown w4 = %+v, want the probe", g)
	}
	before, after = f.release(f.s, "w4", limited)
	us := f.unitState(f.s, "u")
	if us.Level != 2 {
		t.Errorf("probe limited again: Level %d, want 2", us.Level)
	}
	within(t, "probe limited again: CoolingUntil", us.CoolingUntil, before.Add(2*baseCool), after.Add(2*baseCool))
	if err := f.s.Cancel(t.Context(), f.domain, other.Queue, other.Ticket); err != nil {
		t.Errorf("Cancel error: %v", err)
	}
}

func testBackoffWithoutRetryAfter(t *testing.T, f *fixture) {
	const maxD = 3 * baseCool
	c := f.cand(store.Unit{ID: f.name("u"), Cap: 2, Base: baseCool, Max: maxD}, "c", 0)
	steps := []struct {
		name  string
		out   store.Outcome
		probe bool          // the lease released is the probe
		cool  time.Duration // the cooldown the release starts; 0 = the unit opens
		level int
	}{
		{"first rate limit", limited, false, baseCool, 1},
		{"probe limited", limited, true, 2 * baseCool, 2},
		{"probe limited, capped at Max", limited, true, maxD, 3},
		{"probe succeeds", store.Outcome{Success: true}, true, 0, 0},
		{"level reset by the success", limited, false, baseCool, 1},
		{"retry-after capped at Max", store.Outcome{RateLimited: true, RetryAfter: 100 * maxD}, true, maxD, 2},
	}
	var open time.Time       // when the current cooldown ends, by the test's clock
	var cooled time.Duration // the cooldowns set so far: each began after the last ended
	for i, st := range steps {
		sleepPast(open)
		ticket := fmt.Sprintf("t%d", i)
		if g := mustGrant(t, f.s, f.req(ticket, c)); g.Probe != st.probe {
			t.Errorf("%s: grant Probe = %v, want %v", st.name, g.Probe, st.probe)
		}
		before, after := f.release(f.s, ticket, st.out)
		us := f.unitState(f.s, "u")
		if us.Level != st.level {
			t.Errorf("%s: Level = %d, want %d", st.name, us.Level, st.level)
		}
		if st.cool == 0 {
			if !us.CoolingUntil.IsZero() || us.Probe != "" {
				t.Errorf("%s: CoolingUntil %v, Probe %q; want zero, \"\"", st.name, us.CoolingUntil, us.Probe)
			}
			continue
		}
		within(t, st.name+": CoolingUntil", us.CoolingUntil, before.Add(st.cool), after.Add(st.cool))
		open = after.Add(st.cool)
		if cooled += st.cool; us.Cooled != cooled {
			t.Errorf("%s: Cooled = %v, want %v (the cooldowns set so far)", st.name, us.Cooled, cooled)
		}
	}
}

// testCooledCountsOverlapOnce: a rate limit that lands while its unit is
// cooling adds to Cooled only the time it moves the cooldown's end; one
// that ends sooner than the running cooldown adds nothing.
func testCooledCountsOverlapOnce(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 3), "c", 0)
	for _, ticket := range []string{"t0", "t1", "t2"} {
		mustGrant(t, f.s, f.req(ticket, c))
	}
	first, _ := f.release(f.s, "t0", store.Outcome{RateLimited: true, RetryAfter: time.Second})
	_, last := f.release(f.s, "t1", store.Outcome{RateLimited: true, RetryAfter: time.Second})
	f.release(f.s, "t2", store.Outcome{RateLimited: true, RetryAfter: 10 * time.Millisecond})
	us := f.unitState(f.s, "u")
	// The second moved the end by the time between the two releases, at
	// most last-first; the third did not move it.
	if lo, hi := time.Second, time.Second+last.Sub(first)+2*clockSlop; us.Cooled < lo || us.Cooled > hi {
		t.Errorf("Cooled = %v after two overlapping 1s cooldowns and a shorter one, want within [%v, %v]", us.Cooled, lo, hi)
	}
}

func testProbeHolderDies(t *testing.T, f *fixture) {
	const short = 250 * time.Millisecond
	c := f.cand(f.unit("u", 2), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	_, after := f.release(f.s, "t0", limited)
	sleepPast(after.Add(baseCool))

	g := mustGrant(t, f.s, ttl(short, f.req("p1", c)))
	if !g.Probe {
		t.Fatalf("after the cooldown p1 = %+v, want the probe", g)
	}
	mustQueueAt(t, f.s, f.req("p2", c), 0)

	// p1's holder never comes back: when its lease expires, p2 probes.
	sleepPast(g.Expires)
	if g := mustGrant(t, f.s, f.req("p2", c)); !g.Probe {
		t.Errorf("after the probe expired p2 = %+v, want the probe", g)
	}
	if us := f.unitState(f.s, "u"); us.Probe != "in_flight" || us.InFlight != 1 {
		t.Errorf("Probe %q, InFlight %d; want in_flight, 1", us.Probe, us.InFlight)
	}
}

func testCooldownIsPerUnit(t *testing.T, f *fixture) {
	const coolA, coolB = 300 * time.Millisecond, 100 * time.Millisecond
	ca, cb := f.cand(f.unit("a", 1), "ca", 0), f.cand(f.unit("b", 1), "cb", 0)
	mustGrant(t, f.s, f.req("ta", ca))
	mustGrant(t, f.s, f.req("tb", cb))
	before, after := f.release(f.s, "ta", store.Outcome{RateLimited: true, RetryAfter: coolA})

	// b keeps its own cap (a's free slot is not b's) and is not cooling.
	mustQueueAt(t, f.s, f.req("tb2", cb), 0)
	f.release(f.s, "tb", store.Outcome{Success: true})
	if g := mustGrant(t, f.s, f.req("tb2", cb)); g.Probe {
		t.Errorf("tb2 is a probe; b never cooled")
	}
	g := mustQueueAt(t, f.s, f.req("ta2", ca), 0)
	within(t, "ta2 RetryAt", g.RetryAt, before.Add(coolA), after.Add(coolA))
	states := f.units(f.s, "a", "b")
	if states[0].Level != 1 || states[1].Level != 0 || !states[1].CoolingUntil.IsZero() {
		t.Errorf("a cooling: states %+v, want a at Level 1 and b open at Level 0", states)
	}
	coolingA := states[0].CoolingUntil

	// b's cooldown leaves a's alone.
	before, after = f.release(f.s, "tb2", store.Outcome{RateLimited: true, RetryAfter: coolB})
	states = f.units(f.s, "a", "b")
	within(t, "b CoolingUntil", states[1].CoolingUntil, before.Add(coolB), after.Add(coolB))
	within(t, "a CoolingUntil", states[0].CoolingUntil, coolingA, coolingA)
	if states[0].Level != 1 || states[1].Level != 1 {
		t.Errorf("both cooling: Levels %d, %d; want 1, 1", states[0].Level, states[1].Level)
	}
}

// testProbeSucceededKeepsLease: a probe that proves the unit open at its
// first byte (ProbeSucceeded) opens it for everyone while its own lease
// keeps its slot until released; the lease is then an ordinary one, whose
// Release does not undo a cooldown begun meanwhile. ProbeSucceeded of a
// lease that is not the probe does nothing.
func testProbeSucceededKeepsLease(t *testing.T, f *fixture) {
	const retryAfter = 150 * time.Millisecond
	c := f.cand(f.unit("u", 3), "c", 0)
	mustGrant(t, f.s, f.req("t0", c))
	_, after := f.release(f.s, "t0", store.Outcome{RateLimited: true, RetryAfter: retryAfter})
	sleepPast(after.Add(retryAfter))
	if g := mustGrant(t, f.s, f.req("p", c)); !g.Probe {
		t.Fatalf("after the cooldown p = %+v, want the probe", g)
	}
	reqs := []store.Acquire{f.req("w1", c), f.req("w2", c), f.req("w3", c)}
	mustQueueAt(t, f.s, reqs[0], 0)
	mustQueueAt(t, f.s, reqs[1], 1)
	mustQueueAt(t, f.s, reqs[2], 2)
	if err := f.s.ProbeSucceeded(t.Context(), f.domain, f.name("w1")); err != nil {
		t.Fatal(err)
	}
	if us := f.unitState(f.s, "u"); us.Probe != "in_flight" {
		t.Errorf("ProbeSucceeded of a waiter: Probe %q, want in_flight", us.Probe)
	}

	ch := f.wake(f.s, f.replica)
	if err := f.s.ProbeSucceeded(t.Context(), f.domain, f.name("p")); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ch, reqs[0].Ticket)
	if us := f.unitState(f.s, "u"); us.Level != 0 || !us.CoolingUntil.IsZero() || us.Probe != "" || us.InFlight != 1 {
		t.Errorf("probe succeeded: Level %d, CoolingUntil %v, Probe %q, InFlight %d; want 0, zero, \"\", 1",
			us.Level, us.CoolingUntil, us.Probe, us.InFlight)
	}
	// The probe's lease still holds its slot: two of the three waiters fit.
	mustGrant(t, f.s, reqs[0])
	mustGrant(t, f.s, reqs[1])
	mustQueueAt(t, f.s, reqs[2], 0)

	// A rate limit cools the unit again; the former probe's success does
	// not open it.
	f.release(f.s, "w1", store.Outcome{RateLimited: true, RetryAfter: time.Minute})
	f.release(f.s, "p", store.Outcome{Success: true})
	if us := f.unitState(f.s, "u"); us.CoolingUntil.IsZero() || us.InFlight != 1 {
		t.Errorf("after the former probe's release: CoolingUntil %v, InFlight %d; want cooling, 1", us.CoolingUntil, us.InFlight)
	}
	f.release(f.s, "w2", store.Outcome{})
	f.cancel(f.s, "w3")
}
