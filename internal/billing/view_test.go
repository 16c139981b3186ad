package billing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ledger is a fake store: charges written to it show in its totals.
type ledger struct {
	balance Micros
	day     Micros
	down    bool
}

func (l *ledger) Totals(context.Context, time.Time) (Totals, error) {
	if l.down {
		return Totals{}, errors.New("store down")
	}
	return Totals{
		Balances: map[string]Micros{"acme": l.balance},
		Spent:    map[Subject]Spent{{Key, "web"}: {Day: l.day, Month: l.day}},
		At:       time.Now(),
	}, nil
}

// A charge is counted locally from Settle until a read that began after
// the store confirmed it, then in the store's totals only: never twice,
// never lost, whatever the order of the write and the reads.
func TestViewCountsEachChargeOnce(t *testing.T) {
	ctx := context.Background()
	l := &ledger{balance: 10 * Unit}
	v := NewView(l, time.Minute)
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	c := Charge{RequestID: "r1", Account: "acme", Key: "web", Price: 3 * Unit, At: time.Now(), Budgeted: KindsOf(Key)}
	v.Settle(c)
	want := func(stage string, balance, day Micros) {
		t.Helper()
		if got := v.Balance("acme"); got != balance {
			t.Errorf("%s: balance = %s, want %s", stage, got, balance)
		}
		if got := v.Spent(Subject{Key, "web"}, time.Now()).Day; got != day {
			t.Errorf("%s: key's day = %s, want %s", stage, got, day)
		}
	}
	want("settled", 7*Unit, 3*Unit)
	if err := v.Refresh(ctx); err != nil { // the store does not have it yet
		t.Fatal(err)
	}
	want("read before the write", 7*Unit, 3*Unit)
	err := v.Write([]string{"r1"}, func() error {
		l.balance, l.day = l.balance-c.Price, l.day+c.Price
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want("written, not read yet", 7*Unit, 3*Unit) // confirmed, but totals are older than the write
	// Written again (a batch retried after a commit it was not told of):
	// the store has it once, and the view drops it once.
	if err := v.Write([]string{"r1"}, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want("read after the write", 7*Unit, 3*Unit)
	v.Settle(Charge{RequestID: "r1"}) // a record written again changes nothing
	want("settled twice", 7*Unit, 3*Unit)
}

// Local charges count in the UTC day and month of their At, each apart:
// across a day's and a month's end, reservations spend nothing, and once
// the store has them the view holds nothing more for them.
func TestViewSpentByDayAndMonth(t *testing.T) {
	v := NewView(&ledger{balance: Unit}, time.Minute)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	at := func(month time.Month, day, hour int) time.Time {
		return time.Date(2025, month, day, hour, 0, 0, 0, time.UTC)
	}
	shop, batch := Subject{Tenant, "shop"}, Subject{Pool, "batch"}
	charges := []Charge{
		{RequestID: "jan31", Tenant: "shop", Price: 1, At: at(time.January, 31, 23)},
		{RequestID: "feb1", Tenant: "shop", Price: 2, At: at(time.February, 1, 0)},
		{RequestID: "feb1-noon", Tenant: "shop", Pool: "batch", Price: 4, Cost: 64, At: at(time.February, 1, 12).In(time.FixedZone("UTC-13", -13*3600))}, // Jan 31 there
		{RequestID: "feb2", Tenant: "shop", Price: 8, At: at(time.February, 2, 0)},
		{RequestID: "mar1", Tenant: "shop", Price: 16, At: at(time.March, 1, 0)},
	}
	var ids []string
	for _, c := range charges {
		c.Budgeted = KindsOf(Tenant, Pool)
		v.Settle(c)
		ids = append(ids, c.RequestID)
	}
	if !v.Admit("held", "acme", 0, 32) {
		t.Fatal("reservation refused")
	}
	for _, tc := range []struct {
		s    Subject
		now  time.Time
		want Spent
	}{
		{shop, at(time.January, 31, 12), Spent{Day: 1, Month: 1}},
		{shop, at(time.February, 1, 13), Spent{Day: 6, Month: 14}},
		{shop, at(time.February, 2, 1), Spent{Day: 8, Month: 14}},
		{shop, at(time.February, 28, 1), Spent{Day: 0, Month: 14}},
		{shop, at(time.March, 1, 1), Spent{Day: 16, Month: 16}},
		{batch, at(time.February, 1, 1), Spent{Day: 64, Month: 64}},
		{Subject{Key, "shop"}, at(time.February, 1, 1), Spent{}},
	} {
		if got := v.Spent(tc.s, tc.now); got != tc.want {
			t.Errorf("Spent(%v, %s) = %+v, want %+v", tc.s, tc.now.Format(time.DateTime), got, tc.want)
		}
	}
	if err := v.Write(ids, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := v.Spent(shop, at(time.February, 1, 13)); got != (Spent{}) {
		t.Errorf("Spent after the store has the charges = %+v, want none", got)
	}
	if len(v.spent) != 0 || len(v.local) != 1 || v.balance["acme"] != 32 {
		t.Errorf("after the store has the charges the view holds %d spends, %d entries and %v, want only the reservation of 32",
			len(v.spent), len(v.local), v.balance)
	}
}

// A charge counts locally in the spend of its budgeted subjects only: the
// others are read from the store alone (admission asks nothing else), and
// its account's balance bears it whatever is budgeted.
func TestViewSpendsOnlyBudgetedSubjects(t *testing.T) {
	v := NewView(&ledger{balance: 10 * Unit}, time.Minute)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v.Settle(Charge{RequestID: "none", Account: "acme", Key: "web", Tenant: "shop", Pool: "batch", Price: Unit, Cost: Unit / 4, At: now})
	v.Settle(Charge{RequestID: "tenant", Account: "acme", Key: "web", Tenant: "shop", Pool: "batch", Price: 2 * Unit, Cost: Unit / 2, At: now,
		Budgeted: KindsOf(Tenant)})
	if got := v.Balance("acme"); got != 7*Unit {
		t.Errorf("balance = %s, want 7 (both charges)", got)
	}
	for s, want := range map[Subject]Micros{
		{Tenant, "shop"}:  2 * Unit,
		{Account, "acme"}: 0, {Key, "web"}: 0, {Pool, "batch"}: 0,
	} {
		if got := v.Spent(s, now).Day; got != want {
			t.Errorf("%v spent %s today, want %s", s, got, want)
		}
	}
	if len(v.spent) != 1 {
		t.Errorf("the view holds %d spends, want the tenant's only", len(v.spent))
	}
}

// A failed write leaves the charge local; the view stays stale while the
// store cannot be read.
func TestViewFailedWriteAndStaleness(t *testing.T) {
	ctx := context.Background()
	l := &ledger{balance: Unit}
	v := NewView(l, 50*time.Millisecond)
	if v.Fresh(time.Now()) {
		t.Error("fresh before its first read")
	}
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	v.Settle(Charge{RequestID: "r1", Account: "acme", Price: Unit / 2})
	if err := v.Write([]string{"r1"}, func() error { return errors.New("down") }); err == nil {
		t.Error("Write hid the store's error")
	}
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := v.Balance("acme"); got != Unit/2 {
		t.Errorf("balance = %s after a failed write, want the charge still counted (0.50)", got)
	}
	l.down = true
	if err := v.Refresh(ctx); err == nil {
		t.Fatal("Refresh hid the store's error")
	}
	if !v.Fresh(time.Now()) || v.Fresh(time.Now().Add(time.Second)) {
		t.Error("freshness does not follow the last successful read")
	}
}

// Admit holds a reservation in one step: the second of two requests does
// not get the last of a balance, and a request's own reservation does not
// count against it when it is admitted again.
func TestViewAdmitReserves(t *testing.T) {
	l := &ledger{balance: Unit}
	v := NewView(l, time.Minute)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !v.Admit("r1", "acme", 0, Unit) {
		t.Fatal("r1 refused with a balance of 1.00")
	}
	if v.Admit("r2", "acme", 0, Unit) {
		t.Error("r2 admitted although r1 holds the whole balance")
	}
	if !v.Admit("r1", "acme", 0, Unit) {
		t.Error("r1 refused again by its own reservation")
	}
	v.Settle(Charge{RequestID: "r1", Account: "acme", Price: Unit / 4})
	if got := v.Balance("acme"); got != 3*Unit/4 {
		t.Errorf("balance = %s, want 0.75: the charge replaces the reservation", got)
	}
	if !v.Admit("r3", "acme", 0, Unit/2) {
		t.Fatal("r3 refused with 0.75 left")
	}
	v.Settle(Charge{RequestID: "r3", Account: "acme"}) // it ran nowhere
	if got := v.Balance("acme"); got != 3*Unit/4 {
		t.Errorf("balance = %s, want 0.75: a request settled for nothing drops its reservation", got)
	}
}

// The worst cases held bound the balance: a request is admitted only while
// the balance plus credit (allowance and overdraft), less every worst case
// held, covers its own. 50 requests of 1.00 at once on 5.00 admit 5 (7
// with 2.00 of credit), and Fits refuses the next before it would wait.
func TestViewAdmitBoundsTheBalanceByTheWorstCases(t *testing.T) {
	for _, credit := range []Micros{0, 2 * Unit} {
		l := &ledger{balance: 5 * Unit}
		v := NewView(l, time.Minute)
		if err := v.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for i := range 50 {
			if v.Admit(fmt.Sprint("r", i), "acme", credit, Unit) {
				admitted++
			}
		}
		want := 5 + int(credit/Unit)
		if admitted != want {
			t.Errorf("credit %s: %d of 50 admitted, want %d", credit, admitted, want)
		}
		if v.Fits("acme", credit, Unit) || v.Fits("acme", credit, 0) {
			t.Errorf("credit %s: Fits once every worst case is held; want false, even for a request that costs nothing", credit)
		}
		if got := v.Balance("acme").Add(credit); got != 0 {
			t.Errorf("credit %s: balance + credit = %s with the worst cases held, want 0", credit, got)
		}
		// A charge takes its request's worst case's place, in the balance
		// and in its budgeted spend.
		now := time.Now()
		v.Settle(Charge{RequestID: "r0", Account: "acme", Price: Unit / 4, Budgeted: KindsOf(Account), At: now})
		if got := v.Balance("acme").Add(credit); got != 3*Unit/4 {
			t.Errorf("credit %s: balance + credit = %s once r0 was charged 0.25 of its 1.00, want 0.75", credit, got)
		}
		if got := v.Spent(Subject{Account, "acme"}, now); got != (Spent{Day: Unit / 4, Month: Unit / 4}) {
			t.Errorf("credit %s: acme's spend = %+v, want 0.25 today and this month", credit, got)
		}
	}
}

// An account with an allowance may spend it besides its balance: the
// balance already bears the cycle's charges, so what is left is balance +
// allowance, and a request is refused once the cycle's spend took both.
func TestViewAdmitCountsTheAllowance(t *testing.T) {
	l := &ledger{balance: Unit} // 1.00 prepaid
	v := NewView(l, time.Minute)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	allowance := 2 * Unit
	for i, id := range []string{"r1", "r2", "r3"} { // 3.00 in all: the allowance, then the prepaid balance
		if !v.Admit(id, "acme", allowance, 0) {
			t.Fatalf("%s refused with %s left", id, Micros(3-i)*Unit)
		}
		v.Settle(Charge{RequestID: id, Account: "acme", Price: Unit, At: time.Now()})
	}
	if v.Admit("r4", "acme", allowance, 0) {
		t.Error("r4 admitted although the cycle spent the allowance and the prepaid balance")
	}
	if got := v.Balance("acme"); got != -2*Unit {
		t.Errorf("balance = %s, want -2.00: charges are counted in full, the allowance apart", got)
	}
	if !v.Admit("r4", "acme", allowance+Unit/2, 0) {
		t.Error("r4 refused with 0.50 of a raised allowance left")
	}
}

// Balance is what is left of account's balance in v: the store's, less
// the local charges and the worst cases held.
func (v *View) Balance(account string) Micros {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.totals.Balances[account].Add(-v.balance[account])
}

// BenchmarkView is the view's work for one billed request as the gateway
// does it, from callers running in parallel: Fresh and Fits at admission,
// Admit (holding its worst case) once the request holds its claim, Settle
// at its end;
// and for every 256 requests, the usage writer's Write of their charges
// and a Refresh. cpu-ns/op is the process's CPU time per request (on a
// busy machine, wall time says little).
func BenchmarkView(b *testing.B) {
	l := &ledger{balance: 1_000_000 * Unit}
	v := NewView(l, time.Minute)
	if err := v.Refresh(b.Context()); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var settled []string
	var n atomic.Int64
	b.ReportAllocs()
	start := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "req_" + strconv.FormatInt(n.Add(1), 36)
			now := time.Now()
			const worst = 2000
			if !v.Fresh(now) || !v.Fits("acme", 0, worst) || !v.Admit(id, "acme", 0, worst) {
				b.Error("refused")
				return
			}
			v.Settle(Charge{RequestID: id, Account: "acme", Key: "web", Tenant: "shop", Price: 427, Cost: 82, At: now})
			mu.Lock()
			if settled = append(settled, id); len(settled) == 256 {
				ids := settled
				settled = nil
				mu.Unlock()
				if err := v.Write(ids, func() error { return nil }); err != nil {
					b.Error(err)
				}
				if err := v.Refresh(b.Context()); err != nil {
					b.Error(err)
				}
				continue
			}
			mu.Unlock()
		}
	})
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Balances lists what Balance says of every account with a stored
// balance or a local charge or reservation, also one the store has
// nothing of yet.
func TestViewBalances(t *testing.T) {
	v := NewView(&ledger{balance: 10 * Unit}, time.Minute)
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	v.Settle(Charge{RequestID: "r1", Account: "acme", Price: 3 * Unit, At: time.Now()})
	if !v.Admit("r2", "beta", 5*Unit, 2*Unit) { // beta has no stored balance: its credit covers the worst case
		t.Fatal("r2 refused")
	}
	got := v.Balances()
	want := map[string]Micros{"acme": 7 * Unit, "beta": -2 * Unit}
	if !maps.Equal(got, want) {
		t.Errorf("Balances() = %v, want %v", got, want)
	}
	for id, b := range got {
		if b != v.Balance(id) {
			t.Errorf("Balances()[%s] = %s, Balance = %s", id, b, v.Balance(id))
		}
	}
}
