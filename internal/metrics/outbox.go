package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outbox counts what the usage events publisher does (docs/events.md):
// events acknowledged by JetStream, by kind and result, and batches it
// failed to publish. Labels are closed sets: event kinds and results.
type Outbox struct {
	published *prometheus.CounterVec // kind, result: ok | duplicate
	failures  prometheus.Counter
}

// WatchOutbox registers the usage events' metrics and returns the
// counters the publisher adds to; pending is read at each scrape as the
// records the database has and the stream has not acknowledged yet, held
// in memory (those on disk only are in sluice_usage_spool_bytes). Call it
// once, and only when events are on.
func (m *Metrics) WatchOutbox(pending func() int64) *Outbox {
	o := &Outbox{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_usage_events_published_total",
			Help: "Usage events JetStream acknowledged, by kind (request, execution, charge, job) and result: ok, or duplicate (a repeat the stream dropped by its message ID, e.g. after a restart replayed the spool).",
		}, []string{"kind", "result"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_usage_event_publish_failures_total",
			Help: "Batches of usage events not acknowledged by JetStream (server down, timeout, refused): their records stay in the spool and are published again.",
		}),
	}
	m.Registry.MustRegister(o.published, o.failures, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_usage_events_pending_records",
		Help: "Usage records the database has whose events JetStream has not acknowledged yet, held in memory; their spool segments stay until it does.",
	}, func() float64 { return float64(pending()) }))
	return o
}

// Published counts one acknowledged event of kind; duplicate when the
// stream already had its ID. Safe on a nil Outbox (no metrics).
func (o *Outbox) Published(kind string, duplicate bool) {
	if o == nil {
		return
	}
	result := "ok"
	if duplicate {
		result = "duplicate"
	}
	o.published.WithLabelValues(kind, result).Inc()
}

// Failed counts a batch that was not published. Safe on a nil Outbox.
func (o *Outbox) Failed() {
	if o != nil {
		o.failures.Inc()
	}
}
