package pipeline

import (
	"fmt"
	"maps"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

// compileKeys compiles the catalog's keys into s: each key as the keyring
// knows it (StaticKeys) and its per-key policy.
func (s *Snapshot) compileKeys(c *config.Catalog, lookupEnv func(string) (string, bool)) error {
	for i := range c.Keys {
		k, err := compileKey(&c.Keys[i], lookupEnv)
		if err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
		kp, err := s.compileKeyPolicy(k)
		if err != nil {
			return fmt.Errorf("keys[%s].policy: %w", k.ID, err)
		}
		s.keys[k.ID] = kp
		s.keyLimit(k)
		s.StaticKeys = append(s.StaticKeys, k)
	}
	return nil
}

// compileKey is the catalog's key k as the keyring and the admin API see it.
func compileKey(k *config.Key, lookupEnv func(string) (string, bool)) (*sluice.Key, error) {
	secret, err := k.Secret(lookupEnv)
	if err != nil {
		return nil, err
	}
	p := k.Policy
	out := &sluice.Key{
		ID: k.ID, Name: k.Name, Tenant: k.Tenant, Hash: authn.Hash(secret), Prefix: authn.DisplayPrefix(secret),
		Status: sluice.KeyActive, Models: k.Models, Priority: k.Priority, Static: true,
		Labels: k.Labels,
		Policy: sluice.RoutePolicy{Mode: p.Mode, Accounts: p.Accounts, Pool: p.Pool, Fallback: p.Fallback, Wait: p.Wait.D()},
		Limits: sluice.Limits(k.Limits), UserLimits: sluice.Limits(k.UserLimits),
		Task: k.Task, Tasks: k.Tasks, Paths: k.Paths, ServiceTiers: k.ServiceTiers, OnLimit: k.OnLimit,
		BillingAccount: k.BillingAccount, Budgets: sluice.Budgets{Day: int64(k.Budgets.Day), Month: int64(k.Budgets.Month)},
	}
	if k.ExpiresAt != "" {
		if out.ExpiresAt, err = time.Parse(time.RFC3339, k.ExpiresAt); err != nil {
			return nil, fmt.Errorf("expires_at: %w", err)
		}
	}
	return out, nil
}

// configKey is k as the catalog would declare it, without its secret: what
// the catalog's validation and policy compiler read.
func configKey(k *sluice.Key) config.Key {
	p := k.Policy
	out := config.Key{
		ID: k.ID, Name: k.Name, Tenant: k.Tenant, Models: k.Models, Priority: k.Priority,
		Policy: config.Policy{Mode: p.Mode, Accounts: p.Accounts, Pool: p.Pool, Fallback: p.Fallback, Wait: config.Duration(p.Wait)},
		Limits: config.Limits(k.Limits), UserLimits: config.Limits(k.UserLimits),
		Task: k.Task, Tasks: k.Tasks, Labels: k.Labels, Paths: k.Paths, ServiceTiers: k.ServiceTiers, OnLimit: k.OnLimit,
		BillingAccount: k.BillingAccount, Budgets: config.Budgets{Day: config.Money(k.Budgets.Day), Month: config.Money(k.Budgets.Month)},
	}
	if !k.ExpiresAt.IsZero() {
		out.ExpiresAt = k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return out
}

// CheckKey checks a key of the admin API against this catalog, by the rules
// and with the messages of the catalog's own keys, and fills its defaults
// as the catalog's keys get them.
func (s *Snapshot) CheckKey(k *sluice.Key) error {
	ck := configKey(k)
	config.ApplyKeyDefaults(&ck)
	if err := config.ValidateKey(s.Catalog, &ck); err != nil {
		return err
	}
	k.Priority, k.Policy.Mode, k.OnLimit = ck.Priority, ck.Policy.Mode, ck.OnLimit
	return nil
}

// compileKeyPolicy compiles what key k carries beyond its scopes: one path
// for the catalog's keys and the admin API's. It fails when the key's
// policy names a pool or an account this catalog does not have.
func (s *Snapshot) compileKeyPolicy(k *sluice.Key) (keyPolicy, error) {
	kp := keyPolicy{key: k, task: k.Task, tasks: k.Tasks}
	if l := k.UserLimits; l != (sluice.Limits{}) {
		kp.perUser = &store.Unit{Cap: l.MaxInflight, RPM: l.RPM, TPM: l.TPM, DailyTokens: l.DailyTokens}
	}
	rp, err := s.compilePolicy(configKey(k).Policy)
	kp.route = &rp
	return kp, err
}

// withStored returns a copy of s that also knows the keys of the admin API,
// each compiled against s. A stored key whose policy names a pool or an
// account s lacks is kept, unbound: its requests get access_key_unbound
// until the catalog has them again. A stored key never shadows a catalog
// key of the same ID. s itself is not changed.
func (s *Snapshot) withStored(stored []*sluice.Key) *Snapshot {
	c := *s
	c.keys = maps.Clone(s.keys)
	c.limits = maps.Clone(s.limits)
	for _, k := range stored {
		if _, static := s.keys[k.ID]; static {
			continue
		}
		kp, err := s.compileKeyPolicy(k)
		kp.unbound = err != nil
		c.keys[k.ID] = kp
		c.keyLimit(k)
		c.limited = c.limited || kp.perUser != nil
	}
	return &c
}

// keyLimit records the limits of key k, when it has any, as its limit
// unit. With on_limit refuse, the store refuses a request of k at once
// when k's own max_inflight is in use, instead of queueing it; the
// request still waits for the upstream and for every other limit.
func (s *Snapshot) keyLimit(k *sluice.Key) {
	id := "key:" + k.ID
	s.limit(id, config.Limits(k.Limits))
	if u, ok := s.limits[id]; ok && k.OnLimit == sluice.OnLimitRefuse {
		u.Refuse = true
		s.limits[id] = u
	}
}

// keyring is the keys of the admin API that Live compiles into each
// snapshot, and the last snapshot compiled from the catalog alone.
type keyring struct {
	catalog *Snapshot
	stored  []*sluice.Key
}

// SetStoredKeys makes the keys of the admin API part of the snapshot
// requests use, compiled against the catalog serving now; every later Swap
// compiles them against the new catalog. The keyring calls it whenever its
// stored keys change, before it authenticates with them, so a request never
// authenticates with a key its snapshot does not know yet. The version of
// the snapshot does not change: the catalog did not.
func (l *Live) SetStoredKeys(keys []*sluice.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keyring.stored = keys
	if l.keyring.catalog != nil {
		l.cur.Store(l.keyring.catalog.withStored(keys))
	}
}

// keyActive reports whether key k, as a request authenticated it, is as
// this snapshot knows it still active at now with the same secret, and
// returns its compiled policy.
func (s *Snapshot) keyActive(k *sluice.Key, now time.Time) (keyPolicy, bool) {
	kp, ok := s.keys[k.ID]
	if !ok || kp.key.Hash != k.Hash || kp.key.EffectiveStatus(now) != sluice.KeyActive {
		return keyPolicy{}, false
	}
	return kp, true
}

// errConcurrencyExceeded answers a request of a key that refuses at its
// own max_inflight (on_limit refuse) when that is all in use.
var errConcurrencyExceeded = &sluice.Error{Code: sluice.CodeConcurrencyExceeded, Msg: "this key's own concurrency limit is reached"}
