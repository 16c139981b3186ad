package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// testQueueVisibility checks UnitState.OldestByClass and WaitingByTenant:
// the arrival of the oldest live ticket of each class listing the unit (a
// ticket keeps its first arrival when it acquires again), and the live
// tickets by tenant; both empty once nobody waits.
func testQueueVisibility(t *testing.T, f *fixture) {
	u := f.unit("u", 1)
	c := f.cand(u, "c", 0)
	mustGrant(t, f.s, f.req("held", c))

	class := func(k int, a store.Acquire) store.Acquire {
		a.Class = k
		return a
	}
	a1 := class(2, of("a", 1, f.req("a1", c)))
	b1 := class(0, of("b", 1, f.req("b1", c)))
	a2 := class(2, of("a", 1, f.req("a2", c)))

	a1Lo := time.Now()
	mustQueue(t, f.s, a1)
	a1Hi := time.Now()
	time.Sleep(120 * time.Millisecond)
	b1Lo := time.Now()
	mustQueue(t, f.s, b1)
	b1Hi := time.Now()
	time.Sleep(120 * time.Millisecond)
	mustQueue(t, f.s, a2)
	mustQueue(t, f.s, a1) // still waiting: keeps its arrival

	us := f.unitState(f.s, "u")
	within(t, "OldestByClass[0]", us.OldestByClass[0], b1Lo, b1Hi)
	if !us.OldestByClass[1].IsZero() {
		t.Errorf("OldestByClass[1] = %v, want zero", us.OldestByClass[1])
	}
	within(t, "OldestByClass[2]", us.OldestByClass[2], a1Lo, a1Hi)
	if want := map[string]int{"a": 2, "b": 1}; !maps.Equal(us.WaitingByTenant, want) {
		t.Errorf("WaitingByTenant = %v, want %v", us.WaitingByTenant, want)
	}
	if us.Waiting != 3 || us.WaitingByClass != [store.Classes]int{1, 0, 2} {
		t.Errorf("Waiting %d by class %v, want 3, [1 0 2]", us.Waiting, us.WaitingByClass)
	}

	for _, ticket := range []string{"a1", "b1", "a2"} {
		f.cancel(f.s, ticket)
	}
	us = f.unitState(f.s, "u")
	if us.OldestByClass != [store.Classes]time.Time{} || us.WaitingByTenant != nil || us.Waiting != 0 {
		t.Errorf("after cancelling all: OldestByClass %v, WaitingByTenant %v, Waiting %d; want zero, nil, 0",
			us.OldestByClass, us.WaitingByTenant, us.Waiting)
	}
}
