package redisstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// maxCandidates bounds the work of one Acquire script (and keeps its Lua
// unpack of 7 fields per candidate below Lua's stack limit of 8,000).
// Routing passes a short, ordered list; a thousand is already a bug.
const maxCandidates = 1000

// maxLimits bounds the Candidate.Limits of one Acquire, summed over its
// candidates, likewise.
const maxLimits = 4000

// Acquire grants a slot on the first eligible candidate or queues the
// ticket, in one script run (one round trip once the script is loaded).
// See store.Claims for the semantics.
func (s *Store) Acquire(ctx context.Context, a store.Acquire) (store.Grant, error) {
	if len(a.Candidates) == 0 || len(a.Candidates) > maxCandidates {
		return store.Grant{}, fmt.Errorf("redisstore: acquire %s: %d candidates, want 1 to %d", a.Ticket, len(a.Candidates), maxCandidates)
	}
	if err := checkIDs(a); err != nil {
		return store.Grant{}, err
	}
	dom := s.domain(a.Domain)
	known := dom.gen.Load()
	limits := 0 // at most; appendLimits leaves out repeats
	for i := range a.Candidates {
		limits += len(a.Candidates[i].Limits)
	}
	args := acquireScript.call(dom.keyArgs, 11+15*len(a.Candidates)+9*limits)
	args = append(args, a.Ticket, a.Queue, a.Replica, ttlMillis(a.LeaseTTL), s.wake,
		min(max(a.Class, 0), store.Classes-1), len(a.Candidates), max(a.Tokens, 0), a.Tenant, max(a.Weight, 1), known)
	var lims []store.Unit // the limits section: each candidate's distinct limits
	for i := range a.Candidates {
		c := &a.Candidates[i]
		r1, r2 := reserves(c.Unit.Reserve)
		start := len(lims)
		lims = appendLimits(lims, c)
		args = append(args, c.Unit.ID, c.Credential, c.Unit.Cap, c.CredentialCap,
			ceilMillis(c.Unit.Base), ceilMillis(c.Unit.Max), r1, r2, max(c.Unit.RPM, 0), max(c.Unit.TPM, 0),
			max(c.Unit.DailyTokens, 0), start, len(lims)-start, ceilMillis(c.Unit.BackgroundPause),
			max(c.Unit.DailyRequests, 0))
	}
	if len(lims) > maxLimits {
		return store.Grant{}, fmt.Errorf("redisstore: acquire %s: %d limits over all candidates, want at most %d", a.Ticket, len(lims), maxLimits)
	}
	for _, l := range lims {
		args = append(args, l.ID, max(l.Cap, 0), max(l.RPM, 0), max(l.TPM, 0), max(l.DailyTokens, 0), flag(l.Refuse),
			ceilMillis(l.Base), ceilMillis(l.Max), max(l.DailyRequests, 0))
	}
	v, err := s.fcall(ctx, acquireScript, args).Int64Slice()
	if err != nil {
		return store.Grant{}, unavailable("acquire "+a.Ticket, err)
	}
	if len(v) == 2 && v[0] == 2 {
		return store.Grant{}, fmt.Errorf("redisstore: acquire %s: %w", a.Ticket, store.ErrStateLost)
	}
	if len(v) == 2 && v[0] == 3 {
		return store.Grant{Refused: true}, nil
	}
	if len(v) < 5 {
		return store.Grant{}, fmt.Errorf("redisstore: acquire %s: unexpected reply %v", a.Ticket, v)
	}
	if known == 0 {
		dom.gen.CompareAndSwap(0, v[len(v)-1]) // the first decision: the generation it was made in
	}
	if v[0] == 1 {
		return store.Grant{
			Granted: true,
			Index:   int(v[1]),
			Lease:   a.Ticket,
			Expires: time.UnixMilli(v[2]),
			Probe:   v[3] == 1,
		}, nil
	}
	g := store.Grant{Position: int(v[1]), Cooling: v[3] == 1}
	if v[2] != 0 {
		g.RetryAt = time.UnixMilli(v[2])
	}
	return g, nil
}

// Release drops the lease once, applies out to its unit and publishes
// wake-ups, in one script run. Releasing an unknown, expired or already
// released lease is a no-op.
func (s *Store) Release(ctx context.Context, domain, lease string, out store.Outcome) error {
	args := append(releaseScript.call(s.domain(domain).keyArgs, 7),
		lease, flag(out.RateLimited), ceilMillis(out.RetryAfter), flag(out.Success), s.wake, max(out.Tokens, 0), out.Cool)
	err := s.fcall(ctx, releaseScript, args).Err()
	if err != nil {
		return unavailable("release "+lease, err)
	}
	return nil
}

// Renew pushes the expiry of every live lease in leases to now+ttl (Redis
// time) in one script run; unknown or expired leases are ignored. It fails
// with store.ErrStateLost when the state was lost since this replica's
// last decision.
func (s *Store) Renew(ctx context.Context, domain string, leases []string, ttl time.Duration) error {
	if len(leases) == 0 {
		return nil
	}
	dom := s.domain(domain)
	args := renewScript.call(dom.keyArgs[renewKeys:renewKeys+3], 2+len(leases))
	args = append(args, ttlMillis(ttl), dom.gen.Load())
	for _, l := range leases {
		args = append(args, l)
	}
	n, err := s.fcall(ctx, renewScript, args).Int64()
	if err != nil {
		return unavailable("renew", err)
	}
	if n < 0 {
		return fmt.Errorf("redisstore: renew: %w", store.ErrStateLost)
	}
	return nil
}

// ProbeSucceeded opens the unit whose live probe is lease and keeps the
// lease, in one script run; see store.Claims.
func (s *Store) ProbeSucceeded(ctx context.Context, domain, lease string) error {
	if err := s.fcall(ctx, probeScript, append(probeScript.call(s.domain(domain).keyArgs, 2), lease, s.wake)).Err(); err != nil {
		return unavailable("open probe "+lease, err)
	}
	return nil
}

// Reassert makes the leases of held live again, unless they are, and
// accepts the current generation of the domain's state, in one script
// run; see store.Reasserter.
func (s *Store) Reassert(ctx context.Context, domain string, held []store.Held) error {
	dom := s.domain(domain)
	args := reassertScript.call(dom.keyArgs, 1+14*len(held))
	args = append(args, len(held))
	var lims []store.Unit
	for i := range held {
		h := &held[i]
		c := &h.Candidate
		start := len(lims)
		lims = appendLimits(lims, c)
		args = append(args, h.Lease, ttlMillis(h.TTL), c.Unit.ID, c.Credential, 0, ceilMillis(c.Unit.Base), ceilMillis(c.Unit.Max),
			max(h.Tokens, 0), max(c.Unit.RPM, 0), max(c.Unit.TPM, 0), max(c.Unit.DailyTokens, 0), start, len(lims)-start,
			max(c.Unit.DailyRequests, 0))
	}
	for _, l := range lims {
		args = append(args, l.ID, max(l.RPM, 0), max(l.TPM, 0), max(l.DailyTokens, 0), ceilMillis(l.Base), ceilMillis(l.Max),
			max(l.DailyRequests, 0))
	}
	gen, err := s.fcall(ctx, reassertScript, args).Int64()
	if err != nil {
		return unavailable("reassert", err)
	}
	dom.gen.Store(gen)
	return nil
}

// appendLimits appends the limits of c that hold a slot of their own: not
// c's unit, and each ID once.
func appendLimits(lims []store.Unit, c *store.Candidate) []store.Unit {
	for j, l := range c.Limits {
		if l.ID == c.Unit.ID || slices.ContainsFunc(c.Limits[:j], func(o store.Unit) bool { return o.ID == l.ID }) {
			continue // no second slot in the same unit
		}
		lims = append(lims, l)
	}
	return lims
}

// Cancel removes a queued ticket and releases, with a zero Outcome, a lease
// it was granted meanwhile. queue is not needed: the ticket's record names
// its queue.
func (s *Store) Cancel(ctx context.Context, domain, queue, ticket string) error {
	err := s.fcall(ctx, cancelScript, append(cancelScript.call(s.domain(domain).keyArgs, 2), ticket, s.wake)).Err()
	if err != nil {
		return unavailable("cancel "+ticket, err)
	}
	return nil
}

// reserves returns the slots of a unit that classes 1 and 2 may not use:
// Reserve[0], and Reserve[0] + Reserve[1] (missing or negative entries
// count as 0).
func reserves(r []int) (r1, r2 int) {
	if len(r) > 0 {
		r1 = max(r[0], 0)
	}
	r2 = r1
	if len(r) > 1 {
		r2 += max(r[1], 0)
	}
	return r1, r2
}

// ceilMillis rounds d up to whole milliseconds, the scripts' unit, so a
// positive duration never becomes 0 (which means "none" for RetryAfter and
// "default" for Base).
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Milliseconds()
}

// ttlMillis is ceilMillis for a TTL, at least 1 ms, so a lease or ticket is
// never dead on arrival.
func ttlMillis(d time.Duration) int64 { return max(ceilMillis(d), 1) }

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkIDs checks every ID Acquire stores; it does not allocate unless one
// is bad.
func checkIDs(a store.Acquire) error {
	for _, id := range [...]struct{ what, id string }{
		{"domain", a.Domain}, {"ticket", a.Ticket}, {"queue", a.Queue}, {"replica", a.Replica}, {"tenant", a.Tenant},
	} {
		if err := checkID(id.what, id.id); err != nil {
			return err
		}
	}
	for _, c := range a.Candidates {
		if err := checkID("unit", c.Unit.ID); err != nil {
			return err
		}
		if err := checkID("credential", c.Credential); err != nil {
			return err
		}
		for _, l := range c.Limits {
			if err := checkID("limit", l.ID); err != nil {
				return err
			}
		}
	}
	return nil
}
