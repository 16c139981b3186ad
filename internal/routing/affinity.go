package routing

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// Affinity is strategy affinity: a conversation (its seed, see Seed) is
// kept on the account it last ran on, whose upstream prompt cache holds its
// prefix. The binding itself lives in the shared store and the placement
// (which account first, how long to wait for it) is the pipeline's; as a
// Strategy, Affinity orders the requests that carry no seed, by Fallback.
type Affinity struct {
	Fallback Strategy      // the order of requests without a seed
	TTL      time.Duration // a binding outlives its last use by this
	// Wait is how long a request of each priority class waits for its
	// bound account when that account is full, before it moves.
	Wait [3]time.Duration // by class, as sluice.Priorities
}

// Append implements Strategy: the order of a request without a seed.
func (a *Affinity) Append(out []*sluice.Edge, t *Tier) []*sluice.Edge {
	return a.Fallback.Append(out, t)
}

// Affinity returns the affinity settings of alias when its own strategy is
// affinity, else nil.
func (t *Table) Affinity(alias string) *Affinity {
	r, ok := t.routes[alias]
	if !ok {
		return nil
	}
	a, _ := r.strategy.(*Affinity)
	return a
}

// Place orders edges for a seed: the edges of account sticky (the seed's
// binding; "" for none) first, then the rest. With free (the free room of
// an edge's capacity unit) the rest go by their priority tier and, inside
// a tier, by free room, more first, ties in a random order, so that new
// conversations spread over idle accounts instead of piling onto the
// first; with free nil they keep their order. rank comes before all of it
// (a route policy's bound accounts before its fallback). It reorders edges
// in place.
func Place(edges []*sluice.Edge, rank func(*sluice.Edge) int, sticky string, free func(*sluice.Edge) int) {
	if free == nil {
		slices.SortStableFunc(edges, func(a, b *sluice.Edge) int {
			return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(notSticky(a, sticky), notSticky(b, sticky)))
		})
		return
	}
	rand.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
	room := make(map[*sluice.Edge]int, len(edges))
	for _, e := range edges {
		room[e] = free(e)
	}
	slices.SortStableFunc(edges, func(a, b *sluice.Edge) int {
		return cmp.Or(
			cmp.Compare(rank(a), rank(b)),
			cmp.Compare(notSticky(a, sticky), notSticky(b, sticky)),
			cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(room[b], room[a]),
		)
	})
}

func notSticky(e *sluice.Edge, sticky string) int {
	if sticky != "" && e.Account.ID == sticky {
		return 0
	}
	return 1
}
