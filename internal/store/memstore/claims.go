package memstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// defaultBase is the cooldown base of a unit with Base 0.
const defaultBase = time.Second

// Acquire grants a slot on the first candidate with room, or queues the
// ticket, as store.Claims describes. A queued ticket keeps the candidates of
// its first Acquire; a later Acquire only refreshes it. ctx is unused: the
// call never waits, apart from taking the domain's lock.
func (s *Store) Acquire(_ context.Context, a store.Acquire) (store.Grant, error) {
	if len(a.Candidates) == 0 {
		return store.Grant{}, fmt.Errorf("acquire %s: no candidates", a.Ticket)
	}
	d := s.domain(a.Domain)
	d.mu.Lock()
	g, wakes := d.acquire(a, s.now())
	d.mu.Unlock()
	s.wake.publish(wakes)
	return g, nil
}

// acquire decides a.Ticket's grant. When it grants a queued ticket and the
// unit still has room, it also returns a hint for the next waiter: several
// waiters woken for several free slots race, and the one that lost to no
// barging would otherwise sleep while a slot sits idle.
func (d *domain) acquire(a store.Acquire, now time.Time) (store.Grant, []wake) {
	if l := d.leases[a.Ticket]; l != nil {
		if now.Before(l.expires) {
			return l.grant(), nil
		}
		d.drop(l)
	}
	d.forget(now)
	q := d.queue(a.Queue)
	t := q.tickets[a.Ticket]
	if t != nil && !d.live(q, t, now) {
		t = nil // a dead waiter asking again is a newcomer, as redisstore has reaped it by then
	}
	class := clampClass(a.Class)
	var tag int64 // where a newcomer would queue, for no-barging
	if t != nil {
		t.deadline = now.Add(a.LeaseTTL)
		class = t.class // a queued ticket keeps its class and tag
	} else {
		// Dead waiters must not count in the class's fairness: a
		// tenant's tickets that died do not count against it later, as
		// redisstore reaps them before it decides.
		d.sweepClass(q, class, now)
		tag = q.fair[class].tag(a.Tenant, a.Weight)
	}
	if d.refused(a.Candidates, now) {
		var wakes []wake
		if t != nil {
			wakes = d.leave(q, t, now)
		}
		return store.Grant{Refused: true}, wakes
	}
	// Every candidate's unit takes the Cap and Reserve this Acquire lists,
	// tried or not (as in redisstore): wake-ups and the Inspector go by
	// the last ones listed.
	for i := range a.Candidates {
		c := &a.Candidates[i]
		u := d.unit(c.Unit.ID)
		u.cap = c.Unit.Cap
		u.setReserve(c.Unit.Reserve)
		u.pause = c.Unit.BackgroundPause
	}
	var (
		retryAt time.Time
		u       *unit
		room    bool // u can take a lease, credential caps apart
		rated   bool // u's windows and days were checked (room says how)
		cooling = true
	)
	for i := range a.Candidates {
		c := &a.Candidates[i] // not a copy: candidate lists can be long
		if u == nil || u.id != c.Unit.ID {
			u = d.units[c.Unit.ID]
			d.reap(u, now)
			room = d.eligible(u, class, now)
			if now.Before(u.until) && (retryAt.IsZero() || u.until.Before(retryAt)) {
				retryAt = u.until
			}
			// No release announces the end of a background pause either.
			if end := u.limited.Add(u.pause); class == store.Classes-1 && u.paused(now) && (retryAt.IsZero() || end.Before(retryAt)) {
				retryAt = end
			}
			rated = false
		}
		cooling = cooling && (u.cooling(now) || d.limitCooling(c, now))
		if !room || (c.CredentialCap > 0 && d.credInFlight(c.Credential, now) >= c.CredentialCap) {
			continue
		}
		if !rated {
			// The rolling windows free room without a release to
			// announce it: the waiter retries when they would pass. A
			// full credential, like a full unit, is announced by a
			// release, so only a candidate with a slot counts them.
			rated = true
			var at time.Time
			if room, at = u.rateRoom(c.Unit, a.Tokens, now); !room {
				if retryAt.IsZero() || at.Before(retryAt) {
					retryAt = at
				}
				continue
			}
		}
		if d.barred(q, u, t, class, tag, now) {
			room = false
			continue
		}
		lims, ok, at := d.limitsRoom(q, t, c, class, tag, a.Tokens, now)
		if !at.IsZero() && (retryAt.IsZero() || at.Before(retryAt)) {
			retryAt = at
		}
		if !ok {
			continue
		}
		probing := !u.until.IsZero()
		l := &lease{
			id:      a.Ticket,
			unit:    u,
			cred:    c.Credential,
			index:   i,
			expires: now.Add(a.LeaseTTL),
			probe:   probing,
			base:    c.Unit.Base,
			max:     c.Unit.Max,
			holds:   make([]hold, 0, 1+len(lims)),
		}
		l.holds = append(l.holds, u.reserve(c.Unit, a.Tokens, now))
		l.holds[0].probe = probing
		for j, lu := range lims {
			if lu != nil {
				h := lu.reserve(c.Limits[j], a.Tokens, now)
				h.base, h.max = c.Limits[j].Base, c.Limits[j].Max
				if h.probe = !lu.until.IsZero(); h.probe { // its cooldown is over: this is its probe
					lu.probe, l.probe = l.id, true
				}
				l.holds = append(l.holds, h)
			}
		}
		d.add(l)
		if probing {
			u.probe = l.id
		}
		var wakes []wake
		if t != nil {
			q.granted(t)
			d.dequeue(q, t)
			for _, h := range l.holds {
				if h.u.hasRoom(0, now) {
					wakes = d.first(h.u, now, wakes)
				}
			}
		}
		return l.grant(), wakes
	}
	if t == nil {
		t = d.enqueue(q, a, class, now)
	}
	return store.Grant{Position: d.position(q, t, now), RetryAt: retryAt, Cooling: cooling}, nil
}

// refused reports whether a candidate lists a Refuse limit with no free
// slot (see store.Unit.Refuse). A limit the domain has not seen holds no
// lease.
func (d *domain) refused(cands []store.Candidate, now time.Time) bool {
	for i := range cands {
		for j := range cands[i].Limits {
			lim := &cands[i].Limits[j]
			if !lim.Refuse || lim.Cap <= 0 {
				continue
			}
			if u := d.units[lim.ID]; u != nil {
				d.reap(u, now)
				if len(u.leases) >= lim.Cap {
					return true
				}
			}
		}
	}
	return false
}

// limitCooling reports whether a limit of c with a cooldown (Base > 0)
// is closed by one (see store.Grant.Cooling).
func (d *domain) limitCooling(c *store.Candidate, now time.Time) bool {
	for j := range c.Limits {
		if c.Limits[j].Base > 0 {
			if lu := d.units[c.Limits[j].ID]; lu != nil {
				d.reap(lu, now) // an expired probe lease no longer closes it
				if lu.cooling(now) {
					return true
				}
			}
		}
	}
	return false
}

// leave takes the queued ticket t out of q and returns the hints for the
// waiters it may have barred from a unit with room.
func (d *domain) leave(q *queue, t *ticket, now time.Time) []wake {
	d.dequeue(q, t)
	var wakes []wake
	for _, u := range t.units {
		d.reap(u, now) // a lease that expired frees its slot for them too
		if u.hasRoom(0, now) {
			wakes = d.first(u, now, wakes)
		}
	}
	return wakes
}

// limitsRoom checks the limits of candidate c for a ticket of class class
// (t when queued): each must have a free slot, pass its RPM, TPM and daily
// checks for tokens, and not be taken by no-barging. It returns the limit
// units, in the order of c.Limits (nil for a repeated ID or the
// candidate's own unit, which hold no second slot), whether all have room,
// and, when some were refused only for a window or their day, the earliest
// time all of those would pass. The units are in d.lims, valid until the
// next call.
func (d *domain) limitsRoom(q *queue, t *ticket, c *store.Candidate, class int, tag int64, tokens int, now time.Time) ([]*unit, bool, time.Time) {
	if len(c.Limits) == 0 {
		return nil, true, time.Time{}
	}
	d.lims = append(d.lims[:0], make([]*unit, len(c.Limits))...) // no allocation once d.lims has room
	lims := d.lims
	ok, blocked := true, false
	var at time.Time
	for j := range c.Limits {
		lim := &c.Limits[j]
		if lim.ID == c.Unit.ID || slices.ContainsFunc(c.Limits[:j], func(o store.Unit) bool { return o.ID == lim.ID }) {
			continue
		}
		lu := d.unit(lim.ID)
		lu.isLimit = true
		lims[j] = lu
		lu.cap = lim.Cap
		lu.setReserve(nil)
		d.reap(lu, now)
		if now.Before(lu.until) { // cooling (see store.Outcome.Cool): no release announces its end
			ok, at = false, latest(at, lu.until)
			continue
		}
		if !lu.hasRoom(class, now) {
			ok, blocked = false, true
			continue
		}
		if pass, when := lu.rateRoom(*lim, tokens, now); !pass {
			ok, at = false, latest(at, when)
			continue
		}
		if d.barred(q, lu, t, class, tag, now) {
			ok, blocked = false, true
		}
	}
	if blocked {
		at = time.Time{} // a release will announce the slot
	}
	return lims, ok, at
}

// hasRoom reports whether u can take a lease for a ticket of class c: it is
// not cooling, and it is below Cap less the slots reserved for classes
// more urgent than c.
func (u *unit) hasRoom(c int, now time.Time) bool {
	return !u.cooling(now) && len(u.leases) < u.limit(c)
}

// cooling reports whether a cooldown closes u: it is not over yet, or it
// is and the unit's single probe is out.
func (u *unit) cooling(now time.Time) bool {
	return now.Before(u.until) || !u.until.IsZero() && u.probe != ""
}

func (l *lease) grant() store.Grant {
	return store.Grant{Granted: true, Index: l.index, Lease: l.id, Expires: l.expires, Probe: l.probe}
}

// Release ends lease and applies out to its unit; an unknown, expired or
// already released lease is a no-op. It wakes the first waiter for the
// unit in every queue, unless the unit is cooling.
func (s *Store) Release(_ context.Context, domain, lease string, out store.Outcome) error {
	d := s.lookup(domain)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	wakes := d.release(lease, out, s.now())
	d.mu.Unlock()
	s.wake.publish(wakes)
	return nil
}

// release removes lease id, applies out, and returns the hints to send.
func (d *domain) release(id string, out store.Outcome, now time.Time) []wake {
	l := d.leases[id]
	if l == nil {
		return nil
	}
	u := l.unit
	wasProbe := u.probe == l.id
	if !now.Before(l.expires) {
		d.drop(l)
		return nil
	}
	d.reap(u, now)
	k := len(u.leases) // in flight, this lease included
	d.drop(l)
	scoped := false // the rate limit cools one of the limits, not u
	var wakes []wake
	for _, h := range l.holds[1:] {
		h.correct(out.Tokens, now)
		d.reap(h.u, now)
		lout := store.Outcome{Success: out.Success}
		if out.RateLimited && out.Cool == h.u.id && !scoped {
			scoped, lout = true, out
		}
		if !h.u.settle(lout, h.base, h.max, h.probe, now) {
			wakes = d.first(h.u, now, wakes)
		}
	}
	l.holds[0].correct(out.Tokens, now)
	if out.RateLimited {
		u.limited = now // scoped or not: the unit's recent 429 rate is no longer zero
	}
	if scoped {
		out = store.Outcome{} // u's cooldown and hidden cap are not concerned
	}
	u.learn(out, k)
	if u.settle(out, l.base, l.max, wasProbe, now) {
		return wakes // a waiter of u could not have the slot yet
	}
	return d.first(u, now, wakes)
}

// settle runs u's cooldown state machine for a released lease that ended
// with out (wasProbe: it was u's probe) and reports whether u is cooling.
func (u *unit) settle(out store.Outcome, base, ceiling time.Duration, wasProbe bool, now time.Time) bool {
	switch {
	case out.RateLimited:
		cool := out.RetryAfter
		if cool <= 0 {
			cool = backoff(base, ceiling, u.level)
		}
		if ceiling > 0 {
			cool = min(cool, ceiling)
		}
		if end := now.Add(cool); end.After(u.until) {
			u.cooled += end.Sub(latest(u.until, now)) // the part of the cooldown not already counted
			u.until = end
		}
		u.level++
	case out.Success:
		u.level = 0
		if wasProbe || (!u.until.IsZero() && !now.Before(u.until)) {
			u.until = time.Time{}
			u.probe = ""
		}
	}
	return now.Before(u.until)
}

// ProbeSucceeded opens the unit whose live probe is lease, as a successful
// Release would, and keeps the lease: it is an ordinary lease from now on.
func (s *Store) ProbeSucceeded(_ context.Context, domain, lease string) error {
	d := s.lookup(domain)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	wakes := d.probeSucceeded(lease, s.now())
	d.mu.Unlock()
	s.wake.publish(wakes)
	return nil
}

func (d *domain) probeSucceeded(id string, now time.Time) []wake {
	l := d.leases[id]
	if l == nil || !now.Before(l.expires) || !l.probe {
		return nil
	}
	var wakes []wake
	opened := false
	for i := range l.holds {
		h := &l.holds[i]
		if u := h.u; u.probe == id {
			u.until, u.probe, u.level = time.Time{}, "", 0
			h.probe, opened = false, true
			wakes = d.first(u, now, wakes)
		}
	}
	if opened {
		// Still a probe if it probes a unit something else opened
		// meanwhile (a success there): for that one it does nothing.
		l.probe = slices.ContainsFunc(l.holds, func(h hold) bool { return h.probe })
	}
	return wakes
}

// backoff is base·2^level, capped at ceiling (0 = uncapped).
func backoff(base, ceiling time.Duration, level int) time.Duration {
	if base <= 0 {
		base = defaultBase
	}
	if ceiling <= 0 {
		ceiling = math.MaxInt64 / 2
	}
	d := base
	for i := 0; i < level && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// Renew pushes the expiry of the live leases among leases to now+ttl;
// unknown and expired leases are ignored.
func (s *Store) Renew(_ context.Context, domain string, leases []string, ttl time.Duration) error {
	d := s.lookup(domain)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := s.now()
	for _, id := range leases {
		l := d.leases[id]
		if l == nil || !now.Before(l.expires) {
			continue
		}
		l.expires = now.Add(ttl)
		for _, h := range l.holds {
			if l.expires.Before(h.u.soonest) {
				h.u.soonest = l.expires
			}
		}
	}
	return nil
}

// Cancel takes ticket out of queue; if it holds a lease, the lease is
// released with a zero Outcome.
func (s *Store) Cancel(_ context.Context, domain, queue, ticket string) error {
	d := s.lookup(domain)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	now := s.now()
	var wakes []wake
	if q := d.queues[queue]; q != nil {
		if t := q.tickets[ticket]; t != nil {
			// The next in line may now be free of this ticket's claim to go first.
			wakes = d.leave(q, t, now)
		}
	}
	wakes = append(wakes, d.release(ticket, store.Outcome{}, now)...)
	d.mu.Unlock()
	s.wake.publish(wakes)
	return nil
}

// Reassert makes each lease of held live, with its slots and reservations
// in its unit and limits, whatever their room: the calls it stands for run
// already. A lease still live is left as it is. The in-process store never
// loses its state; package degraded uses this to count, in its local
// store, the calls a shared store admitted before it became unreachable.
func (s *Store) Reassert(_ context.Context, domain string, held []store.Held) error {
	d := s.domain(domain)
	d.mu.Lock()
	defer d.mu.Unlock()
	now := s.now()
	for i := range held {
		h := &held[i]
		if l := d.leases[h.Lease]; l != nil {
			if now.Before(l.expires) {
				continue
			}
			d.drop(l)
		}
		c := &h.Candidate
		u := d.unit(c.Unit.ID) // its cap stays the last Acquire's, as in redisstore
		l := &lease{
			id: h.Lease, unit: u, cred: c.Credential, expires: now.Add(h.TTL),
			base: c.Unit.Base, max: c.Unit.Max, holds: make([]hold, 0, 1+len(c.Limits)),
		}
		l.holds = append(l.holds, u.reserve(c.Unit, h.Tokens, now))
		for j := range c.Limits {
			lim := &c.Limits[j]
			if lim.ID == c.Unit.ID || slices.ContainsFunc(c.Limits[:j], func(o store.Unit) bool { return o.ID == lim.ID }) {
				continue // as in limitsRoom: one slot per distinct limit
			}
			lu := d.unit(lim.ID)
			lu.isLimit = true
			hl := lu.reserve(*lim, h.Tokens, now)
			hl.base, hl.max = lim.Base, lim.Max
			l.holds = append(l.holds, hl)
		}
		d.add(l)
	}
	return nil
}
