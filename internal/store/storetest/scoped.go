package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// testScopedCooldown: two per-model limits under one account unit. A rate
// limit scoped to model A's limit (Outcome.Cool) cools A alone: B's
// candidates are granted on the same unit while A's wait (RetryAt the end
// of A's cooldown); after it exactly one A is granted, as the probe, whose
// success at ProbeSucceeded opens A for the rest. While A is closed (cooling,
// or its probe out), A's waiters are told Cooling. A rate limit not scoped
// cools the unit, and with it both models.
func testScopedCooldown(t *testing.T, f *fixture) {
	const retryAfter = 150 * time.Millisecond
	acct := f.unit("acct", 4)
	modelA := store.Unit{ID: f.name("acct/a"), Cap: 2, Base: baseCool, Max: maxCool}
	modelB := store.Unit{ID: f.name("acct/b"), Cap: 2, Base: baseCool, Max: maxCool}
	a := withLimits(f.cand(acct, "c", 0), modelA)
	b := withLimits(f.cand(acct, "c", 0), modelB)

	mustGrant(t, f.s, f.req("a0", a))
	before, after := f.release(f.s, "a0", store.Outcome{RateLimited: true, RetryAfter: retryAfter, Cool: modelA.ID})
	lo, hi := before.Add(retryAfter), after.Add(retryAfter)
	if us := f.units(f.s, "acct", "acct/a"); !us[0].CoolingUntil.IsZero() || us[0].Level != 0 || us[1].Level != 1 {
		t.Errorf("model A limited: Units = %+v, want the account open and A at level 1", us)
	} else {
		within(t, "A's CoolingUntil", us[1].CoolingUntil, lo, hi)
	}
	w := f.req("a1", a)
	g := mustQueueAt(t, f.s, w, 0)
	within(t, "a1 RetryAt", g.RetryAt, lo, hi)
	if !g.Cooling {
		t.Errorf("A cooling: a1 = %+v, want Cooling", g)
	}
	w2 := f.in("qa", f.req("a2", a))
	mustQueueAt(t, f.s, w2, 0)
	mustGrant(t, f.s, f.in("qb", f.req("b0", b))) // B flows on the same account
	mustGrant(t, f.s, f.in("qb", f.req("b1", b)))

	sleepPast(hi)
	g1, err := f.s.Acquire(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	if g2 := mustQueue(t, f.s, w2); !g1.Granted || !g1.Probe || !g2.Cooling {
		t.Fatalf("after A's cooldown: a1 = %+v, a2 = %+v; want a1 granted as A's probe, a2 waiting", g1, g2)
	}
	if us := f.unitState(f.s, "acct/a"); us.Probe != "in_flight" {
		t.Errorf("A probing: Probe %q, want in_flight", us.Probe)
	}
	if err := f.s.ProbeSucceeded(t.Context(), f.domain, w.Ticket); err != nil {
		t.Fatal(err)
	}
	if g := mustGrant(t, f.s, w2); g.Probe {
		t.Errorf("A open again: a2 = %+v, not a probe", g)
	}
	if us := f.unitState(f.s, "acct/a"); us.Level != 0 || !us.CoolingUntil.IsZero() || us.InFlight != 2 {
		t.Errorf("A open again: %+v, want level 0, not cooling, 2 in flight", us)
	}
	f.release(f.s, "a1", store.Outcome{Success: true})
	f.release(f.s, "a2", store.Outcome{Success: true})

	// Not scoped: the account cools, and B waits too.
	f.release(f.s, "b0", store.Outcome{RateLimited: true, RetryAfter: time.Second})
	mustQueue(t, f.s, f.in("qb", f.req("b2", b)))
	mustQueue(t, f.s, f.in("qa", f.req("a3", a)))
	if us := f.units(f.s, "acct", "acct/b"); us[0].Level != 1 || us[1].Level != 0 {
		t.Errorf("account limited: Units = %+v, want the account at level 1, B at 0", us)
	}
}
