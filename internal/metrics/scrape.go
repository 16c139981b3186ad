package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchUsageBacklog reports at each scrape what the usage writer holds
// that the database does not have yet: spoolBytes, the bytes of the
// spool's segment files on local disk (bounded at 1 GiB, past which
// records are held in memory only), and pending, the records waiting in
// memory to be written. Read at scrape time, they cost requests nothing.
// Call it once.
func (m *Metrics) WatchUsageBacklog(spoolBytes, pending func() int64) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_usage_spool_bytes",
			Help: "Bytes of usage records in the local spool: records the database does not have yet, and up to one 4 MiB segment of records it has (a segment is deleted once all its records are stored).",
		}, func() float64 { return float64(spoolBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_usage_pending_records",
			Help: "Usage records waiting in memory for the database: queued, or in a batch it has not taken yet.",
		}, func() float64 { return float64(pending()) }),
	)
}

// WatchBillingBalances reports at each scrape, per billing account, the
// balance (micro-units) each calls yield with. Call it once.
func (m *Metrics) WatchBillingBalances(balances func(yield func(account string, micros int64))) {
	m.Registry.MustRegister(&balanceCollector{balances: balances, desc: prometheus.NewDesc("sluice_billing_balance_micros",
		"A billing account's balance as this replica admits on it, in micro-units of billing.currency: the ledger's at its last read (every second), less the charges and the worst cases of running requests this replica holds that the ledger does not have yet. Accounts appear once they have an entry.",
		[]string{"billing_account"}, nil)})
}

// balanceCollector exports the balances read at scrape time.
type balanceCollector struct {
	balances func(yield func(account string, micros int64))
	desc     *prometheus.Desc
}

func (c *balanceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *balanceCollector) Collect(ch chan<- prometheus.Metric) {
	c.balances(func(account string, micros int64) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(micros), account)
	})
}
