package capacity

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

func TestServiceRateSamplesOnlyIntervalsAWaiterSawWhole(t *testing.T) {
	var r serviceRates
	t0 := time.Unix(1000, 0)
	r.granted("d", "q", time.Time{}, t0) // at its first try: room, no sample
	if iv := r.interval("d", "q"); iv != 0 {
		t.Fatalf("interval after a first-try grant = %v, want none", iv)
	}
	// Queued after the last grant: the interval may hold idle time.
	r.granted("d", "q", t0.Add(time.Hour), t0.Add(time.Hour+time.Second))
	if iv := r.interval("d", "q"); iv != 0 {
		t.Fatalf("interval after a grant to a ticket queued after the last = %v, want none", iv)
	}
	last := t0.Add(time.Hour + time.Second)
	r.granted("d", "q", last.Add(-time.Millisecond), last.Add(100*time.Millisecond))
	if iv := r.interval("d", "q"); iv != 100*time.Millisecond {
		t.Fatalf("first sample = %v, want 100ms", iv)
	}
	last = last.Add(100 * time.Millisecond)
	r.granted("d", "q", last.Add(-time.Second), last.Add(200*time.Millisecond))
	if iv := r.interval("d", "q"); iv != 110*time.Millisecond {
		t.Fatalf("interval after a 200ms sample = %v, want the EWMA 110ms", iv)
	}
	if iv := r.interval("d", "other"); iv != 0 {
		t.Fatalf("another queue's interval = %v, want none", iv)
	}
}

// A request whose deadline has passed tries once: refused, it leaves no
// ticket behind, and its Retry-After counts the tickets ahead of it at the
// queue's measured interval.
func TestTryOnceEstimatesFromTheQueueAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, s := newEngine(t)
		ctx := t.Context()
		cands := unit("a", 1)
		held, err := e.Wait(ctx, acquire("t0"), time.Now().Add(time.Second), fixed(cands))
		if err != nil {
			t.Fatal(err)
		}
		// Two waiters, served 50ms apart.
		granted := make(chan *Claim, 2)
		for _, id := range []string{"t1", "t2"} {
			go func() {
				c, err := e.Wait(ctx, acquire(id), time.Now().Add(5*time.Second), fixed(cands))
				if err != nil {
					t.Error(err)
				}
				granted <- c
			}()
			waitFor(t, func() bool { return waiting(t, s, "a") == map[string]int{"t1": 1, "t2": 2}[id] })
		}
		time.Sleep(50 * time.Millisecond)
		held.Release(ctx, store.Outcome{Success: true})
		c1 := <-granted
		time.Sleep(50 * time.Millisecond)
		c1.Release(ctx, store.Outcome{Success: true})
		c2 := <-granted // t2 waited through the interval since t1's grant: one sample
		iv := e.rates.interval("d", "q")
		if iv != 50*time.Millisecond {
			t.Fatalf("measured interval = %v, want 50ms", iv)
		}
		// Two more waiters queue behind c2's holder; a try-once arrives third.
		for _, id := range []string{"t3", "t4"} {
			go func() {
				if c, err := e.Wait(ctx, acquire(id), time.Now().Add(5*time.Second), fixed(cands)); err == nil {
					c.Release(ctx, store.Outcome{})
				}
			}()
			waitFor(t, func() bool { return waiting(t, s, "a") == map[string]int{"t3": 1, "t4": 2}[id] })
		}
		start := time.Now()
		_, err = e.Wait(ctx, acquire("t5"), start, fixed(cands))
		se, ok := errors.AsType[*sluice.Error](err)
		if !ok || se.Code != sluice.CodeCapacityWaitTimeout {
			t.Fatalf("try once = %v, want capacity_wait_timeout", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("try once took %v, want at once", d)
		}
		if want := 3 * iv; se.RetryAfter != want {
			t.Errorf("RetryAfter = %v, want 3 × %v (two ahead, and itself)", se.RetryAfter, iv)
		}
		if n := waiting(t, s, "a"); n != 2 {
			t.Errorf("waiting after the try once = %d, want 2: it left no ticket", n)
		}
		c2.Release(ctx, store.Outcome{})
	})
}

func waiting(t *testing.T, s store.Inspector, unit string) int {
	t.Helper()
	us, err := s.Units(t.Context(), "d", []string{unit})
	if err != nil || len(us) != 1 {
		t.Fatalf("Units = %v, %v", us, err)
	}
	return us[0].Waiting
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
