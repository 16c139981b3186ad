// Package storemodel is a reference model of the capacity state that
// store.Claims and store.Inspector describe: leases, caps and reserved
// shares, the wait queue by class and tenant, cooldowns with their single
// probe, RPM/TPM windows and daily limits with their corrections, hidden
// caps, limits (Refuse and scoped cooldowns included), lease expiry and
// dead waiters. It is single-threaded and plain: every rule is written out
// once, over slices scanned in full, citing the doc comment of package
// store it encodes. Clarity over speed: it is for tests, which run it beside
// a real store on random histories (see storetest/history) and compare what
// each observes. It depends only on package store and the standard library.
//
// Time is the caller's: every method takes now, so a test drives the model
// and a store with one fake clock.
//
// A shared store losing its state is modelled as the state gone (Lose);
// how the store tells a replica so (generations, store.ErrStateLost) is
// package history's to check. Not modelled: the bounds stores put on their
// work (no-barging's 64 tickets is, but not redisstore's wake-ups per queue
// or reaping per call); which extra hints a store sends (the model gives
// the wake-ups every store owes, see first); and the Cap a forgotten limit
// shows. A lease or waiter is dead from the instant of its deadline on.
package storemodel

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Model is the state of every capacity domain. The zero value is not
// usable; call New. Not safe for concurrent use.
type Model struct {
	domains map[string]*domain
}

// New returns an empty model.
func New() *Model { return &Model{domains: make(map[string]*domain)} }

// domain is one capacity domain: nothing crosses between domains.
type domain struct {
	units  map[string]*unit
	leases []*lease // granted and not released, expired ones included until dropped
	queues map[string]*queue
	seq    int // arrival counter
}

// unit is a capacity unit or a limit (Candidate.Limits): the model keeps
// both alike, as "a limit is a unit like any other" (store.Candidate).
type unit struct {
	id       string
	cap      int
	reserved [store.Classes]int // reserved[c] = Σ_{k<c} Reserve[k]
	pause    time.Duration      // BackgroundPause of the last Acquire listing it
	limited  time.Time          // its last rate limit

	until  time.Time // cooling until; zero = open; past = waiting for (or running) its probe
	probe  string    // the lease that is its post-cooldown probe, or ""
	level  int       // backoff level
	cooled time.Duration

	ecap, succ, top int // AIMD of the hidden cap

	rtat, ttat time.Time // GCRA theoretical arrival times of RPM and TPM
	day        int64     // UTC day of used
	used       int       // tokens reserved and used on day
	reqDay     int64     // UTC day of reqs
	reqs       int       // grants on reqDay
}

type lease struct {
	id, cred  string
	index     int
	expires   time.Time
	probe     bool // Grant.Probe
	base, max time.Duration
	holds     []hold // holds[0] is the candidate's unit, then one per distinct limit
}

// hold is what a lease reserved in one unit.
type hold struct {
	u         *unit
	tokens    int // reserved in TPM, under tpm
	tpm       int
	daily     int // reserved against DailyTokens on day
	day       int64
	base, max time.Duration // a limit's cooldown, for Outcome.Cool
	probe     bool          // the lease is this limit's probe
}

type queue struct {
	name    string
	tickets []*ticket // in (class, tag, arrival) order
	fair    [store.Classes]fairness
}

// fairness is one class's WFQ state (store.Acquire.Tenant): its virtual
// time V and each tenant's last finish tag F_t with its tickets queued.
type fairness struct {
	v       int64
	n       int
	tenants map[string]*tenantTag
}

type tenantTag struct {
	f int64
	n int
}

type ticket struct {
	id, replica, tenant string
	class               int
	tag                 int64
	arrival             int
	units               []string // distinct units and limits of its candidates
	deadline            time.Time
	arrived             time.Time
}

// Wake is a hint the model requires a store to deliver.
type Wake struct{ Replica, Ticket string }

// maxScan is how many live tickets ahead no-barging looks at (store.Claims:
// "At most 64 live tickets ahead are looked at").
const maxScan = 64

// tagScale is the WFQ tag of one ticket of weight 1 (1000000/Weight).
const tagScale = 1000000

// defaultBase is the cooldown base of a unit with Base 0.
const defaultBase = time.Second

func (m *Model) domain(id string) *domain {
	d := m.domains[id]
	if d == nil {
		d = &domain{units: make(map[string]*unit), queues: make(map[string]*queue)}
		m.domains[id] = d
	}
	return d
}

func (d *domain) unit(id string) *unit {
	u := d.units[id]
	if u == nil {
		u = &unit{id: id}
		d.units[id] = u
	}
	return u
}

func (d *domain) queue(name string) *queue {
	q := d.queues[name]
	if q == nil {
		q = &queue{name: name}
		d.queues[name] = q
	}
	return q
}

// tidy drops what has died by now: expired leases ("a Release of an
// expired lease is a no-op") and dead waiters (a queued ticket lives until
// its last Acquire + LeaseTTL). A store may do this lazily; the rules are
// stated over live leases and live tickets only.
func (d *domain) tidy(now time.Time) {
	for _, l := range slices.Clone(d.leases) {
		if !now.Before(l.expires) {
			d.drop(l)
		}
	}
	for _, q := range d.queues {
		for _, t := range slices.Clone(q.tickets) {
			if !now.Before(t.deadline) {
				q.dequeue(t)
			}
		}
	}
}

func (d *domain) lease(id string) *lease {
	for _, l := range d.leases {
		if l.id == id {
			return l
		}
	}
	return nil
}

// drop forgets l; a probe dropped frees the probe slot (the cooldown stays
// over, so the next grant is the probe again).
func (d *domain) drop(l *lease) {
	d.leases = slices.DeleteFunc(d.leases, func(o *lease) bool { return o == l })
	for _, h := range l.holds {
		if h.u.probe == l.id {
			h.u.probe = ""
		}
	}
}

// inFlight counts the leases holding a slot of u.
func (d *domain) inFlight(u *unit) int {
	n := 0
	for _, l := range d.leases {
		for _, h := range l.holds {
			if h.u == u {
				n++
			}
		}
	}
	return n
}

func (d *domain) credInFlight(cred string) int {
	n := 0
	for _, l := range d.leases {
		if l.cred == cred {
			n++
		}
	}
	return n
}

// effCap is min(Cap, ecap) where either is set; 0 = none (store.Claims,
// hidden caps).
func (u *unit) effCap() int {
	switch {
	case u.ecap <= 0:
		return u.cap
	case u.cap <= 0:
		return u.ecap
	}
	return min(u.cap, u.ecap)
}

// cooling: "closed by a cooldown (not over yet, or over with its single
// probe out)" (store.Grant.Cooling).
func (u *unit) cooling(now time.Time) bool {
	return now.Before(u.until) || !u.until.IsZero() && u.probe != ""
}

// hasRoom: "a ticket of class c is granted a slot of a unit only while the
// unit's in-flight count is below Cap - Σ_{k<c} Unit.Reserve[k] (probes
// included)", with min(Cap, ecap) for Cap, and never while cooling.
func (d *domain) hasRoom(u *unit, class int, now time.Time) bool {
	if u.cooling(now) {
		return false
	}
	eff := u.effCap()
	return eff <= 0 || d.inFlight(u) < eff-u.reserved[class]
}

// paused: "a ticket of class 2 takes no slot of a unit within
// Unit.BackgroundPause of the unit's last rate limit".
func (u *unit) paused(now time.Time) bool {
	return u.pause > 0 && now.Before(u.limited.Add(u.pause))
}

// eligible is hasRoom plus the background rules: no slot in the pause, and
// "a ticket of class 2 takes the post-cooldown probe only if no ticket of a
// more urgent class waits for the unit (in any queue)".
func (d *domain) eligible(u *unit, class int, now time.Time) bool {
	if !d.hasRoom(u, class, now) {
		return false
	}
	if class < store.Classes-1 {
		return true
	}
	return !u.paused(now) && (u.until.IsZero() || !d.urgentWaiting(u))
}

func (d *domain) urgentWaiting(u *unit) bool {
	for _, q := range d.queues {
		for _, t := range q.tickets {
			if t.class < store.Classes-1 && slices.Contains(t.units, u.id) {
				return true
			}
		}
	}
	return false
}

func clampClass(c int) int { return min(max(c, 0), store.Classes-1) }

func setReserve(u *unit, r []int) {
	sum := 0
	u.reserved[0] = 0
	for c := 1; c < store.Classes; c++ {
		if c-1 < len(r) {
			sum += max(r[c-1], 0)
		}
		u.reserved[c] = sum
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
