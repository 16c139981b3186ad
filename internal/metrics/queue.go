package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// queueWaitBuckets run from "no wait" to past the longest class wait an
// operator is likely to set (server.priorities, minutes for background).
var queueWaitBuckets = []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// ClassWaits observes queue waits by priority class through observers made
// once, so a request observes its wait without a label lookup. Safe for
// concurrent use.
type ClassWaits []prometheus.Observer

// ClassWaits returns the observers of QueueWaits for classes, in their
// order: ClassWaits.Observe takes a class by its index in classes.
func (m *Metrics) ClassWaits(classes []string) ClassWaits {
	w := make(ClassWaits, len(classes))
	for i, class := range classes {
		w[i] = m.QueueWaits.WithLabelValues(class)
	}
	return w
}

// Observe records that a request of the class at index class waited d.
// Nil ClassWaits (a Handler built without metrics, in tests) observe
// nothing.
func (w ClassWaits) Observe(class int, d time.Duration) {
	if w != nil {
		w[class].Observe(d.Seconds())
	}
}

// QueueWaitQuantiles estimates the quantiles qs (each from 0 to 1) of the
// queue waits this process observed since it started, every class
// together, as PromQL's histogram_quantile does: linearly within the
// bucket that holds each, the largest finite bound past the last. It
// returns how many waits were observed, and no quantiles without any.
func (m *Metrics) QueueWaitQuantiles(qs []float64) (observed uint64, waits []time.Duration) {
	bounds := queueWaitBuckets
	counts := make([]uint64, len(bounds)) // cumulative, every class summed
	ch := make(chan prometheus.Metric, 16)
	go func() {
		m.QueueWaits.Collect(ch)
		close(ch)
	}()
	for metric := range ch {
		var d dto.Metric
		if err := metric.Write(&d); err != nil || d.Histogram == nil {
			continue
		}
		observed += d.Histogram.GetSampleCount()
		for i, b := range d.Histogram.Bucket {
			counts[i] += b.GetCumulativeCount()
		}
	}
	if observed == 0 {
		return 0, nil
	}
	for _, q := range qs {
		waits = append(waits, bucketQuantile(q, bounds, counts, observed))
	}
	return observed, waits
}

// bucketQuantile is the q quantile of observed values counted in
// cumulative buckets with upper bounds.
func bucketQuantile(q float64, bounds []float64, cumulative []uint64, observed uint64) time.Duration {
	rank := q * float64(observed)
	lower, below := 0.0, 0.0
	for i, upper := range bounds {
		n := float64(cumulative[i])
		if n >= rank && n > below {
			return seconds(lower + (upper-lower)*(rank-below)/(n-below))
		}
		lower, below = upper, n
	}
	return seconds(bounds[len(bounds)-1])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
