package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// withLimits returns c with further limits lims.
func withLimits(c store.Candidate, lims ...store.Unit) store.Candidate {
	c.Limits = lims
	return c
}

// testLimitsAllMustFit: the candidate's unit has room, but a tenant limit
// is full: the ticket waits, and the release of the tenant's lease on
// another unit wakes it and lets it in.
func testLimitsAllMustFit(t *testing.T, f *fixture) {
	tenant := store.Unit{ID: f.name("tenant"), Cap: 1}
	a := withLimits(f.cand(f.unit("a", 4), "ca", 0), tenant)
	b := withLimits(f.cand(f.unit("b", 4), "cb", 0), tenant)
	ch := f.wake(f.s, f.replica)
	mustGrant(t, f.s, f.req("t1", a))
	w := f.req("w", b)
	mustQueueAt(t, f.s, w, 0)
	if us := f.units(f.s, "tenant", "b"); us[0].InFlight != 1 || us[0].Cap != 1 || us[0].Waiting != 1 || us[1].InFlight != 0 {
		t.Errorf("tenant full: Units = %+v, want the tenant 1 in flight of Cap 1 with 1 waiting, b none in flight", us)
	}
	f.release(f.s, "t1", store.Outcome{Success: true})
	waitWake(t, ch, w.Ticket)
	mustGrant(t, f.s, w)
	if us := f.units(f.s, "tenant", "b", "a"); us[0].InFlight != 1 || us[1].InFlight != 1 || us[2].InFlight != 0 {
		t.Errorf("after the grant: Units = %+v, want tenant 1, b 1, a 0 in flight", us)
	}
	f.release(f.s, "w", store.Outcome{Success: true})
	if us := f.unitState(f.s, "tenant"); us.InFlight != 0 {
		t.Errorf("after release: tenant InFlight %d, want 0", us.InFlight)
	}
}

// testLimitsSharedAcrossUnits: two candidates on different units sharing
// a tenant limit of Cap 1: only one is granted.
func testLimitsSharedAcrossUnits(t *testing.T, f *fixture) {
	tenant := store.Unit{ID: f.name("tenant"), Cap: 1}
	a := withLimits(f.cand(f.unit("a", 2), "ca", 0), tenant)
	b := withLimits(f.cand(f.unit("b", 2), "cb", 0), tenant)
	gs := acquireAll(t, f.s, []store.Acquire{f.req("t1", a, b), f.req("t2", b, a)})
	if gs[0].Granted == gs[1].Granted {
		t.Fatalf("grants = %+v, want exactly one granted", gs)
	}
	if us := f.unitState(f.s, "tenant"); us.InFlight != 1 {
		t.Errorf("tenant InFlight %d, want 1", us.InFlight)
	}
	f.release(f.s, "t1", store.Outcome{})
	f.release(f.s, "t2", store.Outcome{})
	f.cancel(f.s, "t1")
	f.cancel(f.s, "t2")
}

// testRefuseLimitNeverWaits: a key limit of Cap 2 that refuses. A ticket
// that waits for its full unit stays queued while the key has room, and
// is refused, out of the queue, once the key's slots are taken in another
// queue;
// a newcomer of the full key is refused at once, not queued.
func testRefuseLimitNeverWaits(t *testing.T, f *fixture) {
	key := store.Unit{ID: f.name("key"), Cap: 2, Refuse: true}
	busy := f.cand(f.unit("busy", 1), "cb", 0)
	free := withLimits(f.cand(f.unit("free", 4), "cf", 0), key)
	mustGrant(t, f.s, f.req("t0", busy))
	w := f.req("w", withLimits(busy, key))
	mustQueueAt(t, f.s, w, 0) // the upstream is full, not the key: it waits
	// Another alias's queue, where w does not bar them from the key.
	mustGrant(t, f.s, f.in("q2", f.req("t1", free)))
	mustGrant(t, f.s, f.in("q2", f.req("t2", free)))
	for _, a := range []store.Acquire{w, f.req("t3", free)} {
		if g, err := f.s.Acquire(t.Context(), a); err != nil || g != (store.Grant{Refused: true}) {
			t.Errorf("Acquire(%s) with the key full = %+v, %v; want Refused", a.Ticket, g, err)
		}
	}
	if us := f.units(f.s, "key", "busy", "free"); us[0].InFlight != 2 || us[0].Waiting != 0 || us[1].Waiting != 0 || us[2].InFlight != 2 {
		t.Errorf("after the refusals: Units = %+v, want the key 2 in flight, nobody waiting, free 2 in flight", us)
	}
	f.release(f.s, "t1", store.Outcome{Success: true})
	mustGrant(t, f.s, f.req("t4", free))
	for _, l := range []string{"t0", "t2", "t4"} {
		f.release(f.s, l, store.Outcome{Success: true})
	}
}

// testDailyTokens: a limit of 1000 tokens per UTC day; a correction on
// release gives back what was not used.
func testDailyTokens(t *testing.T, f *fixture) {
	key := store.Unit{ID: f.name("key"), DailyTokens: 1000}
	c := withLimits(f.cand(f.unit("u", 4), "c", 0), key)
	mustGrant(t, f.s, tokens(800, f.req("t1", c)))
	g := mustQueueAt(t, f.s, tokens(300, f.req("t2", c)), 0)
	now := time.Now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	within(t, "t2 RetryAt", g.RetryAt, midnight, midnight)
	f.release(f.s, "t1", store.Outcome{Success: true, Tokens: 100})
	mustGrant(t, f.s, tokens(300, f.req("t2", c)))
	mustGrant(t, f.s, tokens(300, f.req("t3", c)))
	// 100 + 300 + 300 used or reserved: 301 more do not fit.
	mustQueue(t, f.s, tokens(301, f.req("t4", c)))
	f.cancel(f.s, "t4")

	// The same on the candidate's own unit.
	d := f.cand(store.Unit{ID: f.name("d"), DailyTokens: 1000}, "cd", 0)
	mustGrant(t, f.s, tokens(800, f.req("d1", d)))
	g = mustQueue(t, f.s, tokens(300, f.req("d2", d)))
	within(t, "d2 RetryAt", g.RetryAt, midnight, midnight)
	f.release(f.s, "d1", store.Outcome{Success: true, Tokens: 100})
	mustGrant(t, f.s, tokens(300, f.req("d2", d)))
	for _, l := range []string{"t2", "t3", "d2"} {
		f.release(f.s, l, store.Outcome{})
	}
}

// testDailyRequests: a limit of 2 grants per UTC day counts each at the
// grant and never gives it back, whatever the call's outcome: the third
// request waits for the next UTC midnight, while a limit of another end
// user is untouched; the same on the candidate's own unit.
func testDailyRequests(t *testing.T, f *fixture) {
	user := store.Unit{ID: f.name("user-task"), DailyRequests: 2}
	other := store.Unit{ID: f.name("other-task"), DailyRequests: 2}
	c := withLimits(f.cand(f.unit("u", 4), "c", 0), user)
	mustGrant(t, f.s, f.req("t1", c))
	f.release(f.s, "t1", store.Outcome{}) // failed: still counts
	mustGrant(t, f.s, f.req("t2", c))
	f.release(f.s, "t2", store.Outcome{Success: true})
	g := mustQueueAt(t, f.s, f.req("t3", c), 0)
	now := time.Now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	within(t, "t3 RetryAt", g.RetryAt, midnight, midnight)
	f.cancel(f.s, "t3")
	mustGrant(t, f.s, f.req("o1", withLimits(f.cand(f.unit("u", 4), "c", 0), other)))
	f.release(f.s, "o1", store.Outcome{Success: true})

	d := f.cand(store.Unit{ID: f.name("d"), DailyRequests: 1}, "cd", 0)
	mustGrant(t, f.s, f.req("d1", d))
	f.release(f.s, "d1", store.Outcome{})
	g = mustQueue(t, f.s, f.req("d2", d))
	within(t, "d2 RetryAt", g.RetryAt, midnight, midnight)
	f.cancel(f.s, "d2")
}

// testLimitStateLapses: a limit whose lease is gone and whose windows have
// lapsed is forgotten (Units sees it as new) once the store next decides;
// one that still holds a lease is kept.
func testLimitStateLapses(t *testing.T, f *fixture) {
	gone := store.Unit{ID: f.name("user-gone"), Cap: 5, RPM: 600, TPM: 60000} // one request: 100 ms
	kept := store.Unit{ID: f.name("user-kept"), Cap: 5, RPM: 600}
	a := f.req("t1", withLimits(f.cand(f.unit("a", 4), "ca", 0), gone))
	a.Tokens = 50
	mustGrant(t, f.s, a)
	mustGrant(t, f.s, f.req("t2", withLimits(f.cand(f.unit("a", 4), "ca", 0), kept)))
	_, after := f.release(f.s, "t1", store.Outcome{Success: true, Tokens: 60})
	sleepPast(after.Add(200 * time.Millisecond))
	mustGrant(t, f.s, f.req("t3", f.cand(f.unit("b", 1), "cb", 0))) // the store decides something
	us := f.units(f.s, "user-gone", "user-kept")
	if us[0].Cap != 0 || us[0].InFlight != 0 {
		t.Errorf("lapsed limit: %+v, want forgotten (Cap 0)", us[0])
	}
	if us[1].Cap != 5 || us[1].InFlight != 1 {
		t.Errorf("limit with a lease: %+v, want Cap 5, InFlight 1", us[1])
	}
	f.release(f.s, "t2", store.Outcome{})
	f.release(f.s, "t3", store.Outcome{})
}
