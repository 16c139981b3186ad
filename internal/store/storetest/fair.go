package storetest

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/store"
)

// of returns a copy of a for tenant with weight.
func of(tenant string, weight int, a store.Acquire) store.Acquire {
	a.Tenant, a.Weight = tenant, weight
	return a
}

// grantOrder releases lease, then retries every waiting ticket in turn
// until one is granted (a cap of 1 lets in exactly one), n times, and
// returns the tickets granted, in order. waiting is updated.
func (f *fixture) grantOrder(t *testing.T, lease string, waiting []store.Acquire, n int) []string {
	t.Helper()
	var order []string
	for range n {
		f.release(f.s, lease, store.Outcome{Success: true})
		lease = ""
		for i, a := range waiting {
			g, err := f.s.Acquire(t.Context(), a)
			if err != nil {
				t.Fatalf("Acquire(%s) error: %v", a.Ticket, err)
			}
			if g.Granted {
				lease = a.Ticket[len(f.prefix):]
				order = append(order, lease)
				waiting = append(waiting[:i:i], waiting[i+1:]...)
				break
			}
		}
		if lease == "" {
			t.Fatalf("after %v: nobody granted", order)
		}
	}
	f.release(f.s, lease, store.Outcome{Success: true})
	for _, a := range waiting {
		f.cancel(f.s, a.Ticket[len(f.prefix):])
	}
	return order
}

// testFairShareBetweenTenants: tenant A queues 10, then tenant B 2: B's
// first ticket goes near the front, and both of B's are granted within
// the first 4 grants.
func testFairShareBetweenTenants(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("hold", c))
	var waiting []store.Acquire
	for i := range 10 {
		a := of("A", 0, f.req(fmt.Sprintf("a%d", i), c))
		mustQueueAt(t, f.s, a, i)
		waiting = append(waiting, a)
	}
	b0 := of("B", 0, f.req("b0", c))
	mustQueueAt(t, f.s, b0, 1) // behind a0 (same tag, earlier), ahead of a1
	b1 := of("B", 0, f.req("b1", c))
	mustQueueAt(t, f.s, b1, 3)
	waiting = append(waiting, b0, b1)
	order := f.grantOrder(t, "hold", waiting, 4)
	want := []string{"a0", "b0", "a1", "b1"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("grant order = %v, want %v", order, want)
	}
}

// testWeightedShare: A of weight 2 and B of weight 1, both with many
// queued: over 9 grants A gets 6 (±1).
func testWeightedShare(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("hold", c))
	var waiting []store.Acquire
	for i := range 8 {
		a := of("A", 2, f.req(fmt.Sprintf("a%d", i), c))
		mustQueue(t, f.s, a)
		b := of("B", 1, f.req(fmt.Sprintf("b%d", i), c))
		mustQueue(t, f.s, b)
		waiting = append(waiting, a, b)
	}
	order := f.grantOrder(t, "hold", waiting, 9)
	na := 0
	for _, o := range order {
		if o[0] == 'a' {
			na++
		}
	}
	if na < 5 || na > 7 {
		t.Errorf("grant order = %v: A got %d of 9, want 6±1", order, na)
	}
}

// testSingleTenantStaysFIFO: one tenant alone, whatever its weights, is
// served in arrival order.
func testSingleTenantStaysFIFO(t *testing.T, f *fixture) {
	c := f.cand(f.unit("u", 1), "c", 0)
	mustGrant(t, f.s, f.req("hold", c))
	var want []string
	var as []store.Acquire
	for i := range 6 {
		a := of("A", 1+i%3, f.req(fmt.Sprintf("a%d", i), c))
		mustQueueAt(t, f.s, a, i)
		as = append(as, a)
		want = append(want, fmt.Sprintf("a%d", i))
	}
	if order := f.grantOrder(t, "hold", as, 6); fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("grant order = %v, want %v", order, want)
	}
}
