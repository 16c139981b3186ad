package billing

import (
	"context"
	"sync"
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
}

// View is the balance view admission reads: per billing account the
// balance the store had at its last read, less the charges this process
// made since that the store does not have yet (and the reservations of
// the requests running in reservation mode); per subject likewise what was
// spent. It never asks the store on a request's path: Run reads it in the
// background. Safe for concurrent use.
//
// A charge is counted once: locally from Settle until a read of the store
// that began after the store confirmed it (Written), and from then on in
// the store's totals only. Written and a read never overlap (see Write),
// so a read either sees a confirmed charge or began before its write.
type View struct {
	src   Source
	stale time.Duration

	io sync.Mutex // held across a store read, and across a write and its confirmation

	mu        sync.Mutex
	totals    Totals
	read      time.Time         // the last successful read; zero before the first
	local     map[string]*entry // by request ID
	balance   map[string]Micros // the local charges and reservations, by account
	spent     map[period]Micros // the local charges by subject and period
	confirmed []string          // request IDs the store has, not yet in totals
}

// entry is a local charge or reservation.
type entry struct {
	c         Charge
	reserved  bool // a reservation: no spend, only the balance
	confirmed bool
}

// period is a subject's spend in one UTC day (day > 0) or month (day 0).
type period struct {
	s     Subject
	year  int
	month time.Month
	day   int
}

// NewView returns a view of src that is fresh while its last successful
// read is at most stale old.
func NewView(src Source, stale time.Duration) *View {
	return &View{src: src, stale: stale, local: map[string]*entry{}, balance: map[string]Micros{}, spent: map[period]Micros{}}
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
	v.totals, v.read = t, now
	for _, id := range v.confirmed {
		if e := v.local[id]; e != nil {
			v.apply(e, -1)
			delete(v.local, id)
		}
	}
	v.confirmed = v.confirmed[:0]
	return nil
}

// Fresh reports whether the view was read from the store recently enough
// to admit on: within the staleness bound before now.
func (v *View) Fresh(now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.read.IsZero() && now.Sub(v.read) <= v.stale
}

// Balance is what is left of account's balance: the store's, less the
// local charges and reservations.
func (v *View) Balance(account string) Micros {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.totals.Balances[account].Add(-v.balance[account])
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
	day, month := periods(s, now)
	out.Day = out.Day.Add(v.spent[day])
	out.Month = out.Month.Add(v.spent[month])
	return out
}

// Admit reports whether account's balance plus allowance, leaving out
// what the request id holds reserved, is positive; if it is, reserve (0 =
// nothing) is held for id against the balance, in place of what it held,
// until Settle replaces it with the request's charge. One step, so that
// two requests cannot both take the last of a balance.
//
// allowance is the account's per-cycle allowance (0 = none): the balance
// already bears every charge of the current cycle, and the cycles before
// were closed by entries that gave back what each spent up to its
// allowance (see ledger.EntryAllowance), so the balance plus the allowance
// is what the account may still spend.
func (v *View) Admit(id, account string, allowance, reserve Micros) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	left := v.totals.Balances[account].Add(-v.balance[account]).Add(allowance)
	own := v.local[id]
	if own != nil && own.reserved {
		left = left.Add(own.c.Price)
	}
	if left <= 0 {
		return false
	}
	if own != nil && own.reserved {
		v.apply(own, -1)
		delete(v.local, id)
	}
	if reserve > 0 {
		e := &entry{c: Charge{RequestID: id, Account: account, Price: reserve}, reserved: true}
		v.local[id] = e
		v.apply(e, 1)
	}
	return true
}

// Settle counts a request's charge, in place of its reservation if it
// has one. A charge of nothing just drops the reservation.
func (v *View) Settle(c Charge) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e := v.local[c.RequestID]; e != nil && e.reserved {
		v.apply(e, -1)
		delete(v.local, c.RequestID)
	}
	if c.Price == 0 && c.Cost == 0 {
		return
	}
	e := &entry{c: c}
	v.local[c.RequestID] = e
	v.apply(e, 1)
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
		if e := v.local[id]; e != nil && !e.reserved && !e.confirmed {
			e.confirmed = true
			v.confirmed = append(v.confirmed, id)
		}
	}
	return nil
}

// apply adds (sign 1) or removes (sign -1) e's amounts from the local sums.
// It runs twice for every charge (at Settle and at the read that drops
// it), under the lock admission waits for: the day and month are worked
// out once for all the charge's subjects.
func (v *View) apply(e *entry, sign Micros) {
	c := &e.c
	if c.Account != "" {
		sumInto(v.balance, c.Account, sign*c.Price)
	}
	if e.reserved {
		return
	}
	y, m, d := c.At.UTC().Date()
	add := func(s Subject, amount Micros) {
		if s.ID != "" && amount != 0 {
			sumInto(v.spent, period{s, y, m, d}, sign*amount)
			sumInto(v.spent, period{s, y, m, 0}, sign*amount)
		}
	}
	add(Subject{Account, c.Account}, c.Price)
	add(Subject{Key, c.Key}, c.Price)
	add(Subject{Tenant, c.Tenant}, c.Price)
	add(Subject{Pool, c.Pool}, c.Cost)
	add(Subject{Task, c.Task}, c.Cost)
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

// periods are the day and month of t for s.
func periods(s Subject, t time.Time) (day, month period) {
	y, m, d := t.Date()
	return period{s, y, m, d}, period{s, y, m, 0}
}
