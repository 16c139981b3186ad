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

// testEffectiveCapCreepsBack: after a learned cap, the successes of calls
// that were in flight at the 429 do not count; then ten rounds of the cap
// raise it by one, and a hundred before it retries the concurrency that was
// rate limited; it stops limiting at Cap (or, with Cap 0, above that
// concurrency).
func testEffectiveCapCreepsBack(t *testing.T, f *fixture) {
	for _, tt := range []struct {
		name  string
		limit int
	}{{"u", 4}, {"z", 0}} {
		c := f.cand(f.unit(tt.name, tt.limit), "c"+tt.name, 0)
		for i := range 3 {
			mustGrant(t, f.s, f.req(fmt.Sprintf("%s-t%d", tt.name, i), c))
		}
		_, after := f.release(f.s, tt.name+"-t0", store.Outcome{RateLimited: true, RetryAfter: time.Millisecond})
		sleepPast(after.Add(time.Millisecond))
		f.release(f.s, tt.name+"-t1", store.Outcome{Success: true})
		f.release(f.s, tt.name+"-t2", store.Outcome{Success: true})
		if us := f.unitState(f.s, tt.name); us.EffectiveCap != 2 {
			t.Fatalf("%s after the calls in flight succeeded: EffectiveCap %d, want 2 (they started before the lesson)", tt.name, us.EffectiveCap)
		}
		// 2 → 3 retries the concurrency that was rate limited (3): 100 rounds.
		if n := successesUntilChange(t, f, c, tt.name); n != 200 {
			t.Errorf("%s: successes to raise 2 → 3 = %d, want 200", tt.name, n)
		}
		if us := f.unitState(f.s, tt.name); us.EffectiveCap != 3 {
			t.Fatalf("%s: EffectiveCap %d, want 3", tt.name, us.EffectiveCap)
		}
		if n := successesUntilChange(t, f, c, tt.name); n != 300 {
			t.Errorf("%s: successes to raise 3 → 4 = %d, want 300", tt.name, n)
		}
		if us := f.unitState(f.s, tt.name); us.EffectiveCap != 0 {
			t.Fatalf("%s: EffectiveCap %d, want 0 (no longer limiting)", tt.name, us.EffectiveCap)
		}
	}
}

// successesUntilChange runs one successful call at a time on c until the
// unit's effective cap changes, and returns how many it took.
func successesUntilChange(t *testing.T, f *fixture, c store.Candidate, unit string) int {
	t.Helper()
	start := f.unitState(f.s, unit).EffectiveCap
	for n := 1; n <= 1000; n++ {
		id := fmt.Sprintf("%s-s%d-%d", unit, start, n)
		mustGrant(t, f.s, f.req(id, c))
		f.release(f.s, id, store.Outcome{Success: true})
		if f.unitState(f.s, unit).EffectiveCap != start {
			return n
		}
	}
	t.Fatalf("%s: effective cap %d never changed", unit, start)
	return 0
}
