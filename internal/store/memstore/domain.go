package memstore

import (
	"container/list"
	"iter"
	"math"
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
	// lapsing holds the idle limit units to forget once their windows and
	// day lapse (see forget).
	lapsing lapsing
	// lims is limitsRoom's answer, reused under mu by every candidate of
	// every Acquire rather than allocated for each candidate with limits.
	lims []*unit
}

// unit is a capacity unit: its leases and its cooldown state.
type unit struct {
	id      string
	cap     int                // the last Cap an Acquire listed
	res     [store.Classes]int // res[c] = Σ_{k<c} Reserve[k] of the last Acquire listing the unit
	leases  map[*lease]struct{}
	soonest time.Time          // no lease of the unit expires before it
	until   time.Time          // cooling until; zero = open, past = probe mode
	cooled  time.Duration      // the cooldowns set so far, summed (store.UnitState.Cooled)
	level   int                // backoff level
	probe   string             // lease ID of the probe in flight, or ""
	waiting map[string]int     // tickets listing the unit, by queue
	byClass [store.Classes]int // tickets listing the unit, by class (all queues)
	mark    uint64             // de-duplicates the units of one ticket
	rtat    time.Time          // GCRA theoretical arrival time of the RPM window
	ttat    time.Time          // GCRA theoretical arrival time of the TPM window
	// AIMD of a hidden concurrency cap (see learn): ecap is the effective
	// cap learned from rate limits (0 = none: Cap applies), succ the
	// successes since it last changed, top the in-flight count that was
	// rate limited when it was last lowered (the ceiling for Cap 0).
	ecap, succ, top int
	day             int64 // the UTC day (days since the epoch) of used
	used            int   // tokens reserved and used on day, against DailyTokens
	reqDay          int64 // the UTC day (days since the epoch) of reqs
	reqs            int   // grants on reqDay, against DailyRequests
	// pause is the BackgroundPause of the last Acquire listing the unit,
	// limited the time of its last rate limit (see store.Unit.BackgroundPause).
	pause   time.Duration
	limited time.Time
	isLimit bool // a limit (Candidate.Limits): forgotten when idle and lapsed
	lapsing bool // in domain.lapsing
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
	// holds are the slots the lease holds: holds[0] in unit, then one per
	// distinct limit of the candidate.
	holds []hold
}

// hold is a lease's slot in one unit and what it reserved there.
type hold struct {
	u      *unit
	tokens int   // tokens reserved in the unit's TPM window (0 if none)
	tpm    int   // the TPM they were reserved under (0 = unlimited)
	daily  int   // tokens reserved against DailyTokens (0 if none)
	day    int64 // the UTC day they were reserved on
	// A limit's cooldown durations (for a rate limit scoped to it, see
	// store.Outcome.Cool), and whether the lease is its post-cooldown probe.
	base, max time.Duration
	probe     bool
}

// queue is a wait queue, ordered by (class, tag, arrival): one list per
// class, the most urgent first, each ordered by (tag, arrival).
type queue struct {
	name    string
	order   [store.Classes]list.List // of *ticket, by (tag, arrival)
	fair    [store.Classes]fairness
	tickets map[string]*ticket
}

// fairness is the WFQ state of one class of a queue: its virtual time and
// each tenant's last finish tag. It is forgotten when the class empties,
// and a tenant's when it has no ticket left in the class.
type fairness struct {
	v       int64
	n       int // tickets queued in the class
	tenants map[string]*tenantTag
}

type tenantTag struct {
	f int64 // finish tag of the tenant's last ticket
	n int   // its tickets queued in the class
}

// tagScale is the tag of one ticket of weight 1.
const tagScale = 1000000

// tag returns the WFQ tag a new ticket of tenant with weight would get in
// f, without taking it.
func (f *fairness) tag(tenant string, weight int) int64 {
	start := f.v
	if t := f.tenants[tenant]; t != nil {
		start = max(start, t.f)
	}
	return start + max(tagScale/int64(max(weight, 1)), 1)
}

// upTo yields the tickets of the classes 0 through hi, in (class, tag, arrival)
// order. The consumer may dequeue the ticket it is given, and no other.
func (q *queue) upTo(hi int) iter.Seq[*ticket] {
	return func(yield func(*ticket) bool) {
		for c := 0; c <= hi; c++ {
			for e := q.order[c].Front(); e != nil; {
				next := e.Next()
				if !yield(e.Value.(*ticket)) {
					return
				}
				e = next
			}
		}
	}
}

// all yields every ticket of q in (class, tag, arrival) order.
func (q *queue) all() iter.Seq[*ticket] { return q.upTo(store.Classes - 1) }

// ticket is a request waiting in a queue.
type ticket struct {
	id       string
	replica  string
	tenant   string
	tag      int64     // WFQ virtual finish tag in its class
	class    int       // priority class, 0 (most urgent) to store.Classes-1
	units    []*unit   // the distinct units of its candidates
	deadline time.Time // reaped as a dead waiter after it, unless refreshed
	arrived  time.Time // when it was queued (for the Inspector)
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
	for _, h := range l.holds {
		u := h.u
		if len(u.leases) == 0 || l.expires.Before(u.soonest) {
			u.soonest = l.expires
		}
		u.leases[l] = struct{}{}
	}
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
	for _, h := range l.holds {
		delete(h.u.leases, l)
	}
	delete(d.creds[l.cred], l)
	for _, h := range l.holds {
		if h.u.probe == l.id {
			h.u.probe = ""
		}
	}
	for _, h := range l.holds[1:] {
		d.forgetLater(h.u)
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

// clampClass maps an Acquire.Class to a valid class.
func clampClass(c int) int { return min(max(c, 0), store.Classes-1) }

// setReserve records the reserved shares of Unit r as cumulative sums.
func (u *unit) setReserve(r []int) {
	sum := 0
	for c := 1; c < store.Classes; c++ {
		if c-1 < len(r) {
			sum += max(r[c-1], 0)
		}
		u.res[c] = sum
	}
}

// limit is how many leases u may hold for a ticket of class c to take one.
func (u *unit) limit(c int) int {
	eff := u.effCap()
	if eff <= 0 {
		return math.MaxInt
	}
	return eff - u.res[c]
}

// effCap is the cap in force: min(Cap, ecap) where either is set; 0 = none.
func (u *unit) effCap() int {
	switch {
	case u.ecap <= 0:
		return u.cap
	case u.cap <= 0:
		return u.ecap
	}
	return min(u.cap, u.ecap)
}

// learn runs the AIMD of u's hidden cap on a release that ended with out,
// k being the unit's in-flight count including the released lease. A rate
// limit with others in flight (k >= 2; a lone request's 429 says nothing
// about concurrency) lowers ecap to k-1 (never raising it, and only below
// Cap) and restarts the count of successes: the k-1 calls still in flight
// started before the lesson, so their successes do not count. Enough later
// successes (patience) raise ecap by one; it is dropped (0, not limiting)
// once it reaches Cap, or, with Cap 0, once it exceeds top, the in-flight
// count that was rate limited.
func (u *unit) learn(out store.Outcome, k int) {
	switch {
	case out.RateLimited && k >= 2:
		if e := k - 1; (u.cap <= 0 || e < u.cap) && (u.ecap <= 0 || e < u.ecap) {
			u.ecap, u.top = e, k
		}
		if u.ecap > 0 {
			u.succ = -(k - 1)
		}
	case out.Success && u.ecap > 0:
		u.succ++
		if u.succ < patience(u.ecap, u.top) {
			return
		}
		u.ecap++
		u.succ = 0
		if (u.cap > 0 && u.ecap >= u.cap) || (u.cap <= 0 && u.ecap > u.top) {
			u.ecap, u.top = 0, 0
		}
	}
}

// patience is how many successes at effective cap ecap earn one more slot:
// ten rounds of the cap, and a hundred before retrying the concurrency that
// was last rate limited (top), so a unit that found the upstream's hidden cap
// tests it again only now and then instead of earning a 429 every few
// rounds. redisstore's release.lua applies the same rule.
func patience(ecap, top int) int {
	if ecap+1 >= top {
		return ecap * 100
	}
	return ecap * 10
}

// enqueue puts the ticket of a, of class class, in q behind every ticket of
// its class with a tag up to its own, taking its tag.
func (d *domain) enqueue(q *queue, a store.Acquire, class int, now time.Time) *ticket {
	f := &q.fair[class]
	t := &ticket{id: a.Ticket, replica: a.Replica, tenant: a.Tenant, tag: f.tag(a.Tenant, a.Weight), class: class, deadline: now.Add(a.LeaseTTL), arrived: now}
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
	d.stamp++
	note := func(id string) {
		u := d.unit(id)
		if u.mark != d.stamp {
			u.mark = d.stamp
			t.units = append(t.units, u)
			u.waiting[q.name]++
			u.byClass[class]++
		}
	}
	for _, c := range a.Candidates {
		note(c.Unit.ID)
		for _, lim := range c.Limits {
			note(lim.ID)
			d.units[lim.ID].isLimit = true
		}
	}
	l := &q.order[class]
	e := l.Back()
	for e != nil && e.Value.(*ticket).tag > t.tag {
		e = e.Prev()
	}
	if e == nil {
		t.elem = l.PushFront(t)
	} else {
		t.elem = l.InsertAfter(t, e)
	}
	q.tickets[t.id] = t
	return t
}

// granted advances the virtual time of t's class to t's tag.
func (q *queue) granted(t *ticket) {
	f := &q.fair[t.class]
	f.v = max(f.v, t.tag)
}

// dequeue takes t out of q.
func (d *domain) dequeue(q *queue, t *ticket) {
	q.order[t.class].Remove(t.elem)
	delete(q.tickets, t.id)
	f := &q.fair[t.class]
	if f.n--; f.n <= 0 {
		*f = fairness{}
	} else if tt := f.tenants[t.tenant]; tt != nil {
		if tt.n--; tt.n <= 0 {
			delete(f.tenants, t.tenant)
		}
	}
	for _, u := range t.units {
		u.byClass[t.class]--
		u.waiting[q.name]--
		if u.waiting[q.name] == 0 {
			delete(u.waiting, q.name)
			d.forgetLater(u)
		}
	}
}

// live reports whether t is still waiting; a dead waiter is dequeued.
func (d *domain) live(q *queue, t *ticket, now time.Time) bool {
	if !now.Before(t.deadline) { // dead from its deadline on, as a lease is, and as in redisstore
		d.dequeue(q, t)
		return false
	}
	return true
}

// barred reports whether u is taken for a ticket of class class by
// no-barging: a live ticket ahead of it in q lists u, or more than maxScan
// are ahead. The ticket is t when it is queued; a newcomer (t nil) of tag
// tag is behind every ticket of a class < class and those of class with a
// tag ≤ tag.
func (d *domain) barred(q *queue, u *unit, t *ticket, class int, tag int64, now time.Time) bool {
	n := 0
	for w := range q.upTo(class) {
		switch {
		case w == t, t == nil && w.class == class && w.tag > tag:
			return false
		case !d.live(q, w, now):
		case n == maxScan || slices.Contains(w.units, u):
			return true
		default:
			n++
		}
	}
	return false
}

// position counts the live tickets ahead of t in q.
func (d *domain) position(q *queue, t *ticket, now time.Time) int {
	n := 0
	for w := range q.upTo(t.class) {
		if w == t {
			break
		}
		if d.live(q, w, now) {
			n++
		}
	}
	return n
}

// urgentWaiting reports whether a live ticket of a class more urgent than
// background waits for u in any queue; dead waiters met are dequeued.
func (d *domain) urgentWaiting(u *unit, now time.Time) bool {
	const bg = store.Classes - 1
	if u.byClass[0]+u.byClass[1] == 0 {
		return false
	}
	for name := range u.waiting {
		q := d.queues[name]
		for w := range q.upTo(bg - 1) {
			if d.live(q, w, now) && slices.Contains(w.units, u) {
				return true
			}
		}
	}
	return false
}

// eligible reports whether a ticket of class c could take a lease of u now:
// u has room for c (see hasRoom), and a background ticket is not within
// u's pause after a rate limit and does not take the post-cooldown probe
// while a more urgent ticket waits for u.
func (d *domain) eligible(u *unit, c int, now time.Time) bool {
	if !u.hasRoom(c, now) {
		return false
	}
	return c < store.Classes-1 || !u.paused(now) && (u.until.IsZero() || !d.urgentWaiting(u, now))
}

// paused reports whether u's background pause after its last rate limit
// is not over (see store.Unit.BackgroundPause).
func (u *unit) paused(now time.Time) bool {
	return u.pause > 0 && now.Before(u.limited.Add(u.pause))
}

// first appends a hint, in every queue listing u, for the first live
// ticket (in class, tag, arrival order) listing u, if it could take a lease of
// u now: the ticket no-barging lets take a slot of u. A later ticket is of
// the same class or a less urgent one, so it could take a lease only if
// the first could.
func (d *domain) first(u *unit, now time.Time, wakes []wake) []wake {
	for name := range u.waiting {
		q := d.queues[name]
		n := 0
		for w := range q.all() {
			if n > maxScan {
				break
			}
			if !d.live(q, w, now) {
				continue
			}
			if slices.Contains(w.units, u) {
				if d.eligible(u, w.class, now) {
					wakes = append(wakes, wake{replica: w.replica, ticket: w.id})
				}
				break
			}
			n++
		}
	}
	return wakes
}
