package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
