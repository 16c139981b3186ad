package capacity

import (
	"context"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/store"
)

// A limit that spans capacity domains (store.Unit.Domain set: a tenant
// whose requests run on accounts of several domains) is held in a domain
// of its own, so that no one claim needs two Redis Cluster slots. A
// request takes a token of it there before it claims its slot: a claim in
// the limit's domain on the domain's gate (a unit without a cap) with the
// limit as its one limit, under the request's ticket ID, queued by class,
// fair tag and arrival behind the requests waiting for the same limits —
// FIFO and priority hold for a limit as they do for an account. Tokens are
// taken in the order of their domains, so two requests never each hold a
// token the other waits for. With every token held, the request claims its
// slot. If its accounts have no room, it waits in their queue, and gives
// back meanwhile the tokens of limits that only cap the requests in flight,
// to take them again when woken there: a request waiting for an upstream
// then holds no slot of its tenant or key, as with limits in the claim's
// domain (a key that refuses at its limit refuses a second request only
// while the first runs). It keeps the tokens of limits with a window (RPM,
// TPM, tokens per day), whose reservation a token given back would leave
// in the window each time: those count it while it waits. A request that
// misses a token waits for it in the limit's queue, out of its accounts'
// (where it would bar others from accounts it cannot use yet). A token is
// a lease like the slot's: renewed while held, reasserted if its store
// loses its state, lapsing when its replica dies. It is released right
// after the slot,
// with the tokens used (so a TPM or a day is corrected as for an in-domain
// limit, but never cooled: a rate limit is the account's), and given back
// when the request leaves without a slot (cancel, timeout, error). The
// limit's request and tokens are reserved at the token, so a token given
// back leaves its reservation in the limit's windows: never more admitted
// than the limit allows, sometimes less.

// gate is the unit of every token: it has no cap, so only the token's
// limits decide, and it is one unit per limit domain, whatever the number
// of limits (end users) held there.
var gate = store.Unit{ID: "gate"}

// token is the claim a request makes on the limits of one limit domain.
type token struct {
	domain string
	limits []store.Unit // Domain cleared: they are the token's own domain's
	held   bool
}

// tokens are the tokens one request holds or waits for, by domain, and
// whether its ticket waits in its accounts' queue.
type tokens struct {
	list   []token
	queued bool
}

// wanted says whether try must look at tokens: cands list a limit held
// elsewhere, or tokens of an earlier plan are still around. It allocates
// nothing, so a catalog of one domain pays a loop over its limits.
func (tk *tokens) wanted(cands []store.Candidate) bool {
	if len(tk.list) > 0 {
		return true
	}
	for i := range cands {
		for _, l := range cands[i].Limits {
			if l.Domain != "" {
				return true
			}
		}
	}
	return false
}

// domains returns the domains of the tokens held.
func (tk *tokens) domains() []string {
	var out []string
	for _, t := range tk.list {
		if t.held {
			out = append(out, t.domain)
		}
	}
	return out
}

// want returns the tokens cands need, one per limit domain, sorted by
// domain: every limit held elsewhere of any candidate, each once. A limit
// only some candidates list is taken all the same: a request waits for
// the limits of all the candidates it may run on.
func want(cands []store.Candidate) []token {
	var out []token
	for _, c := range cands {
		for _, l := range c.Limits {
			if l.Domain == "" {
				continue
			}
			i, found := slices.BinarySearchFunc(out, l.Domain, func(t token, d string) int { return strings.Compare(t.domain, d) })
			if !found {
				out = slices.Insert(out, i, token{domain: l.Domain})
			}
			if !slices.ContainsFunc(out[i].limits, func(u store.Unit) bool { return u.ID == l.ID }) {
				l.Domain = ""
				out[i].limits = append(out[i].limits, l)
			}
		}
	}
	return out
}

// withoutTokens returns cands without the limits held elsewhere, for the
// Acquire of the slot; cands is shared with the plan, so it is copied.
func withoutTokens(cands []store.Candidate) []store.Candidate {
	out := make([]store.Candidate, len(cands))
	for i, c := range cands {
		out[i] = c
		out[i].Limits = slices.DeleteFunc(slices.Clone(c.Limits), func(l store.Unit) bool { return l.Domain != "" })
	}
	return out
}

// free says whether giving t back and taking it again costs nothing: its
// limits only cap the requests in flight, with no window a token
// reserves in.
func (t token) free() bool {
	return !slices.ContainsFunc(t.limits, func(l store.Unit) bool {
		return l.RPM > 0 || l.TPM > 0 || l.DailyTokens > 0 || l.DailyRequests > 0
	})
}

// same says whether t and u claim the same limits in the same domain.
func (t token) same(u token) bool {
	return t.domain == u.domain && slices.EqualFunc(t.limits, u.limits, func(a, b store.Unit) bool { return a.ID == b.ID })
}

// queue is the queue of the token's requests in its domain: one per set
// of limits, so that requests waiting for one end user's limit never wait
// behind another's.
func (t token) queue() string {
	ids := make([]string, len(t.limits))
	for i, l := range t.limits {
		ids[i] = l.ID
	}
	return strings.Join(ids, "+")
}

// acquire is the Acquire of the token for the request a.
func (t token) acquire(a *store.Acquire) store.Acquire {
	return store.Acquire{
		Domain: t.domain, Ticket: a.Ticket, Queue: t.queue(), Candidates: []store.Candidate{{Unit: gate, Limits: t.limits}},
		LeaseTTL: a.LeaseTTL, Replica: a.Replica, Class: a.Class, Tenant: a.Tenant, Weight: a.Weight, Tokens: a.Tokens,
	}
}

// takeTokens makes the request a hold every token its candidates need, in
// domain order, giving back those it no longer needs. It returns a grant
// with Granted once all are held, else the answer for the first that is
// not (queued, refused) or the store's error.
func (e *Engine) takeTokens(ctx context.Context, a *store.Acquire, tk *tokens) (store.Grant, error) {
	need := want(a.Candidates)
	e.dropTokens(ctx, *a, tk, need)
	for i := range need {
		if j := slices.IndexFunc(tk.list, need[i].same); j >= 0 {
			need[i].held = tk.list[j].held
		}
	}
	tk.list = need
	for i := range tk.list {
		t := &tk.list[i]
		if t.held {
			continue
		}
		ta := t.acquire(a)
		g, err := e.acquire(ctx, ta)
		if err != nil || !g.Granted {
			return g, err
		}
		e.hold(t.domain, store.Held{Lease: g.Lease, Candidate: ta.Candidates[0], Tokens: a.Tokens})
		t.held = true
	}
	return store.Grant{Granted: true}, nil
}

// dropTokens gives back every token of tk that keep does not list: a held
// one is released, a queued one leaves its queue (one Cancel does both).
func (e *Engine) dropTokens(ctx context.Context, a store.Acquire, tk *tokens, keep []token) {
	kept := tk.list[:0]
	for _, t := range tk.list {
		if slices.ContainsFunc(keep, t.same) {
			kept = append(kept, t)
			continue
		}
		e.lost.RLock() // as releaseNow: a reassertion does not bring the token back
		e.unhold(t.domain, a.Ticket)
		e.cancel(ctx, t.domain, t.queue(), a.Ticket)
		e.lost.RUnlock()
	}
	tk.list = kept
}

// tokenOutcome is what the release of a token applies to its limits: the
// tokens used, never a rate limit, which is the account's (or its model
// unit's, in the account's domain).
func tokenOutcome(out store.Outcome) store.Outcome { return store.Outcome{Tokens: out.Tokens} }

// claimDomains is the domain a kept claim names (Claim.Keep): its slot's,
// followed by those of its tokens, joined by a byte no ID may hold (see
// store IDs); splitDomains undoes it.
func claimDomains(dom string, tokens []string) string {
	return strings.Join(append([]string{dom}, tokens...), "\x1f")
}

func splitDomains(domain string) []string { return strings.Split(domain, "\x1f") }
