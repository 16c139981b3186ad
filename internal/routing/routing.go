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
	next   atomic.Uint32 // round-robin rotation
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

// Compile builds a Table. edges[alias][i] are the edges of the alias's i-th
// deployment; a deployment without edges is left out. strategies[alias] is
// the alias's strategy; RoundRobin when absent.
func Compile(aliases []*sluice.Alias, edges map[string][][]*sluice.Edge, strategies map[string]Strategy) *Table {
	t := &Table{routes: make(map[string]*route, len(aliases)), inflight: map[string]*atomic.Int64{}}
	for _, a := range aliases {
		r := &route{alias: a, strategy: cmp.Or[Strategy](strategies[a.Name], RoundRobin{})}
		byPriority := map[int]*Tier{}
		for i, d := range a.Deployments {
			es := edges[a.Name][i]
			if len(es) == 0 {
				continue
			}
			tr := byPriority[d.Priority]
			if tr == nil {
				tr = &Tier{load: t}
				byPriority[d.Priority] = tr
			}
			tr.groups = append(tr.groups, &group{weight: d.Weight, edges: es})
			tr.total += d.Weight
			tr.size += len(es)
			r.size += len(es)
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
			r.tiers = append(r.tiers, byPriority[p])
		}
		t.routes[a.Name] = r
		t.names = append(t.names, a.Name)
	}
	slices.SortFunc(t.names, cmp.Compare)
	return t
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

// Candidates returns the edges that can serve alias, in try order: tier by
// tier, each in the order of s, or of the alias's own strategy when s is
// nil. It is empty when the alias has no usable edge; nil with ok=false
// when the alias is unknown.
func (t *Table) Candidates(alias string, s Strategy) (edges []*sluice.Edge, ok bool) {
	r, ok := t.routes[alias]
	if !ok {
		return nil, false
	}
	if s == nil {
		s = r.strategy
	}
	out := make([]*sluice.Edge, 0, r.size)
	for _, tr := range r.tiers {
		out = s.Append(out, tr)
	}
	return out, true
}
