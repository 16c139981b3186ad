// Package routing maps a model alias to the edges that can serve it, in the
// order the gateway should try them: priority tiers first (lower first),
// deployments inside a tier by weight, and round-robin over the credentials
// of a deployment. A Table is compiled once per catalog and is immutable;
// only its round-robin counters move. It depends only on package sluice.
package routing

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// group is the edges of one deployment, served round-robin.
type group struct {
	weight int
	edges  []*sluice.Edge
	next   atomic.Uint32
}

// tier is the deployments of one priority.
type tier struct {
	groups []*group
	total  int // sum of weights
}

type route struct {
	alias *sluice.Alias
	tiers []*tier
	size  int // number of edges over all tiers
}

// Table is the compiled routing of every alias. Immutable after Compile;
// safe for concurrent use.
type Table struct {
	routes map[string]*route
	names  []string
}

// Compile builds a Table. edges[alias][i] are the edges of the alias's i-th
// deployment; a deployment without edges is left out.
func Compile(aliases []*sluice.Alias, edges map[string][][]*sluice.Edge) *Table {
	t := &Table{routes: make(map[string]*route, len(aliases))}
	for _, a := range aliases {
		r := &route{alias: a}
		byPriority := map[int]*tier{}
		for i, d := range a.Deployments {
			es := edges[a.Name][i]
			if len(es) == 0 {
				continue
			}
			tr := byPriority[d.Priority]
			if tr == nil {
				tr = &tier{}
				byPriority[d.Priority] = tr
			}
			tr.groups = append(tr.groups, &group{weight: d.Weight, edges: es})
			tr.total += d.Weight
			r.size += len(es)
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

// Alias returns the alias with the name, or nil.
func (t *Table) Alias(name string) *sluice.Alias {
	if r, ok := t.routes[name]; ok {
		return r.alias
	}
	return nil
}

// Names lists every alias, sorted.
func (t *Table) Names() []string { return t.names }

// Candidates returns the edges that can serve alias, in try order. It is
// empty when the alias has no usable edge; nil with ok=false when the alias
// is unknown.
func (t *Table) Candidates(alias string) (edges []*sluice.Edge, ok bool) {
	r, ok := t.routes[alias]
	if !ok {
		return nil, false
	}
	out := make([]*sluice.Edge, 0, r.size)
	for _, tr := range r.tiers {
		out = tr.appendOrdered(out)
	}
	return out, true
}

// appendOrdered appends the tier's edges: deployments in a weighted random
// order (a deployment with twice the weight comes first twice as often), and
// inside each deployment its credentials rotated one step per request.
func (tr *tier) appendOrdered(out []*sluice.Edge) []*sluice.Edge {
	if len(tr.groups) == 1 || len(tr.groups) > 64 { // the bitmask below holds 64; more is not a realistic tier
		for _, g := range tr.groups {
			out = g.appendRotated(out)
		}
		return out
	}
	var picked uint64 // bitmask of groups already placed; tiers have few deployments
	remaining := tr.total
	for range tr.groups {
		n := rand.IntN(remaining)
		for i, g := range tr.groups {
			if picked&(1<<i) != 0 {
				continue
			}
			if n < g.weight {
				picked |= 1 << i
				remaining -= g.weight
				out = g.appendRotated(out)
				break
			}
			n -= g.weight
		}
	}
	return out
}

func (g *group) appendRotated(out []*sluice.Edge) []*sluice.Edge {
	if len(g.edges) == 1 {
		return append(out, g.edges[0])
	}
	start := int(g.next.Add(1)-1) % len(g.edges)
	out = append(out, g.edges[start:]...)
	return append(out, g.edges[:start]...)
}
