package routing

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sluicehq/sluice"
)

// Strategy orders the edges of one priority tier: it appends every edge of
// t to out, most wanted first, and returns out. The capacity store then
// grants the first edge with room, so the order is where load goes when
// there is room, not a limit. Implementations are safe for concurrent use.
type Strategy interface {
	Append(out []*sluice.Edge, t *Tier) []*sluice.Edge
}

// strategies is every strategy, by the name the catalog gives it.
var strategies = map[string]Strategy{
	"round-robin":    RoundRobin{},
	"weighted":       Weighted{},
	"fill-first":     FillFirst{},
	"least-inflight": LeastInflight{},
}

// Lookup returns the strategy the catalog calls name, and false when there
// is none of that name.
func Lookup(name string) (Strategy, bool) {
	s, ok := strategies[name]
	return s, ok
}

var (
	_ Strategy = RoundRobin{}
	_ Strategy = Weighted{}
	_ Strategy = FillFirst{}
	_ Strategy = LeastInflight{}
)

// RoundRobin draws the deployments in a weighted random order (one with
// twice the weight comes first twice as often) and rotates the credentials
// of each deployment one step per request, so they share its load evenly.
type RoundRobin struct{}

// Append implements Strategy.
func (RoundRobin) Append(out []*sluice.Edge, t *Tier) []*sluice.Edge {
	return t.appendWeighted(out, (*group).appendRotated)
}

// Weighted draws the deployments as RoundRobin does, and the credentials of
// each deployment at random too: every request is drawn on its own, with
// no rotation counter that every request (and core) updates.
type Weighted struct{}

// Append implements Strategy.
func (Weighted) Append(out []*sluice.Edge, t *Tier) []*sluice.Edge {
	return t.appendWeighted(out, (*group).appendShuffled)
}

// FillFirst keeps the catalog order (deployments, then their credentials),
// so load concentrates on the first edge with room and the accounts after
// it stay idle until it is full: they are whole for a burst.
type FillFirst struct{}

// Append implements Strategy.
func (FillFirst) Append(out []*sluice.Edge, t *Tier) []*sluice.Edge {
	for _, g := range t.groups {
		out = append(out, g.edges...)
	}
	return out
}

// LeastInflight puts first the edges whose account has the most free slots
// (its max_inflight less the attempts this replica runs on it; an account
// without a cap counts as having all its slots free), ties in a random
// order. It counts this replica's attempts only: cheap, and with several
// replicas each spreads its own load; the capacity store still enforces
// every cap across them.
type LeastInflight struct{}

// Append implements Strategy.
func (LeastInflight) Append(out []*sluice.Edge, t *Tier) []*sluice.Edge {
	start := len(out)
	for _, g := range t.groups {
		out = append(out, g.edges...)
	}
	tier := out[start:]
	rand.Shuffle(len(tier), func(i, j int) { tier[i], tier[j] = tier[j], tier[i] })
	slices.SortStableFunc(tier, func(a, b *sluice.Edge) int {
		return t.load.free(b.Account) - t.load.free(a.Account)
	})
	return out
}

// free is the slots of account a not taken by this replica's attempts.
func (t *Table) free(a *sluice.Account) int {
	capacity := a.MaxInflight
	if capacity == 0 {
		capacity = math.MaxInt32
	}
	var running int64
	if n := t.inflight[a.ID]; n != nil {
		running = n.Load()
	}
	return capacity - int(running)
}

// appendWeighted appends the tier's deployments in a weighted random order,
// each through appendGroup.
func (t *Tier) appendWeighted(out []*sluice.Edge, appendGroup func(*group, []*sluice.Edge) []*sluice.Edge) []*sluice.Edge {
	if len(t.groups) == 1 || len(t.groups) > 64 { // the bitmask below holds 64; more is not a realistic tier
		for _, g := range t.groups {
			out = appendGroup(g, out)
		}
		return out
	}
	var picked uint64 // bitmask of groups already placed; tiers have few deployments
	remaining := t.total
	for range t.groups {
		n := rand.IntN(remaining)
		for i, g := range t.groups {
			if picked&(1<<i) != 0 {
				continue
			}
			if n < g.weight {
				picked |= 1 << i
				remaining -= g.weight
				out = appendGroup(g, out)
				break
			}
			n -= g.weight
		}
	}
	return out
}

// appendRotated appends the group's edges starting one further than the
// previous request did.
func (g *group) appendRotated(out []*sluice.Edge) []*sluice.Edge {
	if len(g.edges) == 1 {
		return append(out, g.edges[0])
	}
	start := int(g.next.Add(1)-1) % len(g.edges)
	out = append(out, g.edges[start:]...)
	return append(out, g.edges[:start]...)
}

// appendShuffled appends the group's edges in a random order.
func (g *group) appendShuffled(out []*sluice.Edge) []*sluice.Edge {
	start := len(out)
	out = append(out, g.edges...)
	mine := out[start:]
	rand.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
	return out
}
