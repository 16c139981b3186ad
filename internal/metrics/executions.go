package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ExecutionCounts counts upstream attempts in Executions by endpoint,
// account, credential and class, and their measured prompt and cached
// tokens in UpstreamTokens by account and credential, through counters
// made once per (endpoint, account, credential) — every class at once, so
// a class never seen is exported as 0 and ratios of classes are defined:
// an attempt counts itself without a label lookup or an allocation. The
// catalog bounds the series: its edges' endpoints and credentials, each
// credential in one account. Safe for concurrent use.
type ExecutionCounts struct {
	executions, tokens *prometheus.CounterVec
	classes            []string
	// bySource maps an attempt's labels to its counters. It is replaced,
	// never changed, so reads take no lock; grow serialises the writers.
	bySource atomic.Pointer[map[source]*sourceCounters]
	grow     sync.Mutex
}

// source is the labels of an attempt's counters: where it ran.
type source struct{ endpoint, account, credential string }

// sourceCounters are the counters of one source: its attempts by class,
// and its credential's tokens (shared with the credential's other
// endpoints: the vector hands out one counter per label set).
type sourceCounters struct {
	classes        []prometheus.Counter
	prompt, cached prometheus.Counter
}

// Attempt is what ExecutionCounts counts of one upstream attempt.
type Attempt struct {
	Endpoint, Account, Credential string
	Class                         int // the index of its class in the classes of ExecutionCounts
	// PromptTokens and CachedTokens (of PromptTokens, read from the
	// upstream's prompt cache) are its measured usage: 0 when the usage
	// was not measured.
	PromptTokens, CachedTokens int64
}

// ExecutionCounts returns the counters of Executions and UpstreamTokens
// for the class names classes: Add takes a class by its index in classes.
func (m *Metrics) ExecutionCounts(classes []string) *ExecutionCounts {
	c := &ExecutionCounts{executions: m.Executions, tokens: m.UpstreamTokens, classes: classes}
	c.bySource.Store(&map[source]*sourceCounters{})
	return c
}

// Add counts the attempt a. Nil ExecutionCounts (a Handler built without
// metrics, in tests) count nothing.
func (c *ExecutionCounts) Add(a Attempt) {
	if c == nil {
		return
	}
	src := source{a.Endpoint, a.Account, a.Credential}
	counters, ok := (*c.bySource.Load())[src]
	if !ok {
		counters = c.add(src)
	}
	counters.classes[a.Class].Inc()
	if a.PromptTokens > 0 {
		counters.prompt.Add(float64(a.PromptTokens))
	}
	if a.CachedTokens > 0 {
		counters.cached.Add(float64(a.CachedTokens))
	}
}

// add makes src's counters on its first attempt.
func (c *ExecutionCounts) add(src source) *sourceCounters {
	c.grow.Lock()
	defer c.grow.Unlock()
	old := *c.bySource.Load()
	if counters, ok := old[src]; ok {
		return counters
	}
	counters := &sourceCounters{classes: make([]prometheus.Counter, len(c.classes)),
		prompt: c.tokens.WithLabelValues(src.account, src.credential, "prompt"),
		cached: c.tokens.WithLabelValues(src.account, src.credential, "cached")}
	for i, class := range c.classes {
		counters.classes[i] = c.executions.WithLabelValues(src.endpoint, src.account, src.credential, class)
	}
	next := make(map[source]*sourceCounters, len(old)+1)
	for s, cs := range old {
		next[s] = cs
	}
	next[src] = counters
	c.bySource.Store(&next)
	return counters
}
