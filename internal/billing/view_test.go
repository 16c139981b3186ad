package billing

import (
	"context"
	"errors"
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
	c := Charge{RequestID: "r1", Account: "acme", Key: "web", Price: 3 * Unit, At: time.Now()}
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
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want("read after the write", 7*Unit, 3*Unit)
	v.Settle(Charge{RequestID: "r1"}) // a record written again changes nothing
	want("settled twice", 7*Unit, 3*Unit)
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
