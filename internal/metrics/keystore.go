package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WatchKeyStore registers the metrics of the refresh of the stored keys
// and suspensions: their age, computed at each scrape from refreshedAt
// (when the last refresh succeeded), so it keeps growing while refreshes
// fail; and the count of failed refreshes, which the
// caller adds to through the counter returned. Call it once.
func (m *Metrics) WatchKeyStore(refreshedAt func() time.Time) (failures prometheus.Counter) {
	failures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_key_store_refresh_failures_total",
		Help: "Refreshes of the stored keys and suspensions from the database that failed.",
	})
	m.Registry.MustRegister(failures, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_key_store_age_seconds",
		Help: "Seconds since this replica last read its stored keys and suspensions; past server.key_staleness, data-plane requests get 503 state_unavailable.",
	}, func() float64 { return time.Since(refreshedAt()).Seconds() }))
	return failures
}
