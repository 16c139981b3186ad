package admin

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
)

// createKey handles POST /admin/keys.
func (s *server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req KeySpec
	if err := decodeJSON(w, r, &req, false); err != nil {
		return err
	}
	now := s.now()
	spec, err := req.spec(now)
	if err != nil {
		return err
	}
	k, secret, err := s.keys.Create(r.Context(), spec)
	if err = s.stored(r.Context(), k, err); err != nil {
		return keyError(spec.ID, err)
	}
	s.wrote(r.Context(), "keys.create", slog.String("key_id", k.ID), slog.String("tenant", k.Tenant),
		slog.String("status", string(k.Status)))
	writeJSON(w, http.StatusCreated, IssuedKey{Key: secret, Record: keyRecord(k, now)})
	return nil
}

// spec checks the request and turns it into an authn.Spec. What the key
// carries beyond its name, tenant and expiry is checked by the keyring,
// against the catalog, by the catalog's rules for keys.
func (ks *KeySpec) spec(now time.Time) (authn.Spec, error) {
	sp := authn.Spec{
		ID: strings.TrimSpace(ks.ID), Name: strings.TrimSpace(ks.Name), Tenant: strings.TrimSpace(ks.Tenant),
		Pending: ks.Pending,
	}
	if err := checkID(sp.ID); err != nil {
		return sp, err
	}
	if sp.Name == "" {
		return sp, invalid("name is required")
	}
	if sp.Tenant == "" {
		return sp, invalid("tenant is required")
	}
	models, err := cleanModels(ks.Models)
	if err != nil {
		return sp, err
	}
	sp.Settings.Models, sp.Settings.Priority = models, strings.TrimSpace(ks.Priority)
	if err := ks.KeySettings.apply(&sp.Settings); err != nil {
		return sp, err
	}
	e := Expiry{At: ks.ExpiresAt, In: ks.ExpiresIn}
	if !e.At.IsZero() && e.In != "" {
		return sp, invalid("set expires_at or expires_in, not both")
	}
	if e.At.IsZero() && e.In == "" {
		return sp, nil
	}
	if sp.ExpiresAt, err = e.time(now); err != nil {
		return sp, err
	}
	if !sp.ExpiresAt.After(now) {
		return sp, invalid("the key would be expired already (expiry %s)", sp.ExpiresAt.Format(time.RFC3339))
	}
	return sp, nil
}

// time is the instant the expiry names: zero for never, now when empty.
func (e *Expiry) time(now time.Time) (time.Time, error) {
	set := 0
	for _, b := range []bool{!e.At.IsZero(), e.In != "", e.Never} {
		if b {
			set++
		}
	}
	switch {
	case set > 1:
		return time.Time{}, invalid("set only one of at, in and never")
	case e.Never:
		return time.Time{}, nil
	case !e.At.IsZero():
		return e.At.UTC(), nil
	case e.In != "":
		d, err := time.ParseDuration(e.In)
		if err != nil || d < 0 {
			return time.Time{}, invalid("%q is not a duration from now (want, for example, \"24h\" or \"90m\")", e.In)
		}
		return now.Add(d).UTC(), nil
	}
	return now.UTC(), nil
}

// listKeys handles GET /admin/keys.
func (s *server) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.keys.List(r.Context())
	if err != nil {
		return err
	}
	now := s.now()
	out := make([]KeyRecord, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyRecord(k, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// showKey handles GET /admin/keys/{id}.
func (s *server) showKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	k, err := s.keys.Load(r.Context(), id)
	if err != nil {
		return keyError(id, err)
	}
	writeJSON(w, http.StatusOK, keyRecord(k, s.now()))
	return nil
}

// transition handles POST /admin/keys/{id}/disable, enable and revoke.
func (s *server) transition(action string, change func(context.Context, string) (*sluice.Key, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		k, err := change(r.Context(), id)
		return s.answer(w, r, action, id, k, err)
	}
}

// rotateKey handles POST /admin/keys/{id}/rotate.
func (s *server) rotateKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	k, secret, err := s.keys.Rotate(r.Context(), id)
	if err = s.stored(r.Context(), k, err); err != nil {
		return keyError(id, err)
	}
	s.wrote(r.Context(), "keys.rotate", slog.String("key_id", id))
	writeJSON(w, http.StatusOK, IssuedKey{Key: secret, Record: keyRecord(k, s.now())})
	return nil
}

// expireKey handles POST /admin/keys/{id}/expire.
func (s *server) expireKey(w http.ResponseWriter, r *http.Request) error {
	var e Expiry
	if err := decodeJSON(w, r, &e, true); err != nil {
		return err
	}
	at, err := e.time(s.now())
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	k, err := s.keys.Expire(r.Context(), id, at)
	return s.answer(w, r, "keys.expire", id, k, err)
}

// setModels handles PUT /admin/keys/{id}/models.
func (s *server) setModels(w http.ResponseWriter, r *http.Request) error {
	var body modelsBody
	if err := decodeJSON(w, r, &body, false); err != nil {
		return err
	}
	if body.Models == nil {
		return invalid("models is required (an empty list allows every alias)")
	}
	models, err := cleanModels(*body.Models)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	k, err := s.keys.SetModels(r.Context(), id, models)
	return s.answer(w, r, "keys.models", id, k, err)
}

// updateKey handles PATCH /admin/keys/{id}: each field present replaces
// the key's; the result is checked as a new key would be.
func (s *server) updateKey(w http.ResponseWriter, r *http.Request) error {
	var c KeyChange
	if err := decodeJSON(w, r, &c, false); err != nil {
		return err
	}
	id := r.PathValue("id")
	k, err := s.keys.Update(r.Context(), id, c.apply)
	return s.answer(w, r, "keys.update", id, k, err)
}

// answer finishes a change to one key: logs it and sends the record.
func (s *server) answer(w http.ResponseWriter, r *http.Request, action, id string, k *sluice.Key, err error) error {
	if err = s.stored(r.Context(), k, err); err != nil {
		return keyError(id, err)
	}
	s.wrote(r.Context(), action, slog.String("key_id", id), slog.String("status", string(k.EffectiveStatus(s.now()))))
	writeJSON(w, http.StatusOK, keyRecord(k, s.now()))
	return nil
}

// stored drops the error of a Keyring write that reached the store but
// whose refresh of the in-memory index failed (the Keyring returns the key
// with the error then): the change is durable and the next periodic refresh
// publishes it, so the operator must see it succeed.
func (s *server) stored(ctx context.Context, k *sluice.Key, err error) error {
	if err != nil && k != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "key saved, index refresh failed", slog.String("key_id", k.ID), slog.Any("err", err))
		return nil
	}
	return err
}

// KeySettings is what a key carries besides its name, tenant, scopes of
// models and life cycle, with the catalog's names and meaning: a key made
// here has everything a key of the catalog has, checked by the same rules.
type KeySettings struct {
	Labels       map[string]string `json:"labels,omitempty"`
	Policy       KeyPolicy         `json:"policy,omitzero"`
	Limits       KeyLimits         `json:"limits,omitzero"`
	UserLimits   KeyLimits         `json:"user_limits,omitzero"` // for each end user of the key
	Task         string            `json:"task,omitempty"`       // default task type
	Tasks        []string          `json:"tasks,omitempty"`      // others the key may declare
	Paths        []string          `json:"paths,omitempty"`      // API paths it may call (chat, embeddings, videos, fal); empty = all
	ServiceTiers []string          `json:"service_tiers,omitempty"`
	OnLimit      string            `json:"on_limit,omitempty"` // at its own max_inflight: wait (default) or refuse
	// BillingAccount is the billing account its requests are charged to.
	BillingAccount string `json:"billing_account,omitempty"`
	// Assert is what the key may assert about its requests: user (the end
	// user it names selects that user's entitlement), profile
	// (X-Sluice-Profile).
	Assert []string `json:"assert,omitempty"`
}

// KeyPolicy is a key's route policy; Wait is a Go duration ("30s").
type KeyPolicy struct {
	Mode     string   `json:"mode,omitempty"` // default | strict | preferred | pool
	Accounts []string `json:"accounts,omitempty"`
	Pool     string   `json:"pool,omitempty"`
	Fallback string   `json:"fallback,omitempty"`
	Wait     string   `json:"wait,omitempty"`
}

// KeyLimits are a key's limits; 0 = none.
type KeyLimits struct {
	RPM         int `json:"rpm,omitempty"`
	TPM         int `json:"tpm,omitempty"`
	MaxInflight int `json:"max_inflight,omitempty"`
	DailyTokens int `json:"daily_tokens,omitempty"` // tokens per UTC day
}

// KeyChange is the body of PATCH /admin/keys/{id}: each field present
// replaces the key's (an empty list or object clears it); absent fields
// stay as they are.
type KeyChange struct {
	Name         *string            `json:"name,omitempty"`
	Models       *[]string          `json:"models,omitempty"`
	Priority     *string            `json:"priority,omitempty"`
	Labels       *map[string]string `json:"labels,omitempty"`
	Policy       *KeyPolicy         `json:"policy,omitempty"`
	Limits       *KeyLimits         `json:"limits,omitempty"`
	UserLimits   *KeyLimits         `json:"user_limits,omitempty"`
	Task         *string            `json:"task,omitempty"`
	Tasks        *[]string          `json:"tasks,omitempty"`
	Paths        *[]string          `json:"paths,omitempty"`
	ServiceTiers *[]string          `json:"service_tiers,omitempty"`
	OnLimit      *string            `json:"on_limit,omitempty"`
	// BillingAccount rebinds the key ("" unbinds it); requests running
	// keep the account they were admitted with.
	BillingAccount *string   `json:"billing_account,omitempty"`
	Assert         *[]string `json:"assert,omitempty"`
}

// apply sets the fields of k that ks holds.
func (ks *KeySettings) apply(k *sluice.Key) error {
	p, err := ks.Policy.policy()
	if err != nil {
		return err
	}
	k.Labels, k.Policy = ks.Labels, p
	k.Limits, k.UserLimits = sluice.Limits(ks.Limits), sluice.Limits(ks.UserLimits)
	k.Task, k.Tasks, k.Paths, k.ServiceTiers, k.OnLimit = ks.Task, ks.Tasks, ks.Paths, ks.ServiceTiers, ks.OnLimit
	k.BillingAccount, k.Assert = ks.BillingAccount, ks.Assert
	return nil
}

// policy is p as the key carries it.
func (p *KeyPolicy) policy() (sluice.RoutePolicy, error) {
	rp := sluice.RoutePolicy{Mode: sluice.PolicyMode(p.Mode), Accounts: p.Accounts, Pool: p.Pool, Fallback: p.Fallback}
	if p.Wait == "" {
		return rp, nil
	}
	d, err := time.ParseDuration(p.Wait)
	if err != nil || d < 0 {
		return rp, invalid("policy.wait: invalid duration %q (want e.g. \"30s\")", p.Wait)
	}
	rp.Wait = d
	return rp, nil
}

// apply makes the change to k.
func (c *KeyChange) apply(k *sluice.Key) error {
	if c.Name != nil {
		if k.Name = strings.TrimSpace(*c.Name); k.Name == "" {
			return invalid("name must not be empty")
		}
	}
	if c.Models != nil {
		models, err := cleanModels(*c.Models)
		if err != nil {
			return err
		}
		k.Models = models
	}
	if c.Policy != nil {
		p, err := c.Policy.policy()
		if err != nil {
			return err
		}
		k.Policy = p
	}
	set(&k.Priority, c.Priority)
	set(&k.Labels, c.Labels)
	set(&k.Task, c.Task)
	set(&k.Tasks, c.Tasks)
	set(&k.Paths, c.Paths)
	set(&k.ServiceTiers, c.ServiceTiers)
	set(&k.OnLimit, c.OnLimit)
	set(&k.BillingAccount, c.BillingAccount)
	set(&k.Assert, c.Assert)
	if c.Limits != nil {
		k.Limits = sluice.Limits(*c.Limits)
	}
	if c.UserLimits != nil {
		k.UserLimits = sluice.Limits(*c.UserLimits)
	}
	return nil
}

// set replaces *dst with *v when v is present.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// keySettings is the view of what k carries.
func keySettings(k *sluice.Key) KeySettings {
	p := KeyPolicy{Mode: string(k.Policy.Mode), Accounts: k.Policy.Accounts, Pool: k.Policy.Pool, Fallback: k.Policy.Fallback}
	if k.Policy.Wait > 0 {
		p.Wait = k.Policy.Wait.String()
	}
	return KeySettings{
		Labels: k.Labels, Policy: p, Limits: KeyLimits(k.Limits), UserLimits: KeyLimits(k.UserLimits),
		Task: k.Task, Tasks: k.Tasks, Paths: k.Paths, ServiceTiers: k.ServiceTiers, OnLimit: k.OnLimit,
		BillingAccount: k.BillingAccount, Assert: k.Assert,
	}
}

// source says where a key is managed: "catalog" (read-only here) or "api".
func source(k *sluice.Key) string {
	if k.Static {
		return "catalog"
	}
	return "api"
}
