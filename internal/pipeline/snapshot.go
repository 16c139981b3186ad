// Package pipeline runs a request of an authenticated principal through the
// stages in order: admit → route → call → settle (ingress authenticates,
// from the headers, before it reads a body). It also owns the compiled,
// immutable catalog (Snapshot) that every request reads once, and Live,
// which swaps snapshots atomically on reload. Stages below it must not import
// it; only ingress and app do.
package pipeline

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/routing"
	"github.com/sluicehq/sluice/internal/store"
)

// Snapshot is a compiled catalog. It is immutable once compiled: nothing may
// change it, so requests read it without locks. State that must outlive a
// reload (breakers, and later claims and cooldowns) lives outside it, keyed
// by stable IDs.
type Snapshot struct {
	Version      int64 // set by Live.Swap: 1 for the first snapshot, +1 per swap
	Source       string
	Compiled     time.Time
	Catalog      *config.Catalog
	Routes       *routing.Table
	Endpoints    map[string]*sluice.Endpoint
	Accounts     map[string]*sluice.Account
	Credentials  map[string]*sluice.Credential
	StaticKeys   []*sluice.Key
	MaxBodyBytes int64
	BodyTimeout  time.Duration
	// MaxInflightBodyBytes bounds the request bodies held at once across
	// the server; ingress keeps the count, which outlives snapshots.
	MaxInflightBodyBytes int64
	// modelUnits are the per-model units under accounts (accounts[].models),
	// by edge ID; nil when no account declares one (modelunits.go).
	modelUnits map[string]store.Unit

	// AffinityDomain is the domain session-affinity bindings live in: one
	// for the whole catalog, as a seed is looked up before its alias's
	// domain is known and its binding outlives edits that move accounts
	// between capacity domains (see domains.go for those).
	AffinityDomain string
	domains        domains // capacity domains (domains.go)

	units   map[string]store.Candidate // by edge ID
	wait    [store.Classes]time.Duration
	reserve map[string][]int      // by account ID: slots kept for interactive, standard
	limits  map[string]store.Unit // Sluice's own limits by unit ID: "key:…", "tenant:…", "model:…", "task:…", "pool:…"
	limited bool                  // some limit (or an end-user limit) is configured
	weights map[string]int        // tenant → fair-queueing weight
	keys    map[string]keyPolicy  // by key ID: the catalog's, and the admin API's (see Live.SetStoredKeys)
	pools   map[string]compiledPool
	billing *compiledBilling          // nil: the catalog has no billing section; with the admin API's accounts and prices merged in
	owned   map[string][]*sluice.Edge // by alias: its edges on owned credentials (BYOK, owner.go); none for most
	// taskPolicy is the class, bonus and pool task types and profiles
	// give requests (taskpolicy.go); nil when the catalog sets none.
	taskPolicy *taskPolicy
	// submitUnits are the credentials' submit rates (credentials[].submit_rpm),
	// by credential ID; nil when none has one (modelunits.go).
	submitUnits map[string]store.Unit

	profiles profiles // quota profiles and tenants' defaults (profiles.go)
	// redaction are the sensitive-data policies by key, tenant and alias
	// (redact.go); nil when the catalog attaches none.
	redaction *redactions
	// cache is the response cache's settings by key and alias (cache.go);
	// nil when the catalog sets none.
	cache *caches
}

// keyPolicy is a key compiled against the snapshot: the key as the
// snapshot knows it, and what it carries beyond its scopes.
type keyPolicy struct {
	key     *sluice.Key  // to re-check a request's key after authentication, and its scopes
	unbound bool         // its policy names a pool or an account the catalog no longer has
	task    string       // the task type its requests have by default
	tasks   []string     // the others it may declare
	route   *routePolicy // which accounts its requests may use, in which order; shared by the snapshot's copies
	perUser *store.Unit  // the limits of each of its end users (ID left empty); nil for none
	// assertUser and assertProfile are its keys[].assert (profiles.go).
	assertUser, assertProfile bool
}

// Compile turns a validated catalog into a Snapshot, resolving secrets
// through lookupEnv. It builds one edge for every (credential, endpoint,
// upstream model) that a deployment, the endpoint and the credential all
// admit.
func Compile(c *config.Catalog, lookupEnv func(string) (string, bool), source string) (*Snapshot, error) {
	return CompileServing(c, lookupEnv, source, nil)
}

// CompileServing is Compile where serves says which endpoints can serve a
// caller (config.ValidateServing): an endpoint that speaks the caller's
// protocol serves it as it is; one that speaks only other protocols that
// serve it, through a translator, in the first such protocol it lists.
// nil serves is the same protocol only. An alias answers callers of its
// models[].protocol alone, or, without one, of each generation protocol
// that reaches one of its deployments.
func CompileServing(c *config.Catalog, lookupEnv func(string) (string, bool), source string, serves config.Serves) (*Snapshot, error) {
	if serves == nil {
		serves = func(caller, upstream sluice.Protocol) bool { return caller == upstream }
	}
	s := &Snapshot{
		Source:               source,
		Compiled:             time.Now(),
		Catalog:              c,
		Endpoints:            make(map[string]*sluice.Endpoint, len(c.Endpoints)),
		Accounts:             make(map[string]*sluice.Account, len(c.Accounts)),
		Credentials:          make(map[string]*sluice.Credential, len(c.Credentials)),
		MaxBodyBytes:         c.Server.MaxBodyBytes,
		BodyTimeout:          c.Server.BodyTimeout.D(),
		MaxInflightBodyBytes: c.Server.MaxInflightBodyBytes,
		AffinityDomain:       "main",
		units:                map[string]store.Candidate{},
		reserve:              map[string][]int{},
		limits:               map[string]store.Unit{},
		weights:              map[string]int{},
		keys:                 map[string]keyPolicy{},
		pools:                map[string]compiledPool{},
		owned:                map[string][]*sluice.Edge{},
	}
	for i, name := range sluice.Priorities {
		s.wait[i] = c.Server.WaitTimeout.D()
		if p, ok := c.Server.Priorities[name]; ok && p.Wait > 0 {
			s.wait[i] = p.Wait.D()
		}
	}
	for _, e := range c.Endpoints {
		s.Endpoints[e.ID] = compileEndpoint(e)
	}
	for _, a := range c.Accounts {
		s.Accounts[a.ID] = compileAccount(a)
		s.reserve[a.ID] = []int{a.Reserve["interactive"], a.Reserve["standard"]}
	}
	creds := make([]*sluice.Credential, 0, len(c.Credentials))
	for i := range c.Credentials {
		cc := &c.Credentials[i]
		secret, err := cc.Secret(lookupEnv)
		if err != nil {
			return nil, fmt.Errorf("credentials[%d]: %w", i, err)
		}
		cr := &sluice.Credential{ID: cc.ID, AccountID: cc.Account, Secret: secret, Endpoints: cc.Endpoints, Models: cc.Models, MaxInflight: cc.Cap(),
			Headers: cc.Header(), Owner: sluice.Owner(cc.Owner)} // an oauth credential's Tokens are app's to give (package oauth)
		if cr.AWS, err = cc.AccessKey(lookupEnv); err != nil {
			return nil, fmt.Errorf("credentials[%d]: %w", i, err)
		}
		if cr.AccountID == "" {
			// A credential without an account is its own account.
			cr.AccountID = cc.ID
			s.Accounts[cc.ID] = &sluice.Account{ID: cc.ID, QuotaScope: sluice.QuotaScopeCredential, MaxInflight: cc.Cap(),
				Cooldown: sluice.Cooldown{Base: time.Second, Max: time.Minute}}
		}
		s.Credentials[cr.ID] = cr
		creds = append(creds, cr)
	}
	aliases := make([]*sluice.Alias, 0, len(c.Models))
	edges := make(map[string]routing.Edges, len(c.Models))
	all := make(map[string][][]*sluice.Edge, len(c.Models)) // each alias's distinct edges, by deployment
	strategies := make(map[string]routing.Strategy, len(c.Models))
	var err error
	for _, m := range c.Models {
		if strategies[m.Alias], err = strategyOf(m.Strategy, m.Affinity); err != nil {
			return nil, fmt.Errorf("models[%s]: %w", m.Alias, err)
		}
		a := &sluice.Alias{Name: m.Alias, MaxOutputTokens: m.MaxOutputTokens,
			Estimate: sluice.TokenEstimate{CharsPerToken: m.TokenEstimate.CharsPerToken, CJKCharsPerToken: m.TokenEstimate.CJKCharsPerToken}}
		for _, d := range m.Deployments {
			dep := sluice.Deployment{Model: d.Model, Endpoints: d.Endpoints, Priority: d.Priority, Weight: d.Weight, Input: d.Inputs()}
			a.Deployments = append(a.Deployments, dep)
			a.ScanImages = a.ScanImages || !dep.Input.Takes(sluice.InputImage)
		}
		edges[a.Name], all[a.Name] = s.aliasEdges(a, m, creds, serves)
		for _, es := range all[a.Name] {
			s.own(a.Name, es)
		}
		aliases = append(aliases, a)
	}
	s.Routes = routing.Compile(aliases, edges, strategies)
	s.compileDomains(all)
	for _, m := range c.Models {
		s.limit("model:"+m.Alias, m.Limits)
	}
	for _, t := range c.Tenants {
		s.limit("tenant:"+t.ID, t.Limits)
		s.weights[t.ID] = t.Weight
	}
	for _, tt := range c.TaskTypes {
		s.limit("task:"+tt.ID, tt.Limits)
	}
	for _, p := range c.Pools {
		s.limit("pool:"+p.ID, config.Limits{MaxInflight: p.MaxInflight, RPM: p.RPM, TPM: p.TPM})
		st, err := strategyOf(p.Strategy, p.Affinity)
		if err != nil {
			return nil, fmt.Errorf("pools[%s]: %w", p.ID, err)
		}
		s.pools[p.ID] = compiledPool{accounts: p.Accounts, strategy: st}
	}
	if err := s.compileTaskPolicy(c); err != nil {
		return nil, err
	}
	if err := s.compileRedactions(c); err != nil {
		return nil, err
	}
	s.compileCaches(c)
	s.compileSubmitRates(c)
	for _, k := range c.Keys {
		s.limited = s.limited || k.UserLimits != (config.Limits{})
	}
	s.compileProfiles(c)
	if err := s.compileKeys(c, lookupEnv); err != nil {
		return nil, err
	}
	if s.billing, err = compileBilling(c); err != nil {
		return nil, fmt.Errorf("billing: %w", err)
	}
	return s, nil
}

// aliasEdges builds the edges of alias a (catalog model m) for each caller
// protocol it may answer, and sets a.Protocols to those that reach an
// edge. Callers whose requests go out in the same upstream protocol share
// one edge per (credential, endpoint, model); all holds each deployment's
// distinct edges.
func (s *Snapshot) aliasEdges(a *sluice.Alias, m config.Model, creds []*sluice.Credential, serves config.Serves) (byCaller routing.Edges, all [][]*sluice.Edge) {
	callers := sluice.Generation
	if m.Protocol != "" {
		callers = []sluice.Protocol{sluice.Protocol(m.Protocol)}
	}
	byCaller = make(routing.Edges, len(callers))
	all = make([][]*sluice.Edge, len(m.Deployments))
	for i, d := range m.Deployments {
		made := map[upstreamOf][]*sluice.Edge{}
		for _, p := range callers {
			var es []*sluice.Edge
			for _, epID := range d.Endpoints {
				ep := s.Endpoints[epID]
				if ep == nil || !ep.Serves(d.Model) {
					continue
				}
				up, ok := upstreamProtocol(ep, p, serves)
				if !ok {
					continue
				}
				key := upstreamOf{epID, up}
				if _, done := made[key]; !done {
					made[key] = s.edgesFor(ep, up, d, creds)
					all[i] = append(all[i], made[key]...)
				}
				es = append(es, made[key]...)
			}
			if byCaller[p] == nil {
				byCaller[p] = make([][]*sluice.Edge, len(m.Deployments))
			}
			byCaller[p][i] = es
		}
	}
	for _, p := range callers {
		if slices.ContainsFunc(byCaller[p], func(es []*sluice.Edge) bool { return len(es) > 0 }) {
			a.Protocols = append(a.Protocols, p)
		} else {
			delete(byCaller, p)
		}
	}
	return byCaller, all
}

// upstreamOf is an endpoint and the protocol Sluice speaks to it.
type upstreamOf struct {
	endpoint string
	protocol sluice.Protocol
}

// upstreamProtocol is the protocol a caller of p is served in by ep: p
// itself when ep speaks it (passed through), else the first of ep's
// protocols that serves p (translated); ok is false when none does.
func upstreamProtocol(ep *sluice.Endpoint, p sluice.Protocol, serves config.Serves) (sluice.Protocol, bool) {
	if ep.Speaks(p) {
		return p, true
	}
	for _, up := range ep.Protocols {
		if serves(p, up) {
			return up, true
		}
	}
	return "", false
}

// edgesFor builds the edges of deployment d on endpoint ep spoken to in
// protocol up: one per credential of ep that may serve d's model.
func (s *Snapshot) edgesFor(ep *sluice.Endpoint, up sluice.Protocol, d config.Deployment, creds []*sluice.Credential) []*sluice.Edge {
	var out []*sluice.Edge
	for _, cr := range creds {
		if !slices.Contains(cr.Endpoints, ep.ID) || (len(cr.Models) > 0 && !slices.Contains(cr.Models, d.Model)) {
			continue
		}
		e := &sluice.Edge{
			ID:         cr.ID + "/" + ep.ID + "/" + d.Model,
			Credential: cr,
			Account:    s.Accounts[cr.AccountID],
			Endpoint:   ep,
			Protocol:   up, // the upstream's: the caller's, or one translated to
			Model:      d.Model,
			Priority:   d.Priority,
			Weight:     d.Weight,
			Input:      d.Inputs(),
		}
		s.units[e.ID] = s.candidate(e.Account, cr)
		s.addModelUnit(e)
		out = append(out, e)
	}
	return out
}

// candidate is the capacity an edge claims, with the account's RPM and TPM.
// With quota_scope account the unit is the account, and the credential's
// max_inflight is an inner limit;
// with quota_scope credential each credential is its own unit, capped by its
// own max_inflight or else the account's, and cooled on its own. Unit IDs are
// stable IDs, so a reordered catalog keeps every unit's state.
func (s *Snapshot) candidate(a *sluice.Account, cr *sluice.Credential) store.Candidate {
	if a.QuotaScope == sluice.QuotaScopeCredential {
		limit := cr.MaxInflight
		if limit == 0 {
			limit = a.MaxInflight
		}
		return store.Candidate{
			Unit: store.Unit{ID: "credential:" + cr.ID, Cap: limit, Base: a.Cooldown.Base, Max: a.Cooldown.Max,
				RPM: a.RPM, TPM: a.TPM, BackgroundPause: a.BackgroundPause},
			Credential: cr.ID,
		}
	}
	return store.Candidate{
		Unit: store.Unit{ID: "account:" + a.ID, Cap: a.MaxInflight, Base: a.Cooldown.Base, Max: a.Cooldown.Max,
			RPM: a.RPM, TPM: a.TPM, Reserve: s.reserve[a.ID], BackgroundPause: a.BackgroundPause},
		Credential:    cr.ID,
		CredentialCap: cr.MaxInflight,
	}
}

// Candidate returns the capacity edge e claims.
func (s *Snapshot) Candidate(e *sluice.Edge) store.Candidate { return s.units[e.ID] }

// CredentialCandidate returns the capacity a credential's edges claim.
func (s *Snapshot) CredentialCandidate(cr *sluice.Credential) store.Candidate {
	return s.candidate(s.Accounts[cr.AccountID], cr)
}

func compileEndpoint(e config.Endpoint) *sluice.Endpoint {
	ps := make([]sluice.Protocol, len(e.Protocols))
	for i, p := range e.Protocols {
		ps[i] = sluice.Protocol(p)
	}
	return &sluice.Endpoint{
		ID: e.ID, BaseURL: e.BaseURL, Protocols: ps, Models: e.Models, Host: e.Host(),
		Headers: sluice.HeaderRules{Forward: sluice.NewHeaderSet(e.ForwardHeaders...), Drop: sluice.NewHeaderSet(e.DropHeaders...)},
		Timeouts: sluice.Timeouts{
			Connect: e.Timeouts.Connect.D(), FirstByte: e.Timeouts.FirstByte.D(),
			Idle: e.Timeouts.Idle.D(), Total: e.Timeouts.Total.D(),
		},
	}
}

func compileAccount(a config.Account) *sluice.Account {
	return &sluice.Account{
		ID: a.ID, QuotaScope: sluice.QuotaScope(a.QuotaScope), MaxInflight: a.Cap(), RPM: a.RPM, TPM: a.TPM,
		Cooldown:        sluice.Cooldown{Base: a.Cooldown.Base.D(), Max: a.Cooldown.Max.D()},
		BackgroundPause: a.BackgroundPause.D(),
	}
}

// limit records a limit unit when l sets any limit.
func (s *Snapshot) limit(id string, l config.Limits) {
	if l != (config.Limits{}) {
		s.limits[id] = store.Unit{ID: id, Cap: l.MaxInflight, RPM: l.RPM, TPM: l.TPM, DailyTokens: l.DailyTokens, Domain: s.limitDomain(id)}
		s.limited = true
	}
}

// Task is the task type of a request of key k that declared asked ("" =
// none): the key's default, or one of the types the key may declare; false
// when the key may not declare it.
func (s *Snapshot) Task(k *sluice.Key, asked string) (string, bool) {
	kp := s.keys[k.ID]
	if asked == "" || asked == kp.task {
		return kp.task, true
	}
	return asked, slices.Contains(kp.tasks, asked)
}

// limitsOf returns the limits of Sluice's own that a request (a) must fit
// in besides its upstream unit, where configured: its key's, its tenant's,
// its alias's, its task type's, its pool's (for a request whose policy
// routes through a pool; pools may share accounts, and the account's own
// cap still applies) and its end user's (per key, so one tenant's user
// names never meet another's).
func (s *Snapshot) limitsOf(a *admission) []store.Unit {
	if !s.limited {
		return nil // no limits configured: skip building the IDs on every request
	}
	k := a.key()
	var out []store.Unit
	for _, id := range [...]string{"key:" + k.ID, "tenant:" + k.Tenant, "model:" + a.model, "task:" + a.task, "pool:" + a.policy.pool} {
		if u, ok := s.limits[id]; ok {
			out = append(out, u)
		}
	}
	if a.profile != "" {
		out = s.profileLimits(out, a) // they replace the key's user_limits
	} else if a.kp.perUser != nil && a.user != "" {
		u := *a.kp.perUser
		u.ID = "user:" + k.ID + ":" + a.user
		out = append(out, u)
	}
	return out
}

// strategy returns the strategy the catalog calls name ("" = round-robin).
func strategy(name string) (routing.Strategy, error) {
	if name == "" {
		return routing.RoundRobin{}, nil
	}
	st, ok := routing.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("strategy %q is not built", name)
	}
	return st, nil
}

// Weight is a tenant's share against other tenants of its class while waiting.
func (s *Snapshot) Weight(tenant string) int { return max(s.weights[tenant], 1) }

// BreakerSettings returns the configured breaker of an endpoint.
func (s *Snapshot) BreakerSettings(endpointID string) (failures int, open time.Duration) {
	for _, e := range s.Catalog.Endpoints {
		if e.ID == endpointID {
			return e.Breaker.Failures, e.Breaker.Open.D()
		}
	}
	return 5, 30 * time.Second
}

// Live holds the snapshot requests use. Load it once per request.
type Live struct {
	// Log receives what compiling the admin API's billing into a snapshot
	// left out (see SetStoredBilling); nil: not logged.
	Log     *slog.Logger
	cur     atomic.Pointer[Snapshot]
	version atomic.Int64
	mu      sync.Mutex // serialises Swap, SetStoredKeys and SetStoredBilling; guards keyring
	keyring keyring
}

// Load returns the current snapshot (nil before the first Swap).
func (l *Live) Load() *Snapshot { return l.cur.Load() }

// Swap makes s, with the keys of the admin API compiled against it, the
// current snapshot, numbering it.
func (l *Live) Swap(s *Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.Version = l.version.Add(1)
	if prev := l.cur.Load(); prev != nil {
		s.Routes.Inherit(prev.Routes) // attempts running under prev still count for least-inflight
	}
	l.keyring.catalog = s
	l.mergeBilling()
	l.publish()
}
