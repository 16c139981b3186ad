package storemodel

import (
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Units returns the state of ids in domain as store.Inspector describes,
// counting only live leases and live tickets.
func (m *Model) Units(domainID string, ids []string, now time.Time) []store.UnitState {
	d := m.domain(domainID)
	d.tidy(now)
	out := make([]store.UnitState, len(ids))
	for i, id := range ids {
		out[i].ID = id
		u := d.units[id]
		if u == nil {
			continue
		}
		st := &out[i]
		*st = store.UnitState{
			ID: id, InFlight: d.inFlight(u), Cap: u.cap, CoolingUntil: u.until, Level: u.level,
			Cooled: u.cooled, EffectiveCap: u.ecap,
		}
		switch {
		case u.probe != "":
			st.Probe = "in_flight"
		case !u.until.IsZero() && !now.Before(u.until):
			st.Probe = "available"
		}
		for _, q := range d.queues {
			for _, t := range q.tickets {
				if !contains(t.units, id) {
					continue
				}
				st.Waiting++
				st.WaitingByClass[t.class]++
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
	return out
}

// CredentialInFlight counts the live leases of each credential of ids.
func (m *Model) CredentialInFlight(domainID string, ids []string, now time.Time) map[string]int {
	d := m.domain(domainID)
	d.tidy(now)
	out := make(map[string]int, len(ids))
	for _, id := range ids {
		out[id] = d.credInFlight(id)
	}
	return out
}

// Holds returns the IDs of the live leases (true) and the live queued
// tickets (false) of domain.
func (m *Model) Holds(domainID string, now time.Time) map[string]bool {
	d := m.domain(domainID)
	d.tidy(now)
	ids := make(map[string]bool)
	for _, q := range d.queues {
		for _, t := range q.tickets {
			ids[t.id] = false
		}
	}
	for _, l := range d.leases {
		ids[l.id] = true
	}
	return ids
}

// Expires returns when each live lease of domain expires.
func (m *Model) Expires(domainID string, now time.Time) map[string]time.Time {
	d := m.domain(domainID)
	d.tidy(now)
	out := make(map[string]time.Time, len(d.leases))
	for _, l := range d.leases {
		out[l.id] = l.expires
	}
	return out
}
