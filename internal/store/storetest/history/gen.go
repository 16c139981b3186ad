package history

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Start is the fake clock's time at the start of every history: a few
// minutes before a UTC midnight, so that histories cross a day.
var Start = time.Date(2026, 3, 1, 23, 57, 0, 0, time.UTC)

// Times are chosen so that the stores' clocks (Go's ns, Redis's ms) agree
// exactly and no deadline ever falls on an instant the clock stops at: the
// clock moves in steps of 10 ms and every TTL ends at 5 ms past one, so
// whether a lease or a waiter is still live at its very deadline (a
// boundary the stores do not promise alike) never comes up. RPM and TPM
// limits divide a minute into whole milliseconds.
var (
	ttls        = []time.Duration{2005 * time.Millisecond, 10005 * time.Millisecond, 60005 * time.Millisecond}
	steps       = []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, time.Second, 3 * time.Second, 20 * time.Second, 61 * time.Second}
	rpms        = []int{2, 3, 4, 6, 10}
	tpms        = []int{600, 1000, 1200}
	retryAfters = []time.Duration{0, 0, 200 * time.Millisecond, time.Second, 4 * time.Second}
)

// catalog is the generator's view of the units of a history, which its
// catalog edits change between acquires.
type catalog struct {
	units  []store.Unit
	domain []string // of each unit
	creds  [][]string
	limits []store.Unit
}

// Generate returns the history of seed, of about n operations.
func Generate(seed uint64, n int) []Op {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	c := newCatalog(r)
	var (
		ops     []Op
		tickets []store.Acquire // every ticket acquired so far, as first asked
	)
	pick := func() (store.Acquire, bool) {
		if len(tickets) == 0 {
			return store.Acquire{}, false
		}
		// Recent tickets are the live ones: favour them.
		i := len(tickets) - 1 - min(r.IntN(len(tickets)), r.IntN(len(tickets)))
		return tickets[i], true
	}
	for len(ops) < n {
		switch p := r.IntN(100); {
		case p < 30:
			a := c.acquire(r, fmt.Sprintf("t%d", len(tickets)))
			tickets = append(tickets, a)
			ops = append(ops, Op{Kind: Acquire, Acquire: a})
		case p < 42:
			if a, ok := pick(); ok {
				ops = append(ops, Op{Kind: Acquire, Acquire: a})
			}
		case p < 62:
			if a, ok := pick(); ok {
				ops = append(ops, Op{Kind: Release, Domain: a.Domain, Lease: a.Ticket, Out: outcome(r, a)})
			}
		case p < 66:
			if a, ok := pick(); ok {
				ops = append(ops, Op{Kind: Renew, Domain: a.Domain, Lease: a.Ticket, TTL: ttls[r.IntN(len(ttls))]})
			}
		case p < 72:
			if a, ok := pick(); ok {
				ops = append(ops, Op{Kind: Cancel, Domain: a.Domain, Queue: a.Queue, Lease: a.Ticket})
			}
		case p < 77:
			if a, ok := pick(); ok {
				ops = append(ops, Op{Kind: Probe, Domain: a.Domain, Lease: a.Ticket})
			}
		case p < 88:
			ops = append(ops, Op{Kind: Advance, Step: steps[r.IntN(len(steps))]})
		case p < 89:
			ops = append(ops, Op{Kind: Lose, Domain: domains[r.IntN(len(domains))]})
		case p < 90:
			ops = append(ops, Op{Kind: Outage})
		case p < 95:
			// Inspections come now and then, not after every step: an
			// Inspector may tidy up as it reads (memstore reaps dead
			// waiters), which would hide a store that tidies too late
			// when deciding.
			ops = append(ops, Op{Kind: Inspect, Domain: domains[r.IntN(len(domains))]})
		case p < 97:
			if a, ok := pick(); ok {
				ops = append(ops, Op{Kind: Reassert, Domain: a.Domain, Held: store.Held{
					Lease: a.Ticket, Candidate: a.Candidates[r.IntN(len(a.Candidates))], Tokens: a.Tokens, TTL: ttls[r.IntN(len(ttls))],
				}})
			}
		default:
			c.edit(r)
		}
	}
	for _, d := range domains {
		ops = append(ops, Op{Kind: Inspect, Domain: d})
	}
	return ops
}

// domains are the capacity domains of every history; a catalog edit moves
// a unit between them.
var domains = []string{"d0", "d1"}

func newCatalog(r *rand.Rand) *catalog {
	c := &catalog{}
	for i := range 1 + r.IntN(3) {
		c.units = append(c.units, unit(r, fmt.Sprintf("u%d", i)))
		c.domain = append(c.domain, domains[r.IntN(2)])
		var creds []string
		for j := range 1 + r.IntN(2) {
			creds = append(creds, fmt.Sprintf("c%d.%d", i, j))
		}
		c.creds = append(c.creds, creds)
	}
	for i := range r.IntN(3) {
		lim := store.Unit{ID: fmt.Sprintf("l%d", i), Cap: r.IntN(4)}
		if r.IntN(4) == 0 {
			lim.RPM = rpms[r.IntN(len(rpms))]
		}
		if r.IntN(5) == 0 {
			lim.TPM = tpms[r.IntN(len(tpms))]
		}
		if r.IntN(8) == 0 {
			lim.DailyTokens = 1500 + r.IntN(2)*1000
		}
		lim.Refuse = lim.Cap > 0 && r.IntN(5) == 0
		if r.IntN(3) == 0 {
			lim.Base, lim.Max = 200*time.Millisecond, 3*time.Second
		}
		c.limits = append(c.limits, lim)
	}
	return c
}

func unit(r *rand.Rand, id string) store.Unit {
	u := store.Unit{ID: id, Cap: []int{0, 1, 1, 2, 2, 3}[r.IntN(6)]}
	if u.Cap >= 2 && r.IntN(3) == 0 {
		u.Reserve = [][]int{{1}, {0, 1}, {1, 1}}[r.IntN(3)]
	}
	if r.IntN(4) == 0 {
		u.RPM = rpms[r.IntN(len(rpms))]
	}
	if r.IntN(4) == 0 {
		u.TPM = tpms[r.IntN(len(tpms))]
	}
	if r.IntN(10) == 0 {
		u.DailyTokens = 2000 + r.IntN(2)*3000
	}
	if r.IntN(10) == 0 {
		u.DailyRequests = 3 + r.IntN(3)
	}
	u.Base = []time.Duration{0, 100 * time.Millisecond, time.Second}[r.IntN(3)]
	u.Max = []time.Duration{0, 2 * time.Second, 10 * time.Second}[r.IntN(3)]
	if r.IntN(5) == 0 {
		u.BackgroundPause = []time.Duration{500 * time.Millisecond, 5 * time.Second}[r.IntN(2)]
	}
	return u
}

// edit changes the catalog: a unit's cap, or the domain it lives in.
func (c *catalog) edit(r *rand.Rand) {
	i := r.IntN(len(c.units))
	if r.IntN(2) == 0 {
		c.units[i].Cap = r.IntN(4)
		return
	}
	c.domain[i] = domains[r.IntN(2)]
}

// acquire returns a new ticket's Acquire: candidates on units of one
// domain, some with limits.
func (c *catalog) acquire(r *rand.Rand, ticket string) store.Acquire {
	first := r.IntN(len(c.units))
	dom := c.domain[first]
	a := store.Acquire{
		Domain:   dom,
		Ticket:   ticket,
		Queue:    []string{"q0", "q0", "q1"}[r.IntN(3)],
		LeaseTTL: ttls[r.IntN(len(ttls))],
		Replica:  []string{"r0", "r1"}[r.IntN(2)],
		Class:    r.IntN(store.Classes),
		Tenant:   []string{"", "a", "a", "b"}[r.IntN(4)],
		Weight:   r.IntN(4),
	}
	if r.IntN(2) == 0 {
		a.Tokens = []int{50, 200, 700, 1500}[r.IntN(4)]
	}
	var lims []store.Unit
	for _, lim := range c.limits {
		if r.IntN(2) == 0 {
			lims = append(lims, lim)
		}
	}
	for i := range c.units {
		j := (first + i) % len(c.units)
		if c.domain[j] != dom || (i > 0 && r.IntN(2) == 0) {
			continue
		}
		cand := store.Candidate{Unit: c.units[j], Credential: c.creds[j][r.IntN(len(c.creds[j]))], Limits: lims}
		if r.IntN(5) == 0 {
			cand.CredentialCap = 1
		}
		a.Candidates = append(a.Candidates, cand)
	}
	return a
}

// outcome is a random end of a's call.
func outcome(r *rand.Rand, a store.Acquire) store.Outcome {
	var out store.Outcome
	switch p := r.IntN(10); {
	case p < 6:
		out.Success = true
	case p < 8:
		out.RateLimited = true
		out.RetryAfter = retryAfters[r.IntN(len(retryAfters))]
		if lims := a.Candidates[0].Limits; len(lims) > 0 && r.IntN(3) == 0 {
			out.Cool = lims[r.IntN(len(lims))].ID
		}
	}
	if r.IntN(2) == 0 {
		out.Tokens = []int{10, 300, 900}[r.IntN(3)]
	}
	return out
}
