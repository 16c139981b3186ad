// Package routing maps a model alias to the edges that can serve it, in the
// order the gateway should try them: priority tiers first (lower first),
// and inside a tier the order of a Strategy (round-robin, weighted,
// fill-first, least-inflight). A Table is compiled once per catalog and is
// immutable; only its round-robin counters and in-flight counts move. It
// depends only on package sluice.
package routing

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// group is the edges of one deployment, in catalog order.
type group struct {
	weight int
	edges  []*sluice.Edge
	// next is the round-robin rotation, one per deployment: the groups of
	// one deployment for callers of different protocols share it.
	next *atomic.Uint32
}

// Tier is the deployments of one priority of an alias, the unit a Strategy
// orders.
type Tier struct {
	groups []*group
	total  int    // sum of weights
	size   int    // number of edges
	load   *Table // the in-flight counts least-inflight reads
}

type route struct {
	alias    *sluice.Alias
	strategy Strategy
	// callers holds the tiers for callers of each protocol the alias
	// answers (alias.Protocols, in that order): an endpoint's edge for a
	// caller passes the request through when the endpoint speaks the
	// caller's protocol, and translates it otherwise.
	callers []callerRoute
}

// callerRoute is an alias's tiers for callers of one protocol.
type callerRoute struct {
	protocol sluice.Protocol
	tiers    []*Tier
	size     int // number of edges over all tiers
}

// Table is the compiled routing of every alias. Immutable after Compile
// (Inherit aside, before it is shared); safe for concurrent use.
type Table struct {
	routes map[string]*route
	names  []string
	// inflight counts this replica's attempts running on each account, by
	// account ID: the cheap local view least-inflight orders by.
	inflight map[string]*atomic.Int64
}

// Edges are an alias's edges for callers of each protocol it answers:
// Edges[p][i] are those of its i-th deployment.
type Edges map[sluice.Protocol][][]*sluice.Edge

// Compile builds a Table. edges[alias] are the alias's edges for each
// protocol of alias.Protocols; a deployment without edges is left out.
// strategies[alias] is the alias's strategy; RoundRobin when absent.
func Compile(aliases []*sluice.Alias, edges map[string]Edges, strategies map[string]Strategy) *Table {
	t := &Table{routes: make(map[string]*route, len(aliases)), inflight: map[string]*atomic.Int64{}}
	for _, a := range aliases {
		r := &route{alias: a, strategy: cmp.Or[Strategy](strategies[a.Name], RoundRobin{})}
		rotations := make([]atomic.Uint32, len(a.Deployments))
		for _, p := range a.Protocols {
			r.callers = append(r.callers, t.callerRoute(p, a.Deployments, edges[a.Name][p], rotations))
		}
		t.routes[a.Name] = r
		t.names = append(t.names, a.Name)
	}
	slices.SortFunc(t.names, cmp.Compare)
	return t
}

// callerRoute puts the edges of each deployment (byDeployment[i] of
// deployments[i]) in their priority tiers.
func (t *Table) callerRoute(p sluice.Protocol, deployments []sluice.Deployment, byDeployment [][]*sluice.Edge, rotations []atomic.Uint32) callerRoute {
	cr := callerRoute{protocol: p}
	byPriority := map[int]*Tier{}
	for i, es := range byDeployment {
		if len(es) == 0 {
			continue
		}
		d := deployments[i]
		tr := byPriority[d.Priority]
		if tr == nil {
			tr = &Tier{load: t}
			byPriority[d.Priority] = tr
		}
		tr.groups = append(tr.groups, &group{weight: d.Weight, edges: es, next: &rotations[i]})
		tr.total += d.Weight
		tr.size += len(es)
		cr.size += len(es)
		for _, e := range es {
			if t.inflight[e.Account.ID] == nil {
				t.inflight[e.Account.ID] = new(atomic.Int64)
			}
		}
	}
	prios := make([]int, 0, len(byPriority))
	for p := range byPriority {
		prios = append(prios, p)
	}
	slices.Sort(prios)
	for _, p := range prios {
		cr.tiers = append(cr.tiers, byPriority[p])
	}
	return cr
}

// Inherit takes over prev's in-flight counts of the accounts both tables
// know, so that attempts started under prev still count, and end, in t.
// Call it before t is shared.
func (t *Table) Inherit(prev *Table) {
	for id, n := range prev.inflight {
		if _, ok := t.inflight[id]; ok {
			t.inflight[id] = n
		}
	}
}

// InFlight is the count of this replica's attempts running on account: add
// one when an attempt starts there and take it away when it ends. Every
// account of an edge of the table has one; nil for another.
func (t *Table) InFlight(account string) *atomic.Int64 { return t.inflight[account] }

// Alias returns the alias with the name, or nil.
func (t *Table) Alias(name string) *sluice.Alias {
	if r, ok := t.routes[name]; ok {
		return r.alias
	}
	return nil
}

// Names lists every alias, sorted.
func (t *Table) Names() []string { return t.names }

// Candidates returns the edges that can serve a caller of protocol p on
// alias, in try order: tier by tier, each in the order of s, or of the
// alias's own strategy when s is nil. It is empty when the alias has no
// usable edge for p; nil with ok=false when the alias is unknown or does
// not answer p.
func (t *Table) Candidates(alias string, p sluice.Protocol, s Strategy) (edges []*sluice.Edge, ok bool) {
	r, ok := t.routes[alias]
	if !ok {
		return nil, false
	}
	for i := range r.callers {
		if cr := &r.callers[i]; cr.protocol == p {
			if s == nil {
				s = r.strategy
			}
			out := make([]*sluice.Edge, 0, cr.size)
			for _, tr := range cr.tiers {
				out = s.Append(out, tr)
			}
			return out, true
		}
	}
	return nil, false
}
