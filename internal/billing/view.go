package billing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Subject is what a balance or a spend is counted for: a billing account,
// a key or a tenant (what they were billed), or a pool or a task type
// (what their requests cost the platform upstream).
type Subject struct {
	Kind SubjectKind
	ID   string
}

// SubjectKind names the kinds of Subject.
type SubjectKind uint8

// The kinds of Subject.
const (
	Account SubjectKind = iota
	Key
	Tenant
	Pool
	Task
)

// Kinds is a set of SubjectKind.
type Kinds uint8

// KindsOf is the set of kinds.
func KindsOf(kinds ...SubjectKind) Kinds {
	var k Kinds
	for _, kind := range kinds {
		k |= 1 << kind
	}
	return k
}

// Has reports whether kind is in k.
func (k Kinds) Has(kind SubjectKind) bool { return k&(1<<kind) != 0 }

// Spent is what a subject spent in the current UTC day and month.
type Spent struct{ Day, Month Micros }

// Totals are what the ledger store holds, read in one query.
type Totals struct {
	// Balances are the billing accounts' balances: the sum of each one's
	// entries, charges negative.
	Balances map[string]Micros
	// Spent is, for accounts, keys and tenants, what they were charged in
	// the UTC day and month of At; for pools and task types, what their
	// requests cost upstream.
	Spent map[Subject]Spent
	// At is the time the store's "today" and "this month" are of.
	At time.Time
}

// Source reads the totals from the ledger store.
type Source interface {
	Totals(ctx context.Context, now time.Time) (Totals, error)
}

// Charge is a request's charge as the view counts it until the store has
// it: its price billed to Account, Key and Tenant, its cost borne by Pool
// and Task ("" = none), in the UTC day and month of At.
type Charge struct {
	RequestID            string
	Account, Key, Tenant string
	Pool, Task           string
	Price, Cost          Micros
	At                   time.Time
	// Budgeted are the kinds of its subjects that have a budget: the view
	// counts the charge in the spend of those only, as Spent is asked of
	// nothing else (the account's balance counts it whatever this holds).
	// A budget added while the charge is local sees it once the store has
	// it.
	Budgeted Kinds
}

// View is the balance view admission reads: per billing account the
// balance the store had at its last read, less the charges this process
// made since that the store does not have yet, and less the worst cases
// its running requests hold (see Admit); per subject with a budget
// likewise what was spent. It never asks the store on a request's path:
// Run reads it in the background. Safe for concurrent use.
//
// A charge is counted once: locally from Settle until a read of the store
// that began after the store confirmed it (Written), and from then on in
// the store's totals only. Written and a read never overlap (see Write),
// so a read either sees a confirmed charge or began before its write.
type View struct {
	src   Source
	stale time.Duration

	io sync.Mutex // held across a store read, and across a write and its confirmation

	// read is when the last successful read began (Unix nanoseconds; 0
	// before the first): every billed request asks Fresh, without the lock.
	read atomic.Int64

	mu       sync.Mutex
	totals   Totals
	local    map[string]entry      // by request ID
	reserved int                   // the reservations in local: Settle looks for one only when there are some
	balance  map[string]Micros     // the local charges and reservations, by account
	spent    map[month]*monthSpent // the local charges by subject and UTC month
	// confirmed are request IDs the store has, not yet in totals: a
	// charge's, or one the next read finds gone (written twice).
	confirmed []string
}

// entry is a local charge or reservation.
// It keeps of the charge only what its sums need, in at most 128 bytes:
// a map keeps larger values apart, in an allocation each.
type entry struct {
	account, key, tenant, pool, task string
	price, cost                      Micros
	year                             int32 // the UTC date of the charge's At
	month, day                       uint8
	budgeted                         Kinds // the subjects whose spend it counts in
	reserved                         bool  // a reservation: no spend, only the balance
}

func entryOf(c *Charge) entry {
	y, m, d := c.At.UTC().Date()
	return entry{account: c.Account, key: c.Key, tenant: c.Tenant, pool: c.Pool, task: c.Task, price: c.Price, cost: c.Cost,
		year: int32(y), month: uint8(m), day: uint8(d), budgeted: c.Budgeted}
}

// month is a subject's UTC month.
type month struct {
	s     Subject
	year  int
	month time.Month
}

// monthSpent is what a subject's local charges spent in one month, in all
// and by day (days[0] is the 1st): one map entry per subject and month
// serves both of its budgets.
type monthSpent struct {
	total Micros
	days  [31]Micros
}

// NewView returns a view of src that is fresh while its last successful
// read is at most stale old.
func NewView(src Source, stale time.Duration) *View {
	return &View{src: src, stale: stale, local: map[string]entry{}, balance: map[string]Micros{}, spent: map[month]*monthSpent{}}
}

// Refresh reads the totals from the store and drops the local charges the
// store confirmed before the read began.
func (v *View) Refresh(ctx context.Context) error {
	v.io.Lock()
	defer v.io.Unlock()
	now := time.Now()
	t, err := v.src.Totals(ctx, now)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.totals = t
	v.read.Store(now.UnixNano())
	for _, id := range v.confirmed {
		if e, ok := v.local[id]; ok {
			v.apply(&e, -1)
			delete(v.local, id)
		}
	}
	v.confirmed = v.confirmed[:0]
	return nil
}

// Fresh reports whether the view was read from the store recently enough
// to admit on: within the staleness bound before now.
func (v *View) Fresh(now time.Time) bool {
	read := v.read.Load()
	return read != 0 && now.Sub(time.Unix(0, read)) <= v.stale
}

// Spent is what s spent in the UTC day and month of now: the store's
// (when it was read in that day and month), plus the local charges.
func (v *View) Spent(s Subject, now time.Time) Spent {
	now = now.UTC()
	v.mu.Lock()
	defer v.mu.Unlock()
	var out Spent
	stored, at := v.totals.Spent[s], v.totals.At.UTC()
	if at.Year() == now.Year() && at.Month() == now.Month() {
		out.Month = stored.Month
		if at.Day() == now.Day() {
			out.Day = stored.Day
		}
	}
	y, m, d := now.Date()
	if local := v.spent[month{s, y, m}]; local != nil {
		out.Day = out.Day.Add(local.days[d-1])
		out.Month = out.Month.Add(local.total)
	}
	return out
}

// Fits reports whether a request whose worst case is worst may be
// admitted on account now: whether what is left of its balance, plus
// credit (what it may spend beyond the balance: its allowance and
// overdraft), is positive and covers worst. Admit decides by the same rule
// and holds the worst case; Fits only looks, so that a request that could
// not be admitted is refused before it waits for its turn.
func (v *View) Fits(account string, credit, worst Micros) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fits(v.totals.Balances[account].Add(-v.balance[account]).Add(credit), worst)
}

// Balances returns every account's balance as Fits sees it, before
// credit: the store's at the last read less the local charges and the
// worst cases held. Accounts with neither a stored balance nor a local
// charge are left out (their balance is 0). A copy, for metrics at scrape
// time.
func (v *View) Balances() map[string]Micros {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]Micros, len(v.totals.Balances)+len(v.balance))
	for id, b := range v.totals.Balances {
		out[id] = b
	}
	for id, local := range v.balance {
		out[id] = out[id].Add(-local)
	}
	return out
}

// fits is admission's rule: left is positive and covers worst. So the
// balance less the worst cases held never goes below −credit, and an
// account at or below that admits nothing, not even a request that would
// cost it nothing.
func fits(left, worst Micros) bool { return left > 0 && left >= worst }

// Admit reports whether account's balance plus credit (its allowance and
// overdraft), less the worst cases held for its other requests, covers
// worst (see fits); if it does, worst (0 = nothing) is held for id against
// the balance, in place of what it held, until Settle replaces it with the
// request's charge. One step, so that two requests cannot both take the
// last of a balance.
//
// credit counts the account's per-cycle allowance: the balance already
// bears every charge of the current cycle, and the cycles before were
// closed by entries that gave back what each spent up to its allowance
// (see ledger.EntryAllowance), so the balance plus the allowance is what
// the account may still spend, and its overdraft how far below that.
func (v *View) Admit(id, account string, credit, worst Micros) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	left := v.totals.Balances[account].Add(-v.balance[account]).Add(credit)
	var own entry
	held := false
	if v.reserved > 0 { // as in Settle: only a request admitted before holds one
		own, held = v.local[id]
		held = held && own.reserved
	}
	if held {
		left = left.Add(own.price)
	}
	if !fits(left, worst) {
		return false
	}
	if held {
		v.apply(&own, -1)
		delete(v.local, id)
		v.reserved--
	}
	if worst > 0 {
		e := entry{account: account, price: worst, reserved: true}
		v.local[id] = e
		v.apply(&e, 1)
		v.reserved++
	}
	return true
}

// Settle counts a request's charge, in place of its reservation if it
// has one. A charge of nothing just drops the reservation.
func (v *View) Settle(c Charge) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var held entry
	if v.reserved > 0 {
		if e, ok := v.local[c.RequestID]; ok && e.reserved {
			held = e
			v.reserved--
		}
	}
	if c.Price == 0 && c.Cost == 0 {
		if held.reserved {
			v.apply(&held, -1)
			delete(v.local, c.RequestID)
		}
		return
	}
	e := entryOf(&c)
	v.local[c.RequestID] = e // in place of its reservation, if it held one
	if held.reserved && held.account == e.account {
		// Most requests: the charge replaces the worst case in one step
		// on the balance, under the lock admission waits for.
		sumInto(v.balance, e.account, e.price.Add(-held.price))
		v.applySpends(&e, 1)
		return
	}
	if held.reserved {
		v.apply(&held, -1)
	}
	v.apply(&e, 1)
}

// Write runs write, which stores the records of the request IDs ids, and
// once it succeeded notes that the store has their charges. No read of the
// store runs meanwhile: a read that overlapped a write could see a charge
// the view still counts locally, and count it twice.
func (v *View) Write(ids []string, write func() error) error {
	v.io.Lock()
	defer v.io.Unlock()
	if err := write(); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range ids {
		if e, ok := v.local[id]; ok && !e.reserved {
			v.confirmed = append(v.confirmed, id)
		}
	}
	return nil
}

// apply adds (sign 1) or removes (sign -1) e's amounts from the local sums.
// It runs twice for every charge (at Settle and at the read that drops
// it), under the lock admission waits for: each subject's day and month
// are one map entry, and only subjects with a budget have one.
func (v *View) apply(e *entry, sign Micros) {
	if e.account != "" {
		sumInto(v.balance, e.account, sign*e.price)
	}
	v.applySpends(e, sign)
}

// applySpends is apply without the balance: e's spends alone.
func (v *View) applySpends(e *entry, sign Micros) {
	if e.reserved || e.budgeted == 0 {
		return
	}
	y, m, d := int(e.year), time.Month(e.month), int(e.day)
	add := func(s Subject, amount Micros) {
		if s.ID == "" || amount == 0 || !e.budgeted.Has(s.Kind) {
			return
		}
		k := month{s, y, m}
		sums := v.spent[k]
		if sums == nil {
			sums = new(monthSpent)
			v.spent[k] = sums
		}
		sums.total = sums.total.Add(sign * amount)
		sums.days[d-1] = sums.days[d-1].Add(sign * amount)
		if sums.total == 0 && sums.days == ([31]Micros{}) {
			delete(v.spent, k) // the map holds only what is pending
		}
	}
	add(Subject{Account, e.account}, e.price)
	add(Subject{Key, e.key}, e.price)
	add(Subject{Tenant, e.tenant}, e.price)
	add(Subject{Pool, e.pool}, e.cost)
	add(Subject{Task, e.task}, e.cost)
}

// sumInto adds d to m[k], deleting sums that come back to 0 so the maps
// hold only what is pending.
func sumInto[K comparable](m map[K]Micros, k K, d Micros) {
	if n := m[k].Add(d); n != 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}
