package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// testHiddenCapLearned: Cap 4, but the upstream refuses the third call in
// flight: the unit learns an effective cap of 2 and admits no third lease
// once the cooldown is over, although Cap would allow it.
func testHiddenCapLearned(t *testing.T, f *fixture) {
	const retryAfter = 50 * time.Millisecond
	c := f.cand(f.unit("u", 4), "c", 0)
	for i := range 3 {
		mustGrant(t, f.s, f.req(fmt.Sprintf("t%d", i), c))
	}
	_, after := f.release(f.s, "t0", store.Outcome{RateLimited: true, RetryAfter: retryAfter})
	if us := f.unitState(f.s, "u"); us.EffectiveCap != 2 || us.Cap != 4 || us.InFlight != 2 {
		t.Fatalf("after the rate limit: EffectiveCap %d, Cap %d, InFlight %d; want 2, 4, 2", us.EffectiveCap, us.Cap, us.InFlight)
	}
	sleepPast(after.Add(retryAfter))
	w := f.req("w", c)
	mustQueueAt(t, f.s, w, 0) // 2 in flight = the effective cap: no probe
	f.release(f.s, "t1", store.Outcome{Success: true})
	mustGrant(t, f.s, w)
	if us := f.unitState(f.s, "u"); us.EffectiveCap != 2 || us.InFlight != 2 {
		t.Errorf("after one success: EffectiveCap %d, InFlight %d; want 2, 2", us.EffectiveCap, us.InFlight)
	}
	mustQueueAt(t, f.s, f.req("x", c), 0)
	f.release(f.s, "t2", store.Outcome{})
	f.release(f.s, "w", store.Outcome{})
	f.cancel(f.s, "x")
}

// testEffectiveCapCreepsBack: after a learned cap, every ecap successes
// raise it by one, until it reaches Cap and stops limiting.
func testEffectiveCapCreepsBack(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 4), "c", 0)
	for i := range 3 {
		mustGrant(t, f.s, f.req(fmt.Sprintf("t%d", i), c))
	}
	_, after := f.release(f.s, "t0", store.Outcome{RateLimited: true, RetryAfter: time.Millisecond})
	sleepPast(after.Add(time.Millisecond))
	f.release(f.s, "t1", store.Outcome{Success: true})
	if us := f.unitState(f.s, "u"); us.EffectiveCap != 2 {
		t.Fatalf("after 1 success: EffectiveCap %d, want 2", us.EffectiveCap)
	}
	f.release(f.s, "t2", store.Outcome{Success: true})
	if us := f.unitState(f.s, "u"); us.EffectiveCap != 3 {
		t.Fatalf("after 2 successes: EffectiveCap %d, want 3", us.EffectiveCap)
	}
	for i := range 3 {
		s := fmt.Sprintf("s%d", i)
		mustGrant(t, f.s, f.req(s, c))
		f.release(f.s, s, store.Outcome{Success: true})
	}
	if us := f.unitState(f.s, "u"); us.EffectiveCap != 0 {
		t.Fatalf("after 5 successes: EffectiveCap %d, want 0 (back at Cap)", us.EffectiveCap)
	}
	for i := range 4 {
		mustGrant(t, f.s, f.req(fmt.Sprintf("f%d", i), c))
	}
	mustQueueAt(t, f.s, f.req("over", c), 0)
	for i := range 4 {
		f.release(f.s, fmt.Sprintf("f%d", i), store.Outcome{})
	}
	f.cancel(f.s, "over")

	// Cap 0 (unlimited): the learned cap limits, and is dropped once it
	// exceeds the in-flight count that was rate limited (3 here).
	z := f.cand(store.Unit{ID: f.name("z")}, "cz", 0)
	for i := range 3 {
		mustGrant(t, f.s, f.req(fmt.Sprintf("z%d", i), z))
	}
	_, after = f.release(f.s, "z0", store.Outcome{RateLimited: true, RetryAfter: time.Millisecond})
	sleepPast(after.Add(time.Millisecond))
	mustQueueAt(t, f.s, f.req("zw", z), 0)
	f.cancel(f.s, "zw")
	f.release(f.s, "z1", store.Outcome{Success: true})
	f.release(f.s, "z2", store.Outcome{Success: true})
	if us := f.unitState(f.s, "z"); us.EffectiveCap != 3 || us.Cap != 0 {
		t.Fatalf("Cap 0 after 2 successes: EffectiveCap %d, Cap %d; want 3, 0", us.EffectiveCap, us.Cap)
	}
	for i := range 3 {
		s := fmt.Sprintf("zs%d", i)
		mustGrant(t, f.s, f.req(s, z))
		f.release(f.s, s, store.Outcome{Success: true})
	}
	if us := f.unitState(f.s, "z"); us.EffectiveCap != 0 {
		t.Errorf("Cap 0 after 5 successes: EffectiveCap %d, want 0", us.EffectiveCap)
	}
}
