package pipeline

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

// compiledProfile is the limits of a quota profile (profiles[]) as
// requests claim them; its priority_bonus and pool are in taskPolicy.
type compiledProfile struct {
	user  *store.Unit           // the limits of each end user (ID left empty); nil for none
	tasks map[string]store.Unit // by task type: each end user's limits for it (ID left empty)
}

// profiles is what a snapshot knows of quota profiles; the zero value is
// a catalog without any.
type profiles struct {
	byID     map[string]*compiledProfile // nil when the catalog has none
	defaults map[string]string           // tenant → its default profile
	// pools are the pool policies an entitlement may route through (every
	// pool of a catalog with profiles), by pool ID.
	pools map[string]*routePolicy
}

// compileProfiles compiles profiles[] and tenants[].default_profile, and
// a policy for each pool an entitlement may name, after the pools.
func (s *Snapshot) compileProfiles(c *config.Catalog) {
	if len(c.Profiles) == 0 {
		return
	}
	s.profiles.pools = make(map[string]*routePolicy, len(c.Pools))
	for _, p := range c.Pools {
		pl := s.pools[p.ID]
		s.profiles.pools[p.ID] = &routePolicy{mode: "pool", pool: p.ID, accounts: pl.accounts, strategy: pl.strategy}
	}
	s.profiles.byID = make(map[string]*compiledProfile, len(c.Profiles))
	for _, p := range c.Profiles {
		cp := &compiledProfile{}
		if l := p.UserLimits; l != (config.Limits{}) {
			cp.user = &store.Unit{Cap: l.MaxInflight, RPM: l.RPM, TPM: l.TPM, DailyTokens: l.DailyTokens}
			s.limited = true
		}
		for task, l := range p.TaskLimits {
			if l == (config.TaskLimits{}) {
				continue
			}
			if cp.tasks == nil {
				cp.tasks = map[string]store.Unit{}
			}
			cp.tasks[task] = store.Unit{Cap: l.MaxInflight, DailyRequests: l.DailyRequests}
			s.limited = true
		}
		s.profiles.byID[p.ID] = cp
	}
	s.profiles.defaults = make(map[string]string, len(c.Tenants))
	for _, t := range c.Tenants {
		if t.DefaultProfile != "" {
			s.profiles.defaults[t.ID] = t.DefaultProfile
		}
	}
}

// errProfileDenied answers a request whose key may not assert a profile
// but named one (X-Sluice-Profile).
var errProfileDenied = &sluice.Error{Code: sluice.CodeProfileDenied, Msg: "this key may not assert a profile (X-Sluice-Profile): it is not allowed to assert profile"}

// resolveProfile fixes the quota profile the request runs under: the one
// its key asserts (X-Sluice-Profile, which only a key with assert:
// [profile] may send), else its end user's entitlement valid when the
// request arrived (for a key with assert: [user] only: any other caller
// could name a premium user) with its pool override, else the tenant's
// default profile, else none. An entitlement naming a profile the catalog
// no longer has is passed over. A catalog without profiles costs one
// comparison.
func (a *admission) resolveProfile(ents *Entitlements, received time.Time) error {
	s := a.snap
	if a.profile == "" && s.profiles.byID == nil {
		return nil
	}
	if a.profile != "" {
		if !a.kp.assertProfile {
			return errProfileDenied
		}
		if s.profiles.byID[a.profile] == nil {
			return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "X-Sluice-Profile names no profile: " + a.profile}
		}
		return nil
	}
	tenant := a.key().Tenant
	if a.kp.assertUser && a.user != "" {
		if e, ok := ents.lookup(tenant, a.user); ok && e.ValidAt(received) && s.profiles.byID[e.Profile] != nil {
			a.profile, a.entitled = e.Profile, e.Pool
			return nil
		}
	}
	a.profile = s.profiles.defaults[tenant]
	return nil
}

// profileLimits appends the limits of the request's profile on its end
// user to out: its user_limits on the user within the tenant (across the
// tenant's keys), and its task_limits for its task type on the user and
// task. They replace the key's user_limits; a request without an end user
// has neither.
func (s *Snapshot) profileLimits(out []store.Unit, a *admission) []store.Unit {
	p := s.profiles.byID[a.profile]
	if p == nil || a.user == "" {
		return out
	}
	tenant := a.key().Tenant
	if p.user != nil {
		u := *p.user
		u.ID = "enduser:" + tenant + ":" + a.user
		out = append(out, u)
	}
	if u, ok := p.tasks[a.task]; ok {
		// The task type comes first: it has no ':', a user name may.
		u.ID = "usertask:" + tenant + ":" + a.task + ":" + a.user
		out = append(out, u)
	}
	return out
}

// Entitlements are the end users' entitlements as this replica holds
// them, read on the request path without locks: the refresh swaps in a new
// immutable table whenever the stored ones changed. Safe for concurrent
// use; the zero value (or nil) holds none.
type Entitlements struct {
	cur atomic.Pointer[map[store.EndUser]store.Entitlement]
}

// Set replaces the entitlements with es (the store's List, whole).
func (e *Entitlements) Set(es []store.Entitlement) {
	m := make(map[store.EndUser]store.Entitlement, len(es))
	for _, x := range es {
		m[x.EndUser] = x
	}
	e.cur.Store(&m)
}

// lookup returns the entitlement of user of tenant, valid or not.
func (e *Entitlements) lookup(tenant, user string) (store.Entitlement, bool) {
	if e == nil {
		return store.Entitlement{}, false
	}
	m := e.cur.Load()
	if m == nil {
		return store.Entitlement{}, false
	}
	x, ok := (*m)[store.EndUser{Tenant: tenant, User: user}]
	return x, ok
}

// asserts reports which assertions key k may make (keys[].assert).
func asserts(k *sluice.Key) (user, profile bool) {
	return slices.Contains(k.Assert, config.AssertUser), slices.Contains(k.Assert, config.AssertProfile)
}
