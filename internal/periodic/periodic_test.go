package periodic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/periodic"
)

// TestRun checks that f runs once per interval, not at once, and that Run
// returns as soon as ctx ends and calls f no more after that.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var calls atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			periodic.Run(ctx, time.Second, func(fctx context.Context) {
				if fctx != ctx {
					t.Error("f got a context other than Run's")
				}
				calls.Add(1)
			})
		}()

		synctest.Wait()
		if got := calls.Load(); got != 0 {
			t.Fatalf("calls before the first interval = %d, want 0", got)
		}
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		if got := calls.Load(); got != 3 {
			t.Fatalf("calls after 3 intervals = %d, want 3", got)
		}

		cancel()
		synctest.Wait() // every goroutine of the bubble is blocked: Run must have returned
		select {
		case <-done:
		default:
			t.Fatal("Run still running after ctx ended")
		}
		time.Sleep(5 * time.Second)
		if got := calls.Load(); got != 3 {
			t.Errorf("calls after Run returned = %d, want 3", got)
		}
	})
}

// TestRunSlowCall checks that calls do not overlap and that the ticks a slow
// call missed are dropped rather than run back to back.
func TestRunSlowCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var calls, running atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			periodic.Run(ctx, time.Second, func(context.Context) {
				if running.Add(1) != 1 {
					t.Error("f called while a call was still running")
				}
				calls.Add(1)
				time.Sleep(2500 * time.Millisecond)
				running.Add(-1)
			})
		}()
		// Calls start at 1s, 4s (the first tick after the 1s call ends at
		// 3.5s) and 7s.
		time.Sleep(7*time.Second + time.Millisecond)
		synctest.Wait()
		if got := calls.Load(); got != 3 {
			t.Errorf("calls after 7s = %d, want 3", got)
		}
		cancel()
		<-done
	})
}

// TestRunEndsDuringCall checks that Run returns once a call in progress when
// ctx ends returns, without another call though ticks are due. Run then sees
// a due tick and the end of ctx together, so the check is repeated: a Run
// that let select choose would call f again about every other time.
func TestRunEndsDuringCall(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			var calls atomic.Int32
			done := make(chan struct{})
			go func() {
				defer close(done)
				periodic.Run(ctx, time.Second, func(ctx context.Context) {
					calls.Add(1)
					<-ctx.Done()
					time.Sleep(3 * time.Second)
				})
			}()
			time.Sleep(time.Second + time.Millisecond)
			cancel()
			<-done
			if got := calls.Load(); got != 1 {
				t.Errorf("calls = %d, want 1", got)
			}
		})
	}
}
