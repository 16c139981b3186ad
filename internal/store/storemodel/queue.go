package storemodel

import (
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

func (q *queue) ticket(id string) *ticket {
	for _, t := range q.tickets {
		if t.id == id {
			return t
		}
	}
	return nil
}

// tag is the WFQ virtual finish tag a new ticket of tenant would get:
// max(V, F_t) + 1000000/Weight, Weight ≤ 0 counting as 1 (Acquire.Tenant).
func (f *fairness) tag(tenant string, weight int) int64 {
	start := f.v
	if t := f.tenants[tenant]; t != nil {
		start = max(start, t.f)
	}
	return start + max(tagScale/int64(max(weight, 1)), 1)
}

// enqueue queues a's ticket "behind every ticket of its class with a tag up
// to its own", ahead of the rest and of every less urgent class.
func (d *domain) enqueue(q *queue, a store.Acquire, class int, now time.Time) *ticket {
	f := &q.fair[class]
	d.seq++
	t := &ticket{
		id: a.Ticket, replica: a.Replica, tenant: a.Tenant, class: class, tag: f.tag(a.Tenant, a.Weight),
		arrival: d.seq, deadline: now.Add(a.LeaseTTL), arrived: now,
	}
	if f.tenants == nil {
		f.tenants = make(map[string]*tenantTag)
	}
	tt := f.tenants[a.Tenant]
	if tt == nil {
		tt = &tenantTag{}
		f.tenants[a.Tenant] = tt
	}
	tt.f = t.tag
	tt.n++
	f.n++
	for _, c := range a.Candidates {
		for _, id := range append([]string{c.Unit.ID}, limitIDs(c)...) {
			if !contains(t.units, id) {
				d.unit(id) // a unit is known once a ticket lists it (Inspector)
				t.units = append(t.units, id)
			}
		}
	}
	i := 0
	for i < len(q.tickets) && (q.tickets[i].class < class || q.tickets[i].class == class && q.tickets[i].tag <= t.tag) {
		i++
	}
	q.tickets = append(q.tickets[:i], append([]*ticket{t}, q.tickets[i:]...)...)
	return t
}

func limitIDs(c store.Candidate) []string {
	ids := make([]string, len(c.Limits))
	for i, l := range c.Limits {
		ids[i] = l.ID
	}
	return ids
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// dequeue takes t out of q. "V and the F_t are forgotten when the class of
// the queue has no ticket left (and F_t when t has none left in it)".
func (q *queue) dequeue(t *ticket) {
	for i, w := range q.tickets {
		if w == t {
			q.tickets = append(q.tickets[:i], q.tickets[i+1:]...)
			break
		}
	}
	f := &q.fair[t.class]
	if f.n--; f.n <= 0 {
		*f = fairness{}
	} else if tt := f.tenants[t.tenant]; tt != nil {
		if tt.n--; tt.n <= 0 {
			delete(f.tenants, t.tenant)
		}
	}
}

// barred is no-barging: "a candidate is granted only if no live ticket
// ahead of this one in Queue lists the same unit"; a newcomer (t nil) of
// class and tag stands behind every more urgent ticket and those of its
// class with a tag up to its own. More than maxScan ahead bars every unit.
func (d *domain) barred(q *queue, unit string, t *ticket, class int, tag int64) bool {
	n := 0
	for _, w := range q.tickets {
		switch {
		case w.class > class, w == t, t == nil && w.class == class && w.tag > tag:
			return false
		case n == maxScan || contains(w.units, unit):
			return true
		}
		n++
	}
	return false
}

// position counts the live tickets ahead of t.
func (q *queue) position(t *ticket) int {
	for i, w := range q.tickets {
		if w == t {
			return i
		}
	}
	return -1
}
