package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Units returns the state of the units ids, in order; a unit the domain has
// not seen has only its ID set. It reaps expired leases of those units and
// dead waiters in the queues listing them, so Waiting counts live tickets.
func (s *Store) Units(_ context.Context, domain string, ids []string) ([]store.UnitState, error) {
	out := make([]store.UnitState, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	d := s.lookup(domain)
	if d == nil {
		return out, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := s.now()
	swept := make(map[string]bool)
	for i, id := range ids {
		u := d.units[id]
		if u == nil {
			continue
		}
		d.reap(u, now)
		for name := range u.waiting {
			if !swept[name] {
				swept[name] = true
				d.sweep(d.queues[name], now)
			}
		}
		out[i] = u.state(now)
		d.visibility(u, &out[i])
	}
	return out, nil
}

// visibility fills st.OldestByClass and st.WaitingByTenant from the
// tickets listing u in every queue that has one (all of them: no bound).
func (d *domain) visibility(u *unit, st *store.UnitState) {
	for name, n := range u.waiting {
		q := d.queues[name]
		if n <= 0 || q == nil {
			continue
		}
		for t := range q.all() {
			if !slices.Contains(t.units, u) {
				continue
			}
			if o := &st.OldestByClass[t.class]; o.IsZero() || t.arrived.Before(*o) {
				*o = t.arrived
			}
			if st.WaitingByTenant == nil {
				st.WaitingByTenant = make(map[string]int)
			}
			st.WaitingByTenant[t.tenant]++
		}
	}
}

// sweep dequeues every dead waiter of q.
func (d *domain) sweep(q *queue, now time.Time) {
	for t := range q.all() {
		d.live(q, t, now)
	}
}

// sweepClass dequeues the dead waiters of one class of q.
func (d *domain) sweepClass(q *queue, class int, now time.Time) {
	for e := q.order[class].Front(); e != nil; {
		next := e.Next()
		d.live(q, e.Value.(*ticket), now)
		e = next
	}
}

func (u *unit) state(now time.Time) store.UnitState {
	st := store.UnitState{ID: u.id, InFlight: len(u.leases), Cap: u.cap, EffectiveCap: u.ecap, CoolingUntil: u.until, Level: u.level, Cooled: u.cooled}
	for _, n := range u.waiting {
		st.Waiting += n
	}
	st.WaitingByClass = u.byClass
	switch {
	case u.probe != "":
		st.Probe = "in_flight"
	case !u.until.IsZero() && !now.Before(u.until):
		st.Probe = "available"
	}
	return st
}

// CredentialInFlight counts the live leases of each credential of ids; the
// map has an entry for every ID, 0 for a credential without leases.
func (s *Store) CredentialInFlight(_ context.Context, domain string, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	for _, id := range ids {
		out[id] = 0
	}
	d := s.lookup(domain)
	if d == nil {
		return out, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := s.now()
	for _, id := range ids {
		out[id] = d.credInFlight(id, now)
	}
	return out, nil
}
