package breaker

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const openFor = 30 * time.Second

// check fails the test if b's State is not want.
func check(t *testing.T, b *Breaker, want State) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("State() = %v, want %v", got, want)
	}
}

// allows returns how many of n concurrent Allow calls got true.
func allows(b *Breaker, n int) int {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if b.Allow() {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(admitted.Load())
}

// tripped returns a breaker that has just opened after 3 failures.
func tripped(t *testing.T) *Breaker {
	t.Helper()
	b := New(3, openFor)
	for range 3 {
		b.Failure()
	}
	check(t, b, Open)
	return b
}

func TestOpensAfterConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(3, openFor)
		for i := range 2 {
			b.Failure()
			if !b.Allow() {
				t.Fatalf("Allow after %d failures = false, want true", i+1)
			}
			check(t, b, Closed)
		}
		b.Failure()
		check(t, b, Open)
		if b.Allow() {
			t.Error("Allow when open = true, want false")
		}
	})
}

func TestSuccessResetsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(3, openFor)
		for range 5 {
			b.Failure()
			b.Failure()
			b.Success()
		}
		check(t, b, Closed)
		b.Failure()
		b.Failure()
		check(t, b, Closed)
		b.Failure()
		check(t, b, Open)
	})
}

func TestOpenRejectsUntilPeriodEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tripped(t)
		time.Sleep(openFor - time.Nanosecond)
		if n := allows(b, 50); n != 0 {
			t.Errorf("Allow just before the open period ends: %d admitted, want 0", n)
		}
		check(t, b, Open)
		time.Sleep(time.Nanosecond)
		check(t, b, HalfOpen)
	})
}

func TestOneProbeAfterOpenPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tripped(t)
		time.Sleep(openFor)
		if n := allows(b, 100); n != 1 {
			t.Errorf("concurrent Allow after the open period: %d admitted, want 1", n)
		}
		check(t, b, HalfOpen)
		time.Sleep(openFor / 2)
		if n := allows(b, 100); n != 0 {
			t.Errorf("Allow while the probe is out: %d admitted, want 0", n)
		}
	})
}

func TestProbeSuccessCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tripped(t)
		time.Sleep(openFor)
		if !b.Allow() {
			t.Fatal("probe not admitted")
		}
		b.Success()
		check(t, b, Closed)
		if n := allows(b, 10); n != 10 {
			t.Errorf("Allow when closed: %d of 10 admitted", n)
		}
		b.Failure()
		b.Failure()
		check(t, b, Closed) // the count started again from zero
	})
}

func TestProbeFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tripped(t)
		time.Sleep(openFor)
		if !b.Allow() {
			t.Fatal("probe not admitted")
		}
		time.Sleep(time.Second)
		b.Failure()
		check(t, b, Open)
		time.Sleep(openFor - time.Nanosecond) // a whole new period, from the failure
		if b.Allow() {
			t.Error("Allow before the new open period ends = true, want false")
		}
		time.Sleep(time.Nanosecond)
		if n := allows(b, 20); n != 1 {
			t.Errorf("Allow after the new open period: %d admitted, want 1", n)
		}
	})
}

func TestSilentProbeLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tripped(t)
		time.Sleep(openFor)
		if !b.Allow() {
			t.Fatal("probe not admitted")
		}
		time.Sleep(openFor - time.Nanosecond)
		if b.Allow() {
			t.Error("second probe admitted during the first one's lease")
		}
		time.Sleep(time.Nanosecond)
		if n := allows(b, 20); n != 1 {
			t.Errorf("Allow after the lease ran out: %d admitted, want 1", n)
		}
	})
}

func TestCancelReleasesProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tripped(t)
		b.Cancel() // open: nothing to release
		if b.Allow() {
			t.Fatal("Cancel on an open breaker admitted a request")
		}
		time.Sleep(openFor)
		if !b.Allow() {
			t.Fatal("probe not admitted")
		}
		b.Cancel()
		check(t, b, HalfOpen)
		if n := allows(b, 20); n != 1 {
			t.Errorf("Allow after the probe was cancelled: %d admitted, want 1", n)
		}
	})
}

func TestOpenIgnoresReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tripped(t)
		time.Sleep(openFor / 2)
		b.Success() // from a request admitted before the breaker opened
		check(t, b, Open)
		b.Failure() // does not extend the open period
		time.Sleep(openFor / 2)
		check(t, b, HalfOpen)
	})
}

func TestCancelWhenClosedDoesNothing(t *testing.T) {
	b := New(1, openFor)
	b.Cancel()
	check(t, b, Closed)
	b.Failure()
	check(t, b, Open)
}

func TestThresholdAtLeastOne(t *testing.T) {
	for _, failures := range []int{-1, 0, 1} {
		b := New(failures, openFor)
		b.Failure()
		if got := b.State(); got != Open {
			t.Errorf("New(%d, …) after one failure: State() = %v, want %v", failures, got, Open)
		}
	}
}

func TestStateString(t *testing.T) {
	tests := []struct {
		give State
		want string
	}{
		{Closed, "closed"},
		{Open, "open"},
		{HalfOpen, "half-open"},
		{State(9), "unknown"},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("State(%d).String() = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// TestConcurrentUse runs many clients through open, half-open and closed
// cycles for the race detector, then checks the breaker still works.
func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(5, time.Second)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 2000 {
					_ = b.State()
					if !b.Allow() {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					time.Sleep(time.Millisecond)
					switch (g + i) % 7 {
					case 0, 1, 2:
						b.Failure()
					case 3:
						b.Cancel()
					default:
						b.Success()
					}
				}
			})
		}
		wg.Wait()
		time.Sleep(time.Second)
		if n := allows(b, 20); n != 1 && n != 20 { // half-open: one probe; closed: all
			t.Errorf("Allow after the run: %d of 20 admitted, want 1 or 20", n)
		}
		b.Success()
		check(t, b, Closed)
	})
}

func BenchmarkAllowClosed(b *testing.B) {
	br := New(5, openFor)
	b.ReportAllocs()
	for b.Loop() {
		if !br.Allow() {
			b.Fatal("closed breaker refused")
		}
	}
}

func BenchmarkAllowSuccessClosedParallel(b *testing.B) {
	br := New(5, openFor)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if br.Allow() {
				br.Success()
			}
		}
	})
}

func BenchmarkAllowOpen(b *testing.B) {
	br := New(1, time.Hour)
	br.Failure()
	b.ReportAllocs()
	for b.Loop() {
		if br.Allow() {
			b.Fatal("open breaker allowed")
		}
	}
}
