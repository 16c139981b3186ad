package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

// Entitlements hold the end users' entitlements to quota profiles, with a
// check of one against the catalog serving now. Implementations must be
// safe for concurrent use.
type Entitlements interface {
	store.Entitlements
	// CheckEntitlement returns what is wrong with e in the serving
	// catalog (a profile or pool it lacks), or nil.
	CheckEntitlement(e store.Entitlement) error
	// Profiles returns the serving catalog's quota profiles and its
	// tenants (whose default_profile names one).
	Profiles() ([]config.Profile, []config.Tenant)
}

// Entitlement is an end user's entitlement as the admin API shows and
// takes it: the user of a tenant, the quota profile, an optional pool
// that overrides the profile's, and when it applies (absent = open).
type Entitlement struct {
	Tenant     string    `json:"tenant"`
	User       string    `json:"user"`
	Profile    string    `json:"profile"`
	Pool       string    `json:"pool,omitempty"`
	ValidFrom  time.Time `json:"valid_from,omitzero"`
	ValidUntil time.Time `json:"valid_until,omitzero"`
	// UpdatedAt and ValidNow are shown, never taken.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	ValidNow  bool      `json:"valid_now"`
}

// EntitlementsPut is the body of PUT /admin/entitlements: entitlements to
// set, each replacing its end user's, all or none.
type EntitlementsPut struct {
	Entitlements []Entitlement `json:"entitlements"`
	// DryRun checks and counts what would change, changing nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// EntitlementsDelete is the body of DELETE /admin/entitlements.
type EntitlementsDelete struct {
	Users  []EndUserRef `json:"users"`
	DryRun bool         `json:"dry_run,omitempty"`
}

// EndUserRef names an end user of a tenant.
type EndUserRef struct {
	Tenant string `json:"tenant"`
	User   string `json:"user"`
}

// EntitlementsResult answers a bulk change: how many end users it
// created, replaced, left as they were (already so, or absent for a
// delete) and deleted. A dry run answers what the same change would do now.
type EntitlementsResult struct {
	DryRun    bool `json:"dry_run"`
	Created   int  `json:"created"`
	Replaced  int  `json:"replaced"`
	Deleted   int  `json:"deleted"`
	Unchanged int  `json:"unchanged"`
}

// MaxEntitlementsPerCall bounds one bulk change: hundreds fit, and one
// transaction stays short.
const MaxEntitlementsPerCall = 1000

// registerEntitlements adds the entitlement routes.
func (s *server) registerEntitlements() {
	s.read("GET /admin/entitlements", s.listEntitlements)
	s.write("PUT /admin/entitlements", "entitlements.put", selfNoted, s.putEntitlements)
	s.write("DELETE /admin/entitlements", "entitlements.delete", selfNoted, s.deleteEntitlements)
	s.read("GET /admin/profiles", s.listProfiles)
}

var errNoEntitlements = sluice.Errorf(sluice.CodeNotFound, "this gateway keeps no entitlements")

// listEntitlements handles GET /admin/entitlements?tenant=&user=&profile=.
func (s *server) listEntitlements(w http.ResponseWriter, r *http.Request) error {
	if s.entitlements == nil {
		return errNoEntitlements
	}
	q := r.URL.Query()
	es, err := s.entitlements.ListEntitlements(r.Context(), store.EntitlementFilter{Tenant: q.Get("tenant"), User: q.Get("user"), Profile: q.Get("profile")})
	if err != nil {
		return err
	}
	now := s.now()
	out := make([]Entitlement, len(es))
	for i := range es {
		out[i] = entitlementView(&es[i], now)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func entitlementView(e *store.Entitlement, now time.Time) Entitlement {
	return Entitlement{Tenant: e.Tenant, User: e.User, Profile: e.Profile, Pool: e.Pool,
		ValidFrom: e.ValidFrom, ValidUntil: e.ValidUntil, UpdatedAt: e.UpdatedAt, ValidNow: e.ValidAt(now)}
}

// putEntitlements handles PUT /admin/entitlements: every entitlement is
// checked first (a tenant and user, a profile and pool the serving
// catalog has, a period that is not empty, each user once); with any
// problem nothing changes and the answer lists every problem. Those
// already as asked are not written again.
func (s *server) putEntitlements(w http.ResponseWriter, r *http.Request) error {
	if s.entitlements == nil {
		return errNoEntitlements
	}
	var body EntitlementsPut
	if err := decodeJSON(w, r, &body, false); err != nil {
		return err
	}
	if n := len(body.Entitlements); n == 0 || n > MaxEntitlementsPerCall {
		return invalid("entitlements: want 1 to %d, got %d", MaxEntitlementsPerCall, n)
	}
	es := make([]store.Entitlement, len(body.Entitlements))
	var problems []error
	seen := make(map[store.EndUser]int, len(es))
	for i, e := range body.Entitlements {
		es[i] = store.Entitlement{EndUser: store.EndUser{Tenant: e.Tenant, User: e.User}, Profile: e.Profile, Pool: e.Pool,
			ValidFrom: e.ValidFrom.UTC(), ValidUntil: e.ValidUntil.UTC()}
		if e.ValidFrom.IsZero() {
			es[i].ValidFrom = time.Time{}
		}
		if e.ValidUntil.IsZero() {
			es[i].ValidUntil = time.Time{}
		}
		err := s.checkEntitlement(&es[i])
		if j, dup := seen[es[i].EndUser]; dup {
			err = errors.Join(err, fmt.Errorf("the same user as entitlements[%d]", j))
		}
		seen[es[i].EndUser] = i
		if err != nil {
			problems = append(problems, fmt.Errorf("entitlements[%d]: %w", i, err))
		}
	}
	if len(problems) > 0 {
		return invalid("%s", errors.Join(problems...).Error())
	}
	before, err := s.currentEntitlements(r.Context(), es)
	if err != nil {
		return err
	}
	res := EntitlementsResult{DryRun: body.DryRun}
	var changed []store.Entitlement
	for _, e := range es {
		was, ok := before[e.EndUser]
		switch {
		case ok && sameEntitlement(&was, &e):
			res.Unchanged++
			continue
		case ok:
			res.Replaced++
		default:
			res.Created++
		}
		changed = append(changed, e)
	}
	if !body.DryRun && len(changed) > 0 {
		if err := s.entitlements.PutEntitlements(r.Context(), changed, s.now()); err != nil {
			return err
		}
	}
	s.noteEntitlements(w, body.DryRun, changed, before, true)
	s.wrote(r.Context(), "entitlements.put", slog.Bool("dry_run", body.DryRun), slog.Int("created", res.Created),
		slog.Int("replaced", res.Replaced), slog.Int("unchanged", res.Unchanged))
	writeJSON(w, http.StatusOK, res)
	return nil
}

// checkEntitlement checks e on its own and against the serving catalog.
func (s *server) checkEntitlement(e *store.Entitlement) error {
	var errs []error
	if e.Tenant == "" || e.User == "" || e.Profile == "" {
		errs = append(errs, errors.New("tenant, user and profile are required"))
	}
	if msg := config.CheckID(e.Tenant); msg != "" {
		errs = append(errs, errors.New("tenant "+msg))
	}
	if msg := config.CheckText(e.User, config.MaxUser); msg != "" {
		errs = append(errs, errors.New("user "+msg))
	}
	if !e.ValidUntil.IsZero() && !e.ValidUntil.After(e.ValidFrom) {
		errs = append(errs, errors.New("valid_until must be after valid_from"))
	}
	if e.Profile != "" {
		errs = append(errs, s.entitlements.CheckEntitlement(*e))
	}
	return errors.Join(errs...)
}

// sameEntitlement reports whether a and b say the same (UpdatedAt aside).
func sameEntitlement(a, b *store.Entitlement) bool {
	return a.Profile == b.Profile && a.Pool == b.Pool && a.ValidFrom.Equal(b.ValidFrom) && a.ValidUntil.Equal(b.ValidUntil)
}

// currentEntitlements returns the stored entitlements of the users of es,
// read tenant by tenant.
func (s *server) currentEntitlements(ctx context.Context, es []store.Entitlement) (map[store.EndUser]store.Entitlement, error) {
	tenants := make([]string, 0, 1)
	for _, e := range es {
		if !slices.Contains(tenants, e.Tenant) {
			tenants = append(tenants, e.Tenant)
		}
	}
	out := make(map[store.EndUser]store.Entitlement, len(es))
	for _, t := range tenants {
		stored, err := s.entitlements.ListEntitlements(ctx, store.EntitlementFilter{Tenant: t})
		if err != nil {
			return nil, err
		}
		for _, e := range stored {
			out[e.EndUser] = e
		}
	}
	return out, nil
}

// deleteEntitlements handles DELETE /admin/entitlements.
func (s *server) deleteEntitlements(w http.ResponseWriter, r *http.Request) error {
	if s.entitlements == nil {
		return errNoEntitlements
	}
	var body EntitlementsDelete
	if err := decodeJSON(w, r, &body, false); err != nil {
		return err
	}
	if n := len(body.Users); n == 0 || n > MaxEntitlementsPerCall {
		return invalid("users: want 1 to %d, got %d", MaxEntitlementsPerCall, n)
	}
	users := make([]store.EndUser, len(body.Users))
	probe := make([]store.Entitlement, len(body.Users))
	for i, u := range body.Users {
		if u.Tenant == "" || u.User == "" {
			return invalid("users[%d]: tenant and user are required", i)
		}
		users[i] = store.EndUser{Tenant: u.Tenant, User: u.User}
		probe[i].EndUser = users[i]
	}
	before, err := s.currentEntitlements(r.Context(), probe)
	if err != nil {
		return err
	}
	res := EntitlementsResult{DryRun: body.DryRun}
	var gone []store.Entitlement
	for _, u := range users {
		if e, ok := before[u]; ok {
			gone = append(gone, e)
		}
	}
	res.Deleted, res.Unchanged = len(gone), len(users)-len(gone)
	if !body.DryRun && len(gone) > 0 {
		if res.Deleted, err = s.entitlements.DeleteEntitlements(r.Context(), users); err != nil {
			return err
		}
		res.Unchanged = len(users) - res.Deleted
	}
	s.noteEntitlements(w, body.DryRun, gone, before, false)
	s.wrote(r.Context(), "entitlements.delete", slog.Bool("dry_run", body.DryRun), slog.Int("deleted", res.Deleted))
	writeJSON(w, http.StatusOK, res)
	return nil
}

// noteEntitlements fills the audit entry of a bulk change: the users it
// changed ("tenant/user"), before and after (null: none). A dry run
// changes nothing, and says so in its action.
func (s *server) noteEntitlements(w http.ResponseWriter, dryRun bool, changed []store.Entitlement, before map[store.EndUser]store.Entitlement, put bool) {
	rec := recorderOf(w)
	if rec == nil || len(changed) == 0 {
		return
	}
	e := &rec.entry
	if dryRun {
		e.Action += ".dry_run"
	}
	now := s.now()
	was, became := map[string]*Entitlement{}, map[string]*Entitlement{}
	for i := range changed {
		c := &changed[i]
		id := c.Tenant + "/" + c.User
		e.Targets = append(e.Targets, id)
		was[id], became[id] = nil, nil
		if b, ok := before[c.EndUser]; ok {
			v := entitlementView(&b, now)
			was[id] = &v
		}
		if put && !dryRun {
			v := entitlementView(c, now)
			became[id] = &v
		}
	}
	if dryRun {
		became = was
	}
	slices.SortFunc(e.Targets, func(a, b string) int { return cmp.Compare(a, b) })
	e.Before, _ = json.Marshal(was)
	e.After, _ = json.Marshal(became)
}
