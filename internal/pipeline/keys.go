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
	out := &sluice.Key{
		ID: k.ID, Name: k.Name, Tenant: k.Tenant, Hash: authn.Hash(secret), Prefix: authn.DisplayPrefix(secret),
		Status: sluice.KeyActive, Models: k.Models, Priority: k.Priority, Static: true,
		KeySettings: k.KeySettings, Budgets: budgets(k.Budgets),
	}
	if k.ExpiresAt != "" {
		if out.ExpiresAt, err = time.Parse(time.RFC3339, k.ExpiresAt); err != nil {
			return nil, fmt.Errorf("expires_at: %w", err)
		}
	}
	return out, nil
}

// configKey is k as the catalog would declare it, without its secret: what
// the catalog's validation reads.
func configKey(k *sluice.Key) config.Key {
	out := config.Key{
		ID: k.ID, Name: k.Name, Tenant: k.Tenant, Models: k.Models, Priority: k.Priority, KeySettings: k.KeySettings,
		Budgets: config.Budgets{Day: config.Money(k.Budgets.Day), Month: config.Money(k.Budgets.Month)},
	}
	if !k.ExpiresAt.IsZero() {
		out.ExpiresAt = k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return out
}

// CheckKey checks a key of the admin API against this catalog, by the rules
// and with the messages of the catalog's own keys, and fills its defaults
// as the catalog's keys get them. Its billing account must be one this
// snapshot bills: the catalog's, or one of the admin API's.
func (s *Snapshot) CheckKey(k *sluice.Key) error {
	ck := configKey(k)
	config.ApplyKeyDefaults(&ck)
	if err := config.ValidateKey(s.Catalog, &ck); err != nil {
		return err
	}
	if k.BillingAccount != "" && !s.BillingAccount(k.BillingAccount) {
		return fmt.Errorf("billing_account: unknown billing account %q (neither the catalog nor the admin API has it)", k.BillingAccount)
	}
	k.Priority, k.KeySettings = ck.Priority, ck.KeySettings
	return nil
}

// compileKeyPolicy compiles what key k carries beyond its scopes: one path
// for the catalog's keys and the admin API's. It fails when the key's
// policy names a pool or an account this catalog does not have.
func (s *Snapshot) compileKeyPolicy(k *sluice.Key) (keyPolicy, error) {
	if defaults := s.Catalog.Server.DefaultKeyPaths; len(k.Paths) == 0 && len(defaults) > 0 {
		// The key as admission reads it; the keyring's (and the admin
		// API's) keeps what was written, so a change of the defaults
		// reaches it with the next catalog.
		k = k.Clone()
		k.Paths = defaults
	}
	kp := keyPolicy{key: k, task: k.Task, tasks: k.Tasks}
	kp.assertUser, kp.assertProfile = asserts(k)
	if l := k.UserLimits; l != (sluice.Limits{}) {
		kp.perUser = &store.Unit{Cap: l.MaxInflight, RPM: l.RPM, TPM: l.TPM, DailyTokens: l.DailyTokens}
	}
	rp, err := s.compilePolicy(k.Policy)
	kp.route = &rp
	return kp, err
}

// withStored returns a copy of s that also knows the keys of the admin API,
// each compiled against s, and bills with cb (s's billing with the stored
// accounts and prices merged in; see compiledBilling.withStored). A stored
// key whose policy names a pool or an account s lacks is kept, unbound:
// its requests get access_key_unbound until the catalog has them again. A
// stored key never shadows a catalog key of the same ID. s itself is not
// changed.
func (s *Snapshot) withStored(stored []*sluice.Key, cb *compiledBilling) *Snapshot {
	c := *s
	c.keys = maps.Clone(s.keys)
	c.limits = maps.Clone(s.limits)
	c.billing = cb
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

// keyring is what the admin API stored that Live compiles into each
// snapshot — keys, billing accounts and prices — and the last snapshot
// compiled from the catalog alone.
type keyring struct {
	catalog *Snapshot
	stored  []*sluice.Key
	billing StoredBilling
	read    bool             // billing was read from the store at least once
	merged  *compiledBilling // catalog.billing with billing merged in
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
	l.publish()
}

// SetStoredBilling makes the billing accounts and price versions of the
// admin API part of the snapshot requests use, merged with the serving
// catalog's (which wins on a conflict: what it leaves out is logged), and
// with every later catalog's. The balance refresh calls it with what it
// read, every second; it recompiles only when that changed. The version of
// the snapshot does not change.
func (l *Live) SetStoredBilling(b StoredBilling) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keyring.read && l.keyring.billing.equal(&b) {
		return
	}
	l.keyring.billing, l.keyring.read = b, true
	if l.keyring.catalog != nil {
		l.mergeBilling()
		l.publish()
	}
}

// mergeBilling merges the stored billing into the catalog's, and logs what
// it left out and the keys bound to an account known nowhere. l.mu is held.
func (l *Live) mergeBilling() {
	kr := &l.keyring
	merged, dropped := kr.catalog.billing.withStored(&kr.billing)
	kr.merged = merged
	log := l.Log
	if log == nil || merged == nil || !kr.read {
		return
	}
	for _, err := range dropped {
		log.Warn("a stored billing account or price is not used", "err", err)
	}
	if !merged.billed {
		return
	}
	var unbound []string
	for _, k := range kr.catalog.StaticKeys {
		if k.BillingAccount != "" && merged.accounts[k.BillingAccount] == nil {
			unbound = append(unbound, k.ID)
		}
	}
	for _, k := range kr.stored {
		if _, static := kr.catalog.keys[k.ID]; !static && k.BillingAccount != "" && merged.accounts[k.BillingAccount] == nil {
			unbound = append(unbound, k.ID)
		}
	}
	if len(unbound) > 0 {
		log.Warn("keys are bound to billing accounts neither the catalog nor the admin API has: their requests are refused with access_key_unbound",
			"keys", unbound)
	}
}

// publish makes the catalog's snapshot with what the admin API stored the
// current one. l.mu is held.
func (l *Live) publish() {
	if l.keyring.catalog != nil {
		l.cur.Store(l.keyring.catalog.withStored(l.keyring.stored, l.keyring.merged))
	}
}

// ScopedKey returns key k with the scopes this snapshot judges its
// requests by (server.default_key_paths included); k itself when the
// snapshot does not know it. Read only.
func (s *Snapshot) ScopedKey(k *sluice.Key) *sluice.Key {
	if kp, ok := s.keys[k.ID]; ok && kp.key.Hash == k.Hash {
		return kp.key
	}
	return k
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
