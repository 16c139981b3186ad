package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
)

// createKey handles POST /admin/keys.
func (s *server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req KeySpec
	if err := decodeJSON(w, r, &req, false); err != nil {
		return err
	}
	now := s.now()
	chosen, err := req.key(now)
	if err != nil {
		return err
	}
	k, secret, err := s.keys.Create(r.Context(), chosen)
	if err = s.stored(r.Context(), k, err); err != nil {
		return keyError(chosen.ID, err)
	}
	s.wrote(r.Context(), "keys.create", slog.String("key_id", k.ID), slog.String("tenant", k.Tenant),
		slog.String("status", string(k.Status)))
	writeJSON(w, http.StatusCreated, IssuedKey{Key: secret, Record: keyRecord(k, now)})
	return nil
}

// key checks the request and turns it into the key to create. What the
// key carries beyond its name, tenant and expiry is checked by the keyring,
// against the catalog, by the catalog's rules for keys.
func (ks *KeySpec) key(now time.Time) (sluice.Key, error) {
	k := sluice.Key{
		ID: strings.TrimSpace(ks.ID), Name: strings.TrimSpace(ks.Name), Tenant: strings.TrimSpace(ks.Tenant),
		Priority: strings.TrimSpace(ks.Priority), KeySettings: ks.KeySettings,
	}
	if ks.Pending {
		k.Status = sluice.KeyPending
	}
	if err := checkID(k.ID); err != nil {
		return k, err
	}
	if k.Name == "" {
		return k, invalid("name is required")
	}
	if k.Tenant == "" {
		return k, invalid("tenant is required")
	}
	models, err := cleanModels(ks.Models)
	if err != nil {
		return k, err
	}
	k.Models = models
	e := Expiry{At: ks.ExpiresAt, In: ks.ExpiresIn}
	if !e.At.IsZero() && e.In != "" {
		return k, invalid("set expires_at or expires_in, not both")
	}
	if e.At.IsZero() && e.In == "" {
		return k, nil
	}
	if k.ExpiresAt, err = e.time(now); err != nil {
		return k, err
	}
	if !k.ExpiresAt.After(now) {
		return k, invalid("the key would be expired already (expiry %s)", k.ExpiresAt.Format(time.RFC3339))
	}
	return k, nil
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

// Key pages: GET /admin/keys with limit or after answers defaultKeysPage
// keys, or limit, at most maxKeysPage.
const (
	defaultKeysPage = 100
	maxKeysPage     = 1000
)

// Headers of GET /admin/keys: how many keys there are in all (that the
// selector selects), and, when a page leaves some out, the after= that
// asks for the next page.
const (
	TotalCountHeader = "X-Total-Count"
	NextAfterHeader  = "X-Next-After"
)

// listKeys handles GET /admin/keys[?selector=team=web,…][&limit=N][&after=ID]:
// every key whose labels match the selector (without one, every key), or
// with limit or after a page of them (limit default 100) after the key ID,
// in the same order: the catalog's keys by ID, then the stored ones by
// creation. Without a selector a page is read from the database a page at
// a time; with one, the keys are selected from the whole list.
func (s *server) listKeys(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	paged := q.Has("limit") || q.Has("after")
	limit, err := parseLimit(q.Get("limit"), defaultKeysPage, maxKeysPage)
	if err != nil {
		return err
	}
	after := q.Get("after")
	var (
		keys  []*sluice.Key
		total int
	)
	if paged && !q.Has("selector") {
		// One more than the page tells whether another page follows.
		keys, total, err = s.keys.ListAfter(r.Context(), after, limit+1)
	} else {
		if keys, err = s.keys.List(r.Context()); err == nil {
			keys, err = selectedKeys(r, keys)
		}
		total = len(keys)
		if err == nil && paged {
			keys, err = keysAfter(keys, after, limit+1)
		}
	}
	if errors.Is(err, catalog.ErrNotFound) {
		return invalid("after %q is not the ID of a key the list holds", after)
	}
	if err != nil {
		return err
	}
	if paged && len(keys) > limit {
		keys = keys[:limit]
		w.Header().Set(NextAfterHeader, keys[limit-1].ID)
	}
	now := s.now()
	out := make([]KeyRecord, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyRecord(k, now))
	}
	w.Header().Set(TotalCountHeader, strconv.Itoa(total))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// keysAfter is at most n of keys from the one after the key ID after (""
// = from the first); catalog.ErrNotFound when keys has no such key.
func keysAfter(keys []*sluice.Key, after string, n int) ([]*sluice.Key, error) {
	from := 0
	if after != "" {
		i := slices.IndexFunc(keys, func(k *sluice.Key) bool { return k.ID == after })
		if i < 0 {
			return nil, catalog.ErrNotFound
		}
		from = i + 1
	}
	return keys[from:min(from+n, len(keys))], nil
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
	var body ModelsBody
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
	k, err := s.keys.Update(r.Context(), id, c.Apply)
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
type KeySettings = sluice.KeySettings

// KeyPolicy is a key's route policy; its wait is a Go duration ("30s").
type KeyPolicy = sluice.RoutePolicy

// KeyLimits are a key's limits; 0 = none.
type KeyLimits = sluice.Limits

// KeyChange is the body of PATCH /admin/keys/{id}: each field present
// replaces the key's field of the same name (an empty list or object
// clears it); absent fields stay as they are. Besides the name, models and
// priority it has one field for each of KeySettings (a test checks).
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
	TraceContent   *bool     `json:"trace_content,omitempty"`
}

// apply makes the change to k.
func (c *KeyChange) Apply(k *sluice.Key) error {
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
	// Every other field present replaces the key's of the same name, as
	// given: the keyring then checks the result as a new key would be.
	change, key := reflect.ValueOf(c).Elem(), reflect.ValueOf(k).Elem()
	for i := range change.NumField() {
		f, name := change.Field(i), change.Type().Field(i).Name
		if !f.IsNil() && name != "Name" && name != "Models" {
			key.FieldByName(name).Set(f.Elem())
		}
	}
	return nil
}

// source says where a key is managed: "catalog" (read-only here) or "api".
func source(k *sluice.Key) string {
	if k.Static {
		return "catalog"
	}
	return "api"
}
