package ledger

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HistogramError is the bound of a percentile read from a Histogram: it
// is at or above the percentile of the durations themselves (as Percentile
// computes it) and below that value times 1 + HistogramError, give or
// take the rounding of both to the microsecond. The buckets grow by
// 2^(1/8) each, so the error is under 9.1%.
var HistogramError = math.Pow(2, 1.0/8) - 1

// bucketLows are the lowest durations, in microseconds, of the buckets
// of a Histogram: 0, 1, then ⌈2^(i/8)⌉ from where that exceeds the bucket
// before, so each bucket's highest value is below its lowest times 2^(1/8)
// (the ones of a single microsecond hold their value exactly), up to
// 2^53 µs, beyond the longest time.Duration.
var bucketLows = func() []int64 {
	lows := []int64{0, 1}
	for i := 1; ; i++ {
		lo := max(lows[len(lows)-1]+1, int64(math.Ceil(math.Pow(2, float64(i)/8))))
		if lo > 1<<53 {
			return lows
		}
		if lo > lows[len(lows)-1] {
			lows = append(lows, lo)
		}
	}
}()

// bucketOf is the index in bucketLows of the bucket that holds us
// microseconds (a negative duration counts as 0).
func bucketOf(us int64) int {
	return sort.Search(len(bucketLows), func(i int) bool { return bucketLows[i] > us }) - 1
}

// bucketHigh is the highest duration, in microseconds, of bucket i.
func bucketHigh(i int) int64 {
	if i+1 == len(bucketLows) {
		return math.MaxInt64
	}
	return bucketLows[i+1] - 1
}

// Histogram counts durations, to the microsecond, in fixed log-spaced
// buckets (see HistogramError), and keeps the longest: what a daily
// roll-up keeps of its records' latencies in place of the latencies. Two
// histograms add up (Merge) as the sets of durations they count do. The
// zero value is empty and ready to use; a Histogram is not safe for
// concurrent use.
type Histogram struct {
	counts map[int]int64 // bucket index → durations in it
	n      int64
	max    int64 // the longest duration counted, in microseconds
}

// Add counts d.
func (h *Histogram) Add(d time.Duration) {
	us := max(d.Microseconds(), 0)
	if h.counts == nil {
		h.counts = map[int]int64{}
	}
	h.counts[bucketOf(us)]++
	h.n++
	h.max = max(h.max, us)
}

// Merge adds what o counts to h.
func (h *Histogram) Merge(o Histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make(map[int]int64, len(o.counts))
	}
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Times makes h count each duration it counts n (> 0) times: the sum of n
// histograms equal to h.
func (h *Histogram) Times(n int64) {
	for i := range h.counts {
		h.counts[i] *= n
	}
	h.n *= n
}

// Count is how many durations h counts.
func (h *Histogram) Count() int64 { return h.n }

// Percentile is the p-th percentile (0 <= p <= 1) of the durations h
// counts, 0 for none. It is Percentile's interpolation between the two
// nearest durations, each taken as the highest value of its bucket (or
// the longest duration counted, when that is lower): never below the
// exact percentile, and above it by less than HistogramError.
func (h *Histogram) Percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	pos := p * float64(h.n-1)
	lo := int64(math.Floor(pos))
	hi := min(lo+1, h.n-1)
	vlo, vhi := time.Duration(h.ranked(lo))*time.Microsecond, time.Duration(h.ranked(hi))*time.Microsecond
	v := float64(vlo) + (pos-float64(lo))*float64(vhi-vlo) // in nanoseconds, as Percentile, to round alike
	return time.Duration(v).Round(time.Microsecond)
}

// ranked is the upper estimate, in microseconds, of the duration of rank
// k (0: the shortest) among those h counts.
func (h *Histogram) ranked(k int64) int64 {
	var seen int64
	for _, i := range slices.Sorted(maps.Keys(h.counts)) {
		if seen += h.counts[i]; seen > k {
			return min(bucketHigh(i), h.max)
		}
	}
	return h.max
}

// String is h's text form, which ParseHistogram reads back: the longest
// duration in microseconds, then "bucket:count" of each bucket that
// counts any, by bucket, space-separated; "" when empty. Equal histograms
// have equal text, so a store may group rows by it.
func (h Histogram) String() string {
	if h.n == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.FormatInt(h.max, 10))
	for _, i := range slices.Sorted(maps.Keys(h.counts)) {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(h.counts[i], 10))
	}
	return b.String()
}

// ParseHistogram reads what Histogram.String wrote.
func ParseHistogram(s string) (Histogram, error) {
	var h Histogram
	if s == "" {
		return h, nil
	}
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return Histogram{}, fmt.Errorf("histogram %q: no buckets", s)
	}
	longest, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || longest < 0 {
		return Histogram{}, fmt.Errorf("histogram %q: bad longest duration", s)
	}
	h.counts = make(map[int]int64, len(fields)-1)
	top := 0 // the highest bucket
	for _, f := range fields[1:] {
		is, ns, ok := strings.Cut(f, ":")
		i, err1 := strconv.Atoi(is)
		n, err2 := strconv.ParseInt(ns, 10, 64)
		if !ok || err1 != nil || err2 != nil || i < 0 || i >= len(bucketLows) || n <= 0 || bucketLows[i] > longest {
			return Histogram{}, fmt.Errorf("histogram %q: bad bucket %q", s, f)
		}
		h.counts[i] += n
		h.n += n
		top = max(top, i)
	}
	if bucketHigh(top) < longest {
		return Histogram{}, fmt.Errorf("histogram %q: the longest duration is in no bucket", s)
	}
	h.max = longest
	return h, nil
}
