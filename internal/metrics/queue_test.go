package metrics

import (
	"testing"
	"time"
)

// TestQueueWaitQuantiles: every class counts, and a quantile is
// interpolated within its bucket as histogram_quantile does.
func TestQueueWaitQuantiles(t *testing.T) {
	m := New()
	if n, waits := m.QueueWaitQuantiles([]float64{0.5}); n != 0 || waits != nil {
		t.Fatalf("before any wait: %d observed, %v; want 0 and none", n, waits)
	}
	w := m.ClassWaits([]string{"interactive", "batch"})
	for range 50 {
		w.Observe(0, 2*time.Millisecond)   // bucket (1 ms, 5 ms]
		w.Observe(1, 200*time.Millisecond) // bucket (100 ms, 250 ms]
	}
	w.Observe(1, time.Hour) // past the last bucket
	n, waits := m.QueueWaitQuantiles([]float64{0.5, 0.95, 1})
	if n != 101 {
		t.Errorf("observed %d, want 101", n)
	}
	// p50: rank 50.5 is 0.5 into (100 ms, 250 ms]'s 50: 100 ms + 150 ms × 0.5/50;
	// p95: rank 95.95, 100 ms + 150 ms × 45.95/50.
	want := []time.Duration{101500 * time.Microsecond, 237850 * time.Microsecond, 300 * time.Second}
	for i := range want {
		if d := waits[i] - want[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("quantile %d = %v, want %v", i, waits[i], want[i])
		}
	}
}
