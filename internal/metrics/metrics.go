// Package metrics defines Sluice's Prometheus collectors in one place, so
// names and label sets stay consistent. Labels are stable IDs and codes from
// the catalog, never secrets, keys or free text, which keeps cardinality
// bounded. It depends on the Prometheus client only.
package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every collector. Safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	Requests *prometheus.CounterVec // protocol, code
	// RequestsInvalid counts the requests validation refused before any
	// claim, by protocol and reason (internal/validate's, and
	// untranslatable: no edge's translator can carry it).
	RequestsInvalid *prometheus.CounterVec   // protocol, reason
	RequestDuration *prometheus.HistogramVec // protocol, stream
	Executions      *prometheus.CounterVec   // endpoint, account, credential, class
	Tokens          *prometheus.CounterVec   // alias, kind
	BreakerState    *prometheus.GaugeVec     // endpoint: 0 closed, 1 open, 2 half-open
	CatalogReloads  *prometheus.CounterVec   // result: ok | error
	CatalogFailing  prometheus.Gauge         // 1 while the last reload attempt failed
	CatalogVersion  prometheus.Gauge
	JobsEnded       *prometheus.CounterVec   // protocol, state
	JobRun          *prometheus.HistogramVec // protocol: submit accepted → end
	PolicyFallbacks *prometheus.CounterVec   // key (ID), reason
	// BillingUnavailable counts billed requests refused because the
	// balances could not be read from the ledger store recently enough.
	BillingUnavailable prometheus.Counter
	// Affinity is session affinity's, and the prompt cache's.
	Affinity *Affinity
	// TranslationDropped counts the caller's fields translations left out
	// of the upstream request, in answers that reached the caller, by
	// caller protocol, upstream protocol and field (the caller's name of
	// it, from the translators' fixed lists, so bounded).
	TranslationDropped *prometheus.CounterVec // caller, upstream, field
	// Spend is what settled requests were charged (kind price) and what
	// they cost upstream (kind cost), in micro-units of the catalog's
	// currency, by billing account and alias: both declared by the
	// operator, so bounded (keys and end users never label it). Refusals
	// by code are Requests' codes.
	Spend *prometheus.CounterVec // billing_account, alias, kind
	// QueueWaits is how long requests waited for capacity, by priority
	// class; requests observe it through the ClassWaits made once.
	QueueWaits *prometheus.HistogramVec // class
	// UpstreamTokens sums the measured prompt tokens of upstream
	// attempts, and of them those read from the upstream's prompt cache,
	// by account and credential: the cached share of each is a ratio of
	// two of its series.
	UpstreamTokens *prometheus.CounterVec // account, credential, kind: prompt | cached
	// RedactionFindings counts the values redaction policies found in
	// requests, by detector (a built-in's name or an operator pattern's,
	// both bounded by the catalog) and action; never a value.
	RedactionFindings *prometheus.CounterVec // detector, action: mask | block | log
	// CacheRequests counts the requests whose key or alias has a response
	// cache, by result: hit, miss (looked up, not found), bypass (not
	// cacheable: not deterministic, Cache-Control, a restored redaction).
	CacheRequests *prometheus.CounterVec // result
	// CacheStoredBytes counts the answer bytes the response cache stored;
	// CacheSaved what the upstream would have been paid for the answers
	// hits replayed, by alias.
	CacheStoredBytes prometheus.Counter
	CacheSaved       *prometheus.CounterVec // alias
	// spent caches Spend's counters by spendKey, as *spendSeries: every
	// billed request adds to two, and WithLabelValues checks and hashes
	// its labels and takes the vector's lock on each call.
	spent sync.Map
}

// spendKey is a billing account and an alias.
type spendKey struct{ account, alias string }

// spendSeries are the price and cost counters of one spendKey, each made
// on its first use (a series never added to is not exported).
type spendSeries struct {
	key         spendKey
	price, cost atomic.Pointer[prometheus.Counter]
}

// New registers every collector on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total", Help: "Requests answered, by protocol and outcome code (ok or a public error code).",
		}, []string{"protocol", "code"}),
		RequestsInvalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_invalid_total", Help: "Requests refused by validation before any claim (400 invalid_request), by protocol and reason (empty, shape, role, tool_result, tool_schema, max_tokens, untranslatable, image_input).",
		}, []string{"protocol", "reason"}),
		TranslationDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_translation_dropped_total", Help: "Fields of callers' requests that a translation left out of the upstream request (hints the upstream's protocol has no field for), in answers that reached the caller, by caller protocol, upstream protocol and field.",
		}, []string{"caller", "upstream", "field"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_request_duration_seconds", Help: "Time from request to the end of the answer.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"protocol", "stream"}),
		Executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_executions_total", Help: "Upstream attempts, by endpoint, account, credential and outcome class (ok, rate, auth, billing, endpoint, request, caller_gone).",
		}, []string{"endpoint", "account", "credential", "class"}),
		UpstreamTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_tokens_total", Help: "Measured prompt tokens of upstream attempts (kind prompt), and of them those read from the upstream's prompt cache (kind cached), by account and credential.",
		}, []string{"account", "credential", "kind"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tokens_total", Help: "Tokens measured, by alias and kind (prompt, completion, cached, reasoning).",
		}, []string{"alias", "kind"}),
		BreakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_endpoint_breaker_state", Help: "Endpoint circuit breaker: 0 closed, 1 open, 2 half-open.",
		}, []string{"endpoint"}),
		CatalogReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_catalog_reloads_total", Help: "Catalog reload attempts, by result.",
		}, []string{"result"}),
		CatalogFailing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_catalog_reload_failing", Help: "1 while the newest catalog is invalid and the last good one still serves.",
		}),
		CatalogVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_catalog_version", Help: "Version of the catalog snapshot serving requests.",
		}),
		JobsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_jobs_ended_total", Help: "Async jobs ended, by protocol and state (completed, failed, cancelled, expired).",
		}, []string{"protocol", "state"}),
		JobRun: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_job_run_seconds", Help: "Time from an async job's acceptance upstream to its end, as Sluice learned it.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}, []string{"protocol"}),
		PolicyFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_policy_fallbacks_total",
			Help: "Attempts of a preferred key that ran outside its bound accounts, by key ID and reason (cooling, disabled, no_room, failed:<class>, breaker_open).",
		}, []string{"key", "reason"}),
		BillingUnavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_billing_unavailable_refusals_total",
			Help: "Billed requests refused (503) because the ledger store's balances were not read within the staleness bound.",
		}),
		Spend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_billing_spend_micros_total",
			Help: "What settled requests were charged (kind price, billing_account \"\" when none is billed) and cost upstream (kind cost), in micro-units of billing.currency, by billing account and alias.",
		}, []string{"billing_account", "alias", "kind"}),
		RedactionFindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_redaction_findings_total",
			Help: "Sensitive values redaction policies found in request text, by detector and action (mask, block, log).",
		}, []string{"detector", "action"}),
		CacheRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_cache_requests_total",
			Help: "Requests of keys and aliases with a response cache, by result: hit, miss, bypass (not cacheable).",
		}, []string{"result"}),
		CacheStoredBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_cache_stored_bytes_total",
			Help: "Answer bytes the response cache stored.",
		}),
		CacheSaved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_cache_saved_micros_total",
			Help: "What the upstream would have been paid for the answers cache hits replayed, in micro-units of billing.currency, by alias (0 without a cost for the model).",
		}, []string{"alias"}),
		QueueWaits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_queue_wait_seconds",
			Help:    "Time a request waited for upstream capacity, over all its attempts, until its last grant or until it gave up, by priority class.",
			Buckets: queueWaitBuckets,
		}, []string{"class"}),
	}
	m.Registry.MustRegister(m.QueueWaits)
	m.Registry.MustRegister(m.Requests, m.RequestsInvalid, m.TranslationDropped, m.RequestDuration, m.Executions, m.UpstreamTokens, m.Tokens, m.BreakerState,
		m.CatalogReloads, m.CatalogFailing, m.CatalogVersion, m.JobsEnded, m.JobRun, m.PolicyFallbacks, m.BillingUnavailable, m.Spend, m.RedactionFindings,
		m.CacheRequests, m.CacheStoredBytes, m.CacheSaved,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Affinity = newAffinity()
	m.Registry.MustRegister(m.Affinity.collectors()...)
	return m
}

// WatchBodyBytesHeld reports held at each scrape as the bytes of request
// bodies the data plane holds: read at scrape time, it costs requests
// nothing. Call it once.
func (m *Metrics) WatchBodyBytesHeld(held func() int64) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_request_body_bytes_held",
		Help: "Bytes of request bodies held by requests in flight, counted against server.max_inflight_body_bytes.",
	}, func() float64 { return float64(held()) }))
}

// WatchUsageSetAside reports setAside at each scrape as the count of
// usage records the database refused and the writer set aside (see
// settle.Recorder.SetAside): each is a request whose record and charge
// the database does not have. Call it once.
func (m *Metrics) WatchUsageSetAside(setAside func() int64) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sluice_usage_records_set_aside_total",
		Help: "Usage records the database refused for what they hold, set aside (logged, and kept in the spool's set-aside file) so that the records behind them are written.",
	}, func() float64 { return float64(setAside()) }))
}

// Spent counts a settled request's price and cost (micro-units) for its
// billing account ("" = none) and alias.
func (m *Metrics) Spent(account, alias string, price, cost int64) {
	if price <= 0 && cost <= 0 {
		return
	}
	k := spendKey{account, alias}
	v, ok := m.spent.Load(k)
	if !ok {
		v, _ = m.spent.LoadOrStore(k, &spendSeries{key: k})
	}
	s := v.(*spendSeries)
	if price > 0 {
		m.spend(s, &s.price, "price").Add(float64(price))
	}
	if cost > 0 {
		m.spend(s, &s.cost, "cost").Add(float64(cost))
	}
}

// spend is s's counter of kind held in c, made on its first use; two calls
// racing to make it get the vector's one counter of those labels.
func (m *Metrics) spend(s *spendSeries, c *atomic.Pointer[prometheus.Counter], kind string) prometheus.Counter {
	if p := c.Load(); p != nil {
		return *p
	}
	counter := m.Spend.WithLabelValues(s.key.account, s.key.alias, kind)
	c.Store(&counter)
	return counter
}
