package config

import (
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultMaxInflight is the max_inflight of an upstream account that sets
// none (a credential without an account included): a few requests at once,
// so that one line left out does not send every request together and earn
// a storm of 429s.
const DefaultMaxInflight = 2

const (
	defaultMaxBodyBytes         = 4 << 20   // 4 MiB
	defaultMaxInflightBodyBytes = 256 << 20 // 256 MiB
)

// ApplyDefaults fills every unset field that has a default, in place:
//
//   - server: listen 127.0.0.1:8080, admin_listen 127.0.0.1:8081,
//     max_body_bytes 4 MiB, max_inflight_body_bytes 256 MiB (or
//     max_body_bytes, when larger), body_timeout 30s, wait_timeout 30s, shutdown_grace 60s, key_staleness 30s, state.lease_ttl 30s, timeouts connect 5s, first_byte 60s, idle 30s,
//     total 10m; jobs max_age 2h, poll_interval 2s, max_poll_interval 30s (or
//     poll_interval, when larger), retention 24h;
//   - endpoints: each unset timeout inherits the server's; breaker failures 5,
//     open 30s;
//   - accounts: quota_scope account, max_inflight 2 (DefaultMaxInflight),
//     cooldown base 1s and max 60s (or base, when base alone is set above
//     60s); credentials without an account: max_inflight 2, as their own
//     account's;
//   - models: protocol openai.chat, strategy round-robin; deployments: weight 1;
//   - pools: strategy round-robin; keys: priority standard, policy mode default;
//   - models and pools with strategy affinity: affinity ttl 1h, wait
//     interactive 300ms, standard 1s, background 2s, fallback_strategy
//     least-inflight;
//   - billing: currency USD (when the section sets anything); accounts
//     max_inflight 1, on_limit wait;
//   - state: backend memory; database: url sqlite://data/sluice.db (unless
//     url_env or url_file is set);
//   - events (when nats is set): stream SLUICE_USAGE, subject_prefix
//     sluice.usage, duplicate_window 15m; consumer durable sluice-reporting.
//
// Version has no default. Values that are set, even invalid ones such as a
// negative weight, are left for Validate to report. ApplyDefaults is
// idempotent.
func ApplyDefaults(c *Catalog) {
	s := &c.Server
	setString(&s.Listen, "127.0.0.1:8080")
	setString(&s.AdminListen, "127.0.0.1:8081")
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = defaultMaxBodyBytes
	}
	if s.MaxInflightBodyBytes == 0 {
		s.MaxInflightBodyBytes = max(defaultMaxInflightBodyBytes, s.MaxBodyBytes)
	}
	if s.BodyTimeout == 0 {
		s.BodyTimeout = Duration(30 * time.Second)
	}
	if s.WaitTimeout == 0 {
		s.WaitTimeout = Duration(30 * time.Second)
	}
	setDuration(&s.ShutdownGrace, Duration(60*time.Second))
	setDuration(&s.KeyStaleness, Duration(30*time.Second))
	setDuration(&s.Jobs.MaxAge, Duration(2*time.Hour))
	setDuration(&s.Jobs.PollInterval, Duration(2*time.Second))
	setDuration(&s.Jobs.MaxPollInterval, max(Duration(30*time.Second), s.Jobs.PollInterval))
	setDuration(&s.Jobs.Retention, Duration(24*time.Hour))
	if c.State.LeaseTTL == 0 {
		c.State.LeaseTTL = Duration(30 * time.Second)
	}
	inherit(&s.Timeouts, Timeouts{
		Connect:   Duration(5 * time.Second),
		FirstByte: Duration(60 * time.Second),
		Idle:      Duration(30 * time.Second),
		Total:     Duration(10 * time.Minute),
	})
	setString(&c.State.Backend, "memory")
	applyEventsDefaults(&c.Events)
	if d := &c.Database; d.URLEnv == "" && d.URLFile == "" {
		setString(&d.URL, "sqlite://data/sluice.db")
	}

	for i := range c.Endpoints {
		e := &c.Endpoints[i]
		inherit(&e.Timeouts, s.Timeouts)
		if e.Breaker.Failures == 0 {
			e.Breaker.Failures = 5
		}
		setDuration(&e.Breaker.Open, Duration(30*time.Second))
	}
	for i := range c.Accounts {
		a := &c.Accounts[i]
		setString(&a.QuotaScope, string(sluice.QuotaScopeAccount))
		setCap(&a.MaxInflight)
		setDuration(&a.Cooldown.Base, Duration(time.Second))
		// A base above the default max alone is not a mistake worth an error.
		setDuration(&a.Cooldown.Max, max(Duration(time.Minute), a.Cooldown.Base))
	}
	for i := range c.Credentials {
		if cr := &c.Credentials[i]; cr.Account == "" {
			setCap(&cr.MaxInflight)
		}
	}
	for i := range c.Models {
		m := &c.Models[i]
		setString(&m.Strategy, "round-robin")
		applyAffinityDefaults(&m.Affinity, m.Strategy)
		for j := range m.Deployments {
			if m.Deployments[j].Weight == 0 {
				m.Deployments[j].Weight = 1
			}
		}
	}
	for i := range c.Pools {
		setString(&c.Pools[i].Strategy, "round-robin")
		applyAffinityDefaults(&c.Pools[i].Affinity, c.Pools[i].Strategy)
	}
	for i := range c.Keys {
		ApplyKeyDefaults(&c.Keys[i])
	}
	applyBillingDefaults(&c.Billing)
}

// ApplyKeyDefaults fills the unset fields of one key: a key of the catalog
// and one made through the admin API get the same.
func ApplyKeyDefaults(k *Key) {
	setString(&k.Priority, "standard")
	setString(&k.Policy.Mode, sluice.PolicyDefault)
	setString(&k.OnLimit, sluice.OnLimitWait)
}

// inherit sets each unset phase of t to the one in from.
func inherit(t *Timeouts, from Timeouts) {
	setDuration(&t.Connect, from.Connect)
	setDuration(&t.FirstByte, from.FirstByte)
	setDuration(&t.Idle, from.Idle)
	setDuration(&t.Total, from.Total)
}

func setString[S ~string](s *S, def S) {
	if *s == "" {
		*s = def
	}
}

// setCap gives an unset max_inflight of an upstream account DefaultMaxInflight.
func setCap(n **int) {
	if *n == nil {
		def := DefaultMaxInflight
		*n = &def
	}
}

func setDuration(d *Duration, def Duration) {
	if *d == 0 {
		*d = def
	}
}
