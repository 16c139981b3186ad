package storemodel

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Acquire decides a's grant at now as store.Claims describes, and returns
// the wake-ups the decision requires.
func (m *Model) Acquire(a store.Acquire, now time.Time) (store.Grant, []Wake) {
	d := m.domain(a.Domain)
	d.tidy(now)
	// "A ticket that already holds a lease gets the same grant again."
	if l := d.lease(a.Ticket); l != nil {
		return l.grant(), nil
	}
	q := d.queue(a.Queue)
	t := q.ticket(a.Ticket)
	class := clampClass(a.Class)
	var tag int64
	if t != nil {
		// "A ticket keeps the Class, tag and candidates of its first
		// Acquire while it waits"; the Acquire keeps it alive.
		t.deadline = now.Add(a.LeaseTTL)
		class = t.class
	} else {
		tag = q.fair[class].tag(a.Tenant, a.Weight)
	}
	// Unit.Refuse: a Refuse limit with no free slot refuses the ticket,
	// taking a queued one out of Queue.
	if d.refused(a.Candidates) {
		var wakes []Wake
		if t != nil {
			wakes = d.leave(q, t, now)
		}
		return store.Grant{Refused: true}, wakes
	}
	// A unit's Cap and Reserve are the last an Acquire listed, for every
	// candidate it lists, tried or not (UnitState.Cap; wake-ups).
	for _, c := range a.Candidates {
		u := d.unit(c.Unit.ID)
		u.cap = c.Unit.Cap
		setReserve(u, c.Unit.Reserve)
		u.pause = c.Unit.BackgroundPause
	}
	var retryAt time.Time
	cooling := true
	for i := range a.Candidates {
		c := &a.Candidates[i]
		u := d.units[c.Unit.ID]
		room := d.eligible(u, class, now)
		// Grant.RetryAt: a cooling candidate reopens, a background pause
		// ends, a window or day would pass.
		if now.Before(u.until) {
			retryAt = earliest(retryAt, u.until)
		}
		if class == store.Classes-1 && u.paused(now) {
			retryAt = earliest(retryAt, u.limited.Add(u.pause))
		}
		// A full credential, like a full unit, is a slot a release will
		// announce: only a candidate with a slot counts its windows.
		room = room && (c.CredentialCap <= 0 || d.credInFlight(c.Credential) < c.CredentialCap)
		if room {
			var at time.Time
			if room, at = u.rateRoom(c.Unit, a.Tokens, now); !room {
				retryAt = earliest(retryAt, at)
			}
		}
		cooling = cooling && (u.cooling(now) || d.limitCooling(c, now))
		if !room {
			continue
		}
		if d.barred(q, u.id, t, class, tag) {
			continue
		}
		lims, ok, at := d.limitsRoom(q, t, c, class, tag, a.Tokens, now)
		retryAt = earliest(retryAt, at)
		if !ok {
			continue
		}
		return d.grant(q, t, a, i, u, lims, now)
	}
	if t == nil {
		t = d.enqueue(q, a, class, now)
	}
	return store.Grant{Position: q.position(t), RetryAt: retryAt, Cooling: cooling}, nil
}

// grant gives a's ticket a lease on candidate i (unit u, limit units lims).
func (d *domain) grant(q *queue, t *ticket, a store.Acquire, i int, u *unit, lims []*unit, now time.Time) (store.Grant, []Wake) {
	c := &a.Candidates[i]
	l := &lease{
		id: a.Ticket, cred: c.Credential, index: i, expires: now.Add(a.LeaseTTL),
		// A unit whose cooldown is over (until set) grants "exactly one
		// probe lease ... unit-wide".
		probe: !u.until.IsZero(),
		base:  c.Unit.Base, max: c.Unit.Max,
	}
	if l.probe {
		u.probe = l.id
	}
	l.holds = append(l.holds, u.take(c.Unit, a.Tokens, now))
	l.holds[0].probe = l.probe
	for j, lu := range lims {
		if lu == nil {
			continue
		}
		h := lu.take(c.Limits[j], a.Tokens, now)
		h.base, h.max = c.Limits[j].Base, c.Limits[j].Max
		if !lu.until.IsZero() { // its cooldown is over: this is its probe (Outcome.Cool)
			h.probe, lu.probe, l.probe = true, l.id, true
		}
		l.holds = append(l.holds, h)
	}
	d.leases = append(d.leases, l)
	var wakes []Wake
	if t != nil {
		q.fair[t.class].v = max(q.fair[t.class].v, t.tag) // V is the largest tag granted
		q.dequeue(t)
		// Several waiters woken for several slots race; the next one must
		// hear of a slot still free.
		for _, h := range l.holds {
			if d.hasRoom(h.u, 0, now) {
				wakes = d.first(h.u, now, wakes)
			}
		}
	}
	return l.grant(), wakes
}

func (l *lease) grant() store.Grant {
	return store.Grant{Granted: true, Index: l.index, Lease: l.id, Expires: l.expires, Probe: l.probe}
}

// refused reports whether a candidate lists a Refuse limit with no free
// slot: "in flight at Cap, Cap > 0".
func (d *domain) refused(cands []store.Candidate) bool {
	for _, c := range cands {
		for _, lim := range c.Limits {
			if lim.Refuse && lim.Cap > 0 && d.units[lim.ID] != nil && d.inFlight(d.units[lim.ID]) >= lim.Cap {
				return true
			}
		}
	}
	return false
}

// limitCooling: one of c's limits that has a cooldown (Base > 0) is closed
// by one (Grant.Cooling).
func (d *domain) limitCooling(c *store.Candidate, now time.Time) bool {
	for _, lim := range c.Limits {
		if lu := d.units[lim.ID]; lim.Base > 0 && lu != nil && lu.cooling(now) {
			return true
		}
	}
	return false
}

// limitsRoom checks each distinct limit of c (not the candidate's own unit,
// which holds no second slot): not cooling, a free slot for class, room in
// its windows and day, not taken by no-barging. It returns the limit units
// (nil for a repeat), whether all have room and, when some were refused
// only for a cooldown, a window or a day (and none for a slot, which a
// release announces), the time all of those pass.
func (d *domain) limitsRoom(q *queue, t *ticket, c *store.Candidate, class int, tag int64, tokens int, now time.Time) ([]*unit, bool, time.Time) {
	lims := make([]*unit, len(c.Limits))
	ok, blocked := true, false
	var at time.Time
	for j, lim := range c.Limits {
		if lim.ID == c.Unit.ID || slices.ContainsFunc(c.Limits[:j], func(o store.Unit) bool { return o.ID == lim.ID }) {
			continue
		}
		lu := d.unit(lim.ID)
		lims[j] = lu
		lu.cap = lim.Cap
		setReserve(lu, nil) // Limits have no Reserve
		switch pass, when := lu.rateRoom(lim, tokens, now); {
		case now.Before(lu.until):
			ok, at = false, latest(at, lu.until)
		case !d.hasRoom(lu, class, now):
			ok, blocked = false, true
		case !pass:
			ok, at = false, latest(at, when)
		case d.barred(q, lu.id, t, class, tag):
			ok, blocked = false, true
		}
	}
	if blocked {
		at = time.Time{}
	}
	return lims, ok, at
}

// Release ends lease as store.Claims describes and returns the wake-ups it
// requires.
func (m *Model) Release(domainID, id string, out store.Outcome, now time.Time) []Wake {
	d := m.domain(domainID)
	d.tidy(now)
	l := d.lease(id)
	if l == nil {
		return nil // "a second Release, or a Release of an expired lease, is a no-op"
	}
	u := l.holds[0].u
	wasProbe := u.probe == l.id
	k := d.inFlight(u) // in flight, this lease included (hidden caps)
	d.drop(l)
	scoped := false // Outcome.Cool names one of the lease's limits
	var wakes []Wake
	for _, h := range l.holds[1:] {
		h.correct(out.Tokens, now)
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
		u.limited = now // "the unit's last rate limit ... one scoped to a limit included"
	}
	if scoped {
		out = store.Outcome{}
	}
	u.learn(out, k)
	if u.settle(out, l.base, l.max, wasProbe, now) {
		return wakes
	}
	return d.first(u, now, wakes)
}

// settle is the cooldown state machine of a released lease of u and
// reports whether u is cooling after it.
func (u *unit) settle(out store.Outcome, base, ceiling time.Duration, wasProbe bool, now time.Time) bool {
	switch {
	case out.RateLimited:
		// "Base·2^level … capped at Max; a retry-after is honoured up to
		// Max as well".
		cool := out.RetryAfter
		if cool <= 0 {
			cool = backoff(base, ceiling, u.level)
		}
		if ceiling > 0 {
			cool = min(cool, ceiling)
		}
		if end := now.Add(cool); end.After(u.until) {
			u.cooled += end.Sub(latest(u.until, now)) // UnitState.Cooled: the part not already counted
			u.until = end
		}
		u.level++
	case out.Success:
		// "Success: resets the backoff level, ends a probe".
		u.level = 0
		if wasProbe || !u.until.IsZero() && !now.Before(u.until) {
			u.until, u.probe = time.Time{}, ""
		}
	}
	return now.Before(u.until)
}

func backoff(base, ceiling time.Duration, level int) time.Duration {
	if base <= 0 {
		base = defaultBase
	}
	d := base
	for i := 0; i < level && (ceiling <= 0 || d < ceiling) && d < time.Hour*24*365; i++ {
		d *= 2
	}
	if ceiling > 0 {
		d = min(d, ceiling)
	}
	return d
}

// learn is the AIMD of the hidden cap (store.Claims, "Hidden caps"), k
// being the in-flight count including the released lease.
func (u *unit) learn(out store.Outcome, k int) {
	switch {
	case out.RateLimited && k >= 2:
		if e := k - 1; (u.cap <= 0 || e < u.cap) && (u.ecap <= 0 || e < u.ecap) {
			u.ecap, u.top = e, k
		}
		if u.ecap > 0 {
			u.succ = -(k - 1) // the calls still in flight started before the lesson
		}
	case out.Success && u.ecap > 0:
		u.succ++
		if u.succ < patience(u.ecap, u.top) {
			return
		}
		u.ecap++
		u.succ = 0
		if u.cap > 0 && u.ecap >= u.cap || u.cap <= 0 && u.ecap > u.top {
			u.ecap, u.top = 0, 0
		}
	}
}

// patience is how many successes at ecap earn one more slot: ten rounds,
// a hundred before retrying the concurrency last rate limited.
func patience(ecap, top int) int {
	if ecap+1 >= top {
		return ecap * 100
	}
	return ecap * 10
}

// ProbeSucceeded ends the probe state of every unit whose live probe is
// lease, keeping the lease (store.Claims).
func (m *Model) ProbeSucceeded(domainID, id string, now time.Time) []Wake {
	d := m.domain(domainID)
	d.tidy(now)
	l := d.lease(id)
	if l == nil {
		return nil
	}
	var wakes []Wake
	for i := range l.holds {
		h := &l.holds[i]
		// "For a lease that is not the unit's live probe it does
		// nothing": a unit a success opened meanwhile stays as it is,
		// and the lease stays its probe (Grant.Probe).
		if h.probe && h.u.probe == id {
			h.u.until, h.u.probe, h.u.level = time.Time{}, "", 0
			h.probe = false
			wakes = d.first(h.u, now, wakes)
		}
	}
	l.probe = slices.ContainsFunc(l.holds, func(h hold) bool { return h.probe })
	return wakes
}

// Renew pushes the expiry of the live leases among ids to now+ttl.
func (m *Model) Renew(domainID string, ids []string, ttl time.Duration, now time.Time) {
	d := m.domain(domainID)
	d.tidy(now)
	for _, id := range ids {
		if l := d.lease(id); l != nil {
			l.expires = now.Add(ttl)
		}
	}
}

// Cancel removes a queued ticket and releases its lease, if it has one,
// with a zero Outcome.
func (m *Model) Cancel(domainID, queueName, id string, now time.Time) []Wake {
	d := m.domain(domainID)
	d.tidy(now)
	var wakes []Wake
	if q := d.queues[queueName]; q != nil {
		if t := q.ticket(id); t != nil {
			wakes = d.leave(q, t, now)
		}
	}
	return append(wakes, m.Release(domainID, id, store.Outcome{}, now)...)
}

// leave takes t out of q: the waiters it barred may now have a slot.
func (d *domain) leave(q *queue, t *ticket, now time.Time) []Wake {
	q.dequeue(t)
	var wakes []Wake
	for _, id := range t.units {
		if u := d.units[id]; d.hasRoom(u, 0, now) {
			wakes = d.first(u, now, wakes)
		}
	}
	return wakes
}

// first is the wake-up every store owes for u: in each queue listing it,
// the first live ticket listing u, if it could take a slot of u now.
// Stores may wake more (Waker: hints may be duplicated).
func (d *domain) first(u *unit, now time.Time, wakes []Wake) []Wake {
	for _, q := range d.queues {
		for n, t := range q.tickets {
			if n > maxScan {
				break
			}
			if slices.Contains(t.units, u.id) {
				if d.eligible(u, t.class, now) {
					wakes = append(wakes, Wake{Replica: t.replica, Ticket: t.id})
				}
				break
			}
		}
	}
	return wakes
}

// Lose forgets every state of domain, as a shared store that lost it
// (Redis restarted empty, or flushed; store.Reasserter): leases, queues,
// cooldowns, learned caps, windows and days. What a replica still holds
// comes back with its Reassert.
func (m *Model) Lose(domainID string) { delete(m.domains, domainID) }

// Reassert makes each lease of held live again, with its slots and
// reservations in its unit and limits whatever their room, unless it is
// still live; "Leases are not reasserted as probes" (store.Reasserter).
// Held carries no candidate index: a reasserted lease is granted as
// candidate 0 when its ticket asks again.
func (m *Model) Reassert(domainID string, held []store.Held, now time.Time) {
	d := m.domain(domainID)
	d.tidy(now)
	for _, h := range held {
		if d.lease(h.Lease) != nil {
			continue
		}
		c := &h.Candidate
		l := &lease{id: h.Lease, cred: c.Credential, expires: now.Add(h.TTL), base: c.Unit.Base, max: c.Unit.Max}
		l.holds = append(l.holds, d.unit(c.Unit.ID).take(c.Unit, h.Tokens, now))
		for j, lim := range c.Limits {
			if lim.ID == c.Unit.ID || slices.ContainsFunc(c.Limits[:j], func(o store.Unit) bool { return o.ID == lim.ID }) {
				continue // one slot per distinct limit, as at a grant
			}
			hl := d.unit(lim.ID).take(lim, h.Tokens, now)
			hl.base, hl.max = lim.Base, lim.Max
			l.holds = append(l.holds, hl)
		}
		d.leases = append(d.leases, l)
	}
}
