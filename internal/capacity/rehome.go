package capacity

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice/internal/store"
)

// Rehome makes the claims held here count in the domain their unit has
// now, after a catalog edit moved it (domainOf gives a unit's domain, ""
// when unknown): without it a claim granted before the edit counts only in
// the domain it was granted in, and the new one admits up to the unit's cap
// beside it until it ends — a long stream's worth of over-admission. Each
// moved claim gets a copy of its lease in the unit's new domain (reasserted,
// so it takes its slots there), renewed with the others and released with
// the claim (Release, with its outcome; a kept claim's by ReleaseLease,
// which names the copies' domains after its slot's, so they are released as
// its tokens are, without a rate limit's cooldown). Limit tokens held in
// their own domains stay where they are. The store must be a store.Reasserter; otherwise Rehome
// does nothing. It runs while no release or reassertion does (e.lost), so
// a claim either ends before it, and is not copied, or after it, and takes
// its copies along.
func (e *Engine) Rehome(ctx context.Context, domainOf func(unit string) string) {
	r, ok := e.claims.(store.Reasserter)
	if !ok {
		return
	}
	e.lost.Lock()
	defer e.lost.Unlock()
	moved := e.movedClaims(domainOf)
	for dom, leases := range moved {
		e.mu.Lock()
		held := make([]store.Held, 0, len(e.held[dom])+len(leases))
		for _, h := range e.held[dom] {
			h.TTL = e.leaseTTL
			held = append(held, h)
		}
		e.mu.Unlock()
		for _, h := range leases {
			h.TTL = e.leaseTTL
			held = append(held, h)
		}
		// The claims held in dom already go along: Reassert leaves live
		// leases as they are, and accepts dom's state for all of them.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		err := r.Reassert(rctx, dom, held)
		cancel()
		if err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "a catalog edit moved accounts to another capacity domain; their claims in flight could not be counted there",
				slog.String("domain", dom), slog.Int("leases", len(leases)), slog.Any("err", err))
			continue
		}
		e.mu.Lock()
		for _, h := range leases {
			e.holdLocked(dom, h)
			if _, ok := e.copies[h.Lease]; !ok {
				e.copied.Add(1)
			}
			e.copies[h.Lease] = append(e.copies[h.Lease], dom)
		}
		e.mu.Unlock()
		e.log.LogAttrs(ctx, slog.LevelInfo, "a catalog edit moved accounts to another capacity domain; their claims in flight count there now",
			slog.String("domain", dom), slog.Int("leases", len(leases)))
	}
}

// movedClaims returns, by their unit's new domain, the claims held in
// another one and not yet copied there.
func (e *Engine) movedClaims(domainOf func(unit string) string) map[string][]store.Held {
	e.mu.Lock()
	defer e.mu.Unlock()
	moved := map[string][]store.Held{}
	for dom, leases := range e.held {
		for _, h := range leases {
			to := domainOf(h.Candidate.Unit.ID)
			if to == "" || to == dom || e.held[to][h.Lease].Lease != "" {
				continue
			}
			if !containsHeld(moved[to], h.Lease) {
				moved[to] = append(moved[to], h)
			}
		}
	}
	return moved
}

func containsHeld(hs []store.Held, lease string) bool {
	for _, h := range hs {
		if h.Lease == lease {
			return true
		}
	}
	return false
}

// takeCopies returns the domains where Rehome copied lease, and forgets
// them: they are no longer renewed.
func (e *Engine) takeCopies(lease string) []string {
	if e.copied.Load() == 0 {
		return nil // no copy at all, as almost always: no lock on every release
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	doms, ok := e.copies[lease]
	if ok {
		delete(e.copies, lease)
		e.copied.Add(-1)
	}
	for _, d := range doms {
		delete(e.held[d], lease)
	}
	return doms
}
