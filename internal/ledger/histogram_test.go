package ledger_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
)

// histogramSets are sets of durations whose percentiles a Histogram must
// bound: a few, many spread over decades, equal ones, sub-millisecond
// ones, zeros, and ones past the last bucket.
func histogramSets() map[string][]time.Duration {
	rng := rand.New(rand.NewPCG(1, 2))
	spread := make([]time.Duration, 5000)
	for i := range spread {
		spread[i] = time.Duration(rng.ExpFloat64() * float64(800*time.Millisecond)).Truncate(time.Microsecond)
	}
	return map[string][]time.Duration{
		"One":        {1250 * time.Millisecond},
		"Two":        {time.Millisecond, time.Second},
		"Spread":     spread,
		"Equal":      slices.Repeat([]time.Duration{900 * time.Millisecond}, 100),
		"Micros":     {0, time.Microsecond, 2 * time.Microsecond, 3 * time.Microsecond, 17 * time.Microsecond},
		"Zeros":      {0, 0, 0, time.Second},
		"PastBucket": {time.Second, 20 * 24 * time.Hour, 400 * 24 * time.Hour},
	}
}

func TestHistogramPercentileIsAnUpperBound(t *testing.T) {
	for name, ds := range histogramSets() {
		t.Run(name, func(t *testing.T) {
			var h ledger.Histogram
			for _, d := range ds {
				h.Add(d)
			}
			sorted := slices.Sorted(slices.Values(ds))
			for _, p := range []float64{0, 0.01, 0.5, 0.95, 0.99, 1} {
				got, exact := h.Percentile(p), ledger.Percentile(sorted, p)
				if got < exact || float64(got) > float64(exact)*(1+ledger.HistogramError)+float64(time.Microsecond) {
					t.Errorf("Percentile(%v) = %v, exact %v: want in [exact, exact × %.4f]", p, got, exact, 1+ledger.HistogramError)
				}
			}
			if got, want := h.Percentile(1), sorted[len(sorted)-1]; got != want {
				t.Errorf("Percentile(1) = %v, want the longest, %v", got, want)
			}
		})
	}
}

func TestHistogramOfNothing(t *testing.T) {
	var h ledger.Histogram
	if got := h.Percentile(0.5); got != 0 || h.Count() != 0 || h.String() != "" {
		t.Errorf("empty histogram: Percentile = %v, Count = %d, String = %q; want 0, 0, \"\"", got, h.Count(), h.String())
	}
}

func TestHistogramMergeAndTimesAddUp(t *testing.T) {
	sets := histogramSets()
	var a, b, both, thrice ledger.Histogram
	for _, d := range sets["Spread"] {
		a.Add(d)
		both.Add(d)
	}
	for _, d := range sets["Two"] {
		b.Add(d)
		both.Add(d)
	}
	for range 3 {
		for _, d := range sets["Two"] {
			thrice.Add(d)
		}
	}
	merged := a
	merged.Merge(b)
	if merged.String() != both.String() || merged.Count() != int64(len(sets["Spread"])+2) {
		t.Errorf("a.Merge(b) = %q, want %q", merged.String(), both.String())
	}
	b.Times(3)
	if b.String() != thrice.String() {
		t.Errorf("Times(3) = %q, want %q", b.String(), thrice.String())
	}
}

func TestHistogramTextRoundTrips(t *testing.T) {
	for name, ds := range histogramSets() {
		var h ledger.Histogram
		for _, d := range ds {
			h.Add(d)
		}
		back, err := ledger.ParseHistogram(h.String())
		if err != nil || back.String() != h.String() || back.Percentile(0.95) != h.Percentile(0.95) {
			t.Errorf("%s: ParseHistogram(%q) = %q, %v", name, h.String(), back.String(), err)
		}
	}
	for _, bad := range []string{"x", "5 1", "5 1:0", "5 -1:2", "5 1:x", "3 100:1", "5 99999:1", "-1 0:1", " ", "5", "5000 1:1"} {
		if _, err := ledger.ParseHistogram(bad); err == nil {
			t.Errorf("ParseHistogram(%q) = nil error, want one", bad)
		}
	}
}

func FuzzParseHistogram(f *testing.F) {
	for _, ds := range histogramSets() {
		var h ledger.Histogram
		for _, d := range ds {
			h.Add(d)
		}
		f.Add(h.String())
	}
	f.Add("5 1:0")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ledger.ParseHistogram(s)
		if err != nil {
			return
		}
		again, err := ledger.ParseHistogram(h.String())
		if err != nil || again.String() != h.String() {
			t.Errorf("ParseHistogram(%q).String() = %q, which reads back as %q, %v", s, h.String(), again.String(), err)
		}
		_ = h.Percentile(0.5)
	})
}
