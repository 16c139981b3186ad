package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ExecutionCounts counts upstream attempts in Executions by endpoint and
// class through counters made once per endpoint (every class at once, so
// a class never seen is exported as 0 and ratios of classes are defined):
// an attempt counts itself without a label lookup or an allocation. Safe
// for concurrent use.
type ExecutionCounts struct {
	vec     *prometheus.CounterVec
	classes []string
	// byEndpoint maps an endpoint ID to its counters, one per class. It is
	// replaced, never changed, so reads take no lock; grow serialises
	// the writers.
	byEndpoint atomic.Pointer[map[string][]prometheus.Counter]
	grow       sync.Mutex
}

// ExecutionCounts returns the counters of Executions for the class names
// classes: Add takes a class by its index in classes.
func (m *Metrics) ExecutionCounts(classes []string) *ExecutionCounts {
	c := &ExecutionCounts{vec: m.Executions, classes: classes}
	c.byEndpoint.Store(&map[string][]prometheus.Counter{})
	return c
}

// Add counts one attempt on endpoint that ended in the class at index
// class. Nil ExecutionCounts (a Handler built without metrics, in tests)
// count nothing.
func (c *ExecutionCounts) Add(endpoint string, class int) {
	if c == nil {
		return
	}
	counters, ok := (*c.byEndpoint.Load())[endpoint]
	if !ok {
		counters = c.add(endpoint)
	}
	counters[class].Inc()
}

// add makes endpoint's counters on its first attempt.
func (c *ExecutionCounts) add(endpoint string) []prometheus.Counter {
	c.grow.Lock()
	defer c.grow.Unlock()
	old := *c.byEndpoint.Load()
	if counters, ok := old[endpoint]; ok {
		return counters
	}
	counters := make([]prometheus.Counter, len(c.classes))
	for i, class := range c.classes {
		counters[i] = c.vec.WithLabelValues(endpoint, class)
	}
	next := make(map[string][]prometheus.Counter, len(old)+1)
	for id, cs := range old {
		next[id] = cs
	}
	next[endpoint] = counters
	c.byEndpoint.Store(&next)
	return counters
}
