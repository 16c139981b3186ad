package memstore

import (
	"container/list"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// maxScan bounds the tickets queued ahead of a ticket that no-barging looks
// at: a ticket with more live tickets ahead of it is barred from every unit.
const maxScan = 64

// domain is the state of one capacity domain. mu guards all of it, units,
// leases, tickets and queues included.
type domain struct {
	mu     sync.Mutex
	units  map[string]*unit
	leases map[string]*lease              // by lease ID (= ticket); may hold expired leases until reaped
	creds  map[string]map[*lease]struct{} // leases by credential ID
	queues map[string]*queue
	stamp  uint64 // the last unit.mark handed out
}

// unit is a capacity unit: its leases and its cooldown state.
type unit struct {
	id      string
	cap     int // the last Cap an Acquire listed
	leases  map[*lease]struct{}
	soonest time.Time // no lease of the unit expires before it
	until   time.Time // cooling until; zero = open, past = probe mode
	level   int       // backoff level
	probe   string    // lease ID of the probe in flight, or ""
	waiting map[string]int
	mark    uint64 // de-duplicates the units of one ticket
}

// lease is a granted claim on a unit.
type lease struct {
	id        string
	unit      *unit
	cred      string
	index     int // of the candidate granted
	expires   time.Time
	probe     bool          // granted as the unit's probe
	base, max time.Duration // the unit's cooldown durations, for Release
}

// queue is a FIFO wait queue.
type queue struct {
	name    string
	order   list.List // of *ticket, oldest first
	tickets map[string]*ticket
}

// ticket is a request waiting in a queue.
type ticket struct {
	id       string
	replica  string
	units    []*unit   // the distinct units of its candidates
	deadline time.Time // reaped as a dead waiter after it, unless refreshed
	elem     *list.Element
}

func newDomain() *domain {
	return &domain{
		units:  make(map[string]*unit),
		leases: make(map[string]*lease),
		creds:  make(map[string]map[*lease]struct{}),
		queues: make(map[string]*queue),
	}
}

// unit returns unit id, creating it if need be.
func (d *domain) unit(id string) *unit {
	u := d.units[id]
	if u == nil {
		u = &unit{id: id, leases: make(map[*lease]struct{}), waiting: make(map[string]int)}
		d.units[id] = u
	}
	return u
}

// queue returns queue name, creating it if need be.
func (d *domain) queue(name string) *queue {
	q := d.queues[name]
	if q == nil {
		q = &queue{name: name, tickets: make(map[string]*ticket)}
		d.queues[name] = q
	}
	return q
}

// add records a new lease.
func (d *domain) add(l *lease) {
	u := l.unit
	if len(u.leases) == 0 || l.expires.Before(u.soonest) {
		u.soonest = l.expires
	}
	u.leases[l] = struct{}{}
	d.leases[l.id] = l
	byCred := d.creds[l.cred]
	if byCred == nil {
		byCred = make(map[*lease]struct{})
		d.creds[l.cred] = byCred
	}
	byCred[l] = struct{}{}
}

// drop forgets a lease; if it was the unit's probe, the probe slot is free.
func (d *domain) drop(l *lease) {
	delete(d.leases, l.id)
	delete(l.unit.leases, l)
	delete(d.creds[l.cred], l)
	if l.unit.probe == l.id {
		l.unit.probe = ""
	}
}

// reap drops the expired leases of u. It costs one comparison unless a
// lease may have expired.
func (d *domain) reap(u *unit, now time.Time) {
	if now.Before(u.soonest) {
		return
	}
	var soonest time.Time
	for l := range u.leases {
		switch {
		case !now.Before(l.expires):
			d.drop(l)
		case soonest.IsZero() || l.expires.Before(soonest):
			soonest = l.expires
		}
	}
	u.soonest = soonest
}

// credInFlight counts the live leases of credential id.
func (d *domain) credInFlight(id string, now time.Time) int {
	n := 0
	for l := range d.creds[id] {
		if now.Before(l.expires) {
			n++
		}
	}
	return n
}

// enqueue puts the ticket of a at the tail of q.
func (d *domain) enqueue(q *queue, a store.Acquire, now time.Time) *ticket {
	t := &ticket{id: a.Ticket, replica: a.Replica, deadline: now.Add(a.LeaseTTL)}
	d.stamp++
	for _, c := range a.Candidates {
		u := d.unit(c.Unit.ID)
		if u.mark != d.stamp {
			u.mark = d.stamp
			t.units = append(t.units, u)
			u.waiting[q.name]++
		}
	}
	t.elem = q.order.PushBack(t)
	q.tickets[t.id] = t
	return t
}

// dequeue takes t out of q.
func (d *domain) dequeue(q *queue, t *ticket) {
	q.order.Remove(t.elem)
	delete(q.tickets, t.id)
	for _, u := range t.units {
		u.waiting[q.name]--
		if u.waiting[q.name] == 0 {
			delete(u.waiting, q.name)
		}
	}
}

// live reports whether t is still waiting; a dead waiter is dequeued.
func (d *domain) live(q *queue, t *ticket, now time.Time) bool {
	if now.After(t.deadline) {
		d.dequeue(q, t)
		return false
	}
	return true
}

// barred reports whether u is taken for t by no-barging: a live ticket
// ahead of t in q (all of q when t is nil) lists u, or more than maxScan
// are ahead.
func (d *domain) barred(q *queue, u *unit, t *ticket, now time.Time) bool {
	n := 0
	for e := q.order.Front(); e != nil; {
		w, next := e.Value.(*ticket), e.Next()
		switch {
		case w == t:
			return false
		case !d.live(q, w, now):
		case n == maxScan || slices.Contains(w.units, u):
			return true
		default:
			n++
		}
		e = next
	}
	return false
}

// position counts the live tickets ahead of t in q.
func (d *domain) position(q *queue, t *ticket, now time.Time) int {
	n := 0
	for e := q.order.Front(); e != t.elem; {
		w, next := e.Value.(*ticket), e.Next()
		if d.live(q, w, now) {
			n++
		}
		e = next
	}
	return n
}

// first appends a hint for the first live ticket listing u in every queue
// that has one: the ticket no-barging lets take a slot of u.
func (d *domain) first(u *unit, now time.Time, wakes []wake) []wake {
	for name := range u.waiting {
		q := d.queues[name]
		n := 0
		for e := q.order.Front(); e != nil && n <= maxScan; {
			w, next := e.Value.(*ticket), e.Next()
			if d.live(q, w, now) {
				if slices.Contains(w.units, u) {
					wakes = append(wakes, wake{replica: w.replica, ticket: w.id})
					break
				}
				n++
			}
			e = next
		}
	}
	return wakes
}
