package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// poolCollector exports account and credential state at scrape time, read
// from the shared store, so every replica reports the cluster's view.
type poolCollector struct {
	pool *pool
	log  *slog.Logger

	accountInFlight, accountCap, accountWaiting, accountCooling, accountProbe, accountStatus *prometheus.Desc
	accountOldest, accountTenantWaiting                                                      *prometheus.Desc
	credentialInFlight, credentialStatus                                                     *prometheus.Desc
	cooled                                                                                   *prometheus.Desc
}

func newPoolCollector(p *pool, log *slog.Logger) *poolCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &poolCollector{
		pool: p, log: log,
		accountInFlight:      d("sluice_account_inflight", "Claims held on the account (all replicas).", "account"),
		accountCap:           d("sluice_account_cap", "The account's in-flight cap (0 = unlimited).", "account"),
		accountWaiting:       d("sluice_account_queue_depth", "Requests waiting that could use the account, by priority class.", "account", "class"),
		accountOldest:        d("sluice_account_queue_oldest_wait_seconds", "Age of the oldest request waiting for the account, by priority class.", "account", "class"),
		accountTenantWaiting: d("sluice_account_queue_depth_by_tenant", "Requests waiting that could use the account, by tenant.", "account", "tenant"),
		accountCooling:       d("sluice_account_cooldown_until_seconds", "Unix time the account's cooldown ends (0 = not cooling).", "account"),
		accountProbe:         d("sluice_account_probe", "1 for the account's probe state: available or in_flight.", "account", "state"),
		accountStatus:        d("sluice_account_status", "1 for the account's status.", "account", "status"),
		credentialInFlight:   d("sluice_credential_inflight", "Claims held by the credential (all replicas).", "credential"),
		credentialStatus:     d("sluice_credential_status", "1 for the credential's status, with the reason it has it.", "credential", "status", "reason"),
		cooled: d("sluice_upstream_cooldown_seconds_total",
			"Seconds of cooldown set by rate limits, by the unit that cooled: an account (credential and model \"\"), a credential of a quota_scope credential account, or a model of an account. Each rate limit adds, as it lands, the time it moved the unit's cooldown end. Read from the shared store: every replica reports the cluster's value.",
			"account", "credential", "model"),
	}
}

// Describe sends every descriptor.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.accountInFlight, c.accountCap, c.accountWaiting, c.accountOldest, c.accountTenantWaiting, c.accountCooling,
		c.accountProbe, c.accountStatus, c.credentialInFlight, c.credentialStatus, c.cooled} {
		ch <- d
	}
}

// Collect reads the pool once per scrape.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	accounts, err := c.pool.Accounts(ctx)
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "account metrics unavailable", slog.Any("err", err))
		return
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	cooled := func(seconds float64, account, credential, model string) {
		ch <- prometheus.MustNewConstMetric(c.cooled, prometheus.CounterValue, seconds, account, credential, model)
	}
	scopes := make(map[string]string, len(accounts)) // account → quota scope
	for _, a := range accounts {
		scopes[a.ID] = a.QuotaScope
		g(c.accountInFlight, float64(a.InFlight), a.ID)
		g(c.accountCap, float64(a.Cap), a.ID)
		for _, class := range sluice.Priorities {
			g(c.accountWaiting, float64(a.WaitingByClass[class]), a.ID, class)
			age := 0.0
			if t, ok := a.OldestWaitByClass[class]; ok {
				age = time.Since(t).Seconds()
			}
			g(c.accountOldest, age, a.ID, class)
		}
		for tenant, n := range a.WaitingByTenant {
			g(c.accountTenantWaiting, float64(n), a.ID, tenant)
		}
		until := 0.0
		if !a.CoolingUntil.IsZero() {
			until = float64(a.CoolingUntil.Unix())
		}
		g(c.accountCooling, until, a.ID)
		if a.Probe != "" {
			g(c.accountProbe, 1, a.ID, a.Probe)
		}
		g(c.accountStatus, 1, a.ID, string(a.Status))
		if a.QuotaScope == string(sluice.QuotaScopeAccount) {
			cooled(a.CooledSeconds, a.ID, "", "")
		}
		for _, m := range a.Models {
			cooled(m.CooledSeconds, a.ID, "", m.Model)
		}
	}
	creds, err := c.pool.Credentials(ctx)
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "credential metrics unavailable", slog.Any("err", err))
		return
	}
	for _, cr := range creds {
		g(c.credentialInFlight, float64(cr.InFlight), cr.ID)
		g(c.credentialStatus, 1, cr.ID, string(cr.Status), cr.Reason)
		if scopes[cr.Account] == string(sluice.QuotaScopeCredential) { // else its account's unit cools, counted above
			cooled(cr.CooledSeconds, cr.Account, cr.ID, "")
		}
	}
}
