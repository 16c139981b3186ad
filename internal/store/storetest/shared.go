package storetest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

func testReplicas(t *testing.T, f *fixture) {
	ra, rb := f.s, f.newReplica()
	wakeA, wakeB := f.wake(ra, f.name("A")), f.wake(rb, f.name("B"))
	c := f.cand(f.unit("u", 1), "c", 0)
	a, b := f.req("ta", c), f.req("tb", c)
	a.Replica, b.Replica = f.name("A"), f.name("B")
	mustGrant(t, ra, a)
	mustQueueAt(t, rb, b, 0)
	f.release(ra, "ta", store.Outcome{Success: true})
	waitWake(t, wakeB, b.Ticket)
	noWake(t, wakeA, b.Ticket, 100*time.Millisecond)
	mustGrant(t, rb, b)

	id := f.name("cred")
	want := store.Status{State: "disabled", Reason: "auth: 401 invalid_api_key", Since: time.Now().Truncate(time.Millisecond)}
	if err := ra.SetStatus(t.Context(), "credential", id, want); err != nil {
		t.Fatalf("SetStatus error: %v", err)
	}
	got, err := rb.Statuses(t.Context(), "credential")
	if err != nil {
		t.Fatalf("Statuses error: %v", err)
	}
	if s, ok := got[id]; !ok || !sameStatus(s, want) {
		t.Errorf("other replica's Statuses[%s] = %+v, %v; want %+v", id, s, ok, want)
	}
}

// The size of the NoOverAdmission race.
const (
	racingReplicas = 3
	racingWorkers  = 10 // per replica
	racingRounds   = 20 // Acquire/Release loops per worker
	racingCap      = 3
	racingCredCap  = 2
	racingPoll     = 10 * time.Millisecond // a waiter's retry when no hint comes
)

func testNoOverAdmission(t *testing.T, f *fixture) {
	u := f.unit("u", racingCap)
	cands := []store.Candidate{f.cand(u, "c0", racingCredCap), f.cand(u, "c1", racingCredCap)}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	var inFlight, peak, credPeak atomic.Int64
	var perCred [2]atomic.Int64
	var workers, routers sync.WaitGroup
	for r := range racingReplicas {
		s := f.newReplica()
		replica := f.name(fmt.Sprintf("r%d", r))
		hints, err := s.Wake(ctx, replica)
		if err != nil {
			t.Fatalf("Wake error: %v", err)
		}
		var waiting sync.Map // ticket → chan struct{} of its waiter
		routers.Go(func() { route(ctx, hints, &waiting) })
		for w := range racingWorkers {
			workers.Go(func() {
				for i := range racingRounds {
					a := f.req(fmt.Sprintf("r%d.w%d.i%d", r, w, i), cands...)
					a.Replica = replica
					woken := make(chan struct{}, 1)
					waiting.Store(a.Ticket, woken)
					g, err := acquireWait(ctx, s, a, woken)
					waiting.Delete(a.Ticket)
					if err != nil {
						t.Errorf("Acquire(%s) error: %v", a.Ticket, err)
						return
					}
					if g.Index < 0 || g.Index >= len(cands) {
						t.Errorf("Acquire(%s).Index = %d, want 0 or 1", a.Ticket, g.Index)
						return
					}
					raise(&peak, inFlight.Add(1))
					raise(&credPeak, perCred[g.Index].Add(1))
					time.Sleep(200 * time.Microsecond)
					perCred[g.Index].Add(-1)
					inFlight.Add(-1)
					if err := s.Release(ctx, f.domain, a.Ticket, store.Outcome{Success: true}); err != nil {
						t.Errorf("Release(%s) error: %v", a.Ticket, err)
						return
					}
				}
			})
		}
	}
	workers.Wait()
	cancel()
	routers.Wait()

	if got := peak.Load(); got > racingCap {
		t.Errorf("peak in-flight = %d, want ≤ %d", got, racingCap)
	}
	if got := credPeak.Load(); got > racingCredCap {
		t.Errorf("peak in-flight of a credential = %d, want ≤ %d", got, racingCredCap)
	}
	if us := f.unitState(f.s, "u"); us.InFlight != 0 || us.Waiting != 0 {
		t.Errorf("after the race: InFlight %d, Waiting %d; want 0, 0", us.InFlight, us.Waiting)
	}
	creds, err := f.s.CredentialInFlight(t.Context(), f.domain, []string{cands[0].Credential, cands[1].Credential})
	if err != nil {
		t.Fatalf("CredentialInFlight error: %v", err)
	}
	for id, n := range creds {
		if n != 0 {
			t.Errorf("after the race: CredentialInFlight[%s] = %d, want 0", id, n)
		}
	}
}

// route passes each hint to the waiter of its ticket in waiting (ticket →
// chan struct{}), until ctx ends.
func route(ctx context.Context, hints <-chan string, waiting *sync.Map) {
	for {
		select {
		case id, ok := <-hints:
			if !ok {
				return
			}
			if ch, ok := waiting.Load(id); ok {
				select {
				case ch.(chan struct{}) <- struct{}{}:
				default:
				}
			}
		case <-ctx.Done():
			return
		}
	}
}

// acquireWait calls Acquire until a is granted, retrying on a hint on woken,
// at RetryAt, or every racingPoll.
func acquireWait(ctx context.Context, s store.Claims, a store.Acquire, woken <-chan struct{}) (store.Grant, error) {
	for {
		g, err := s.Acquire(ctx, a)
		if err != nil || g.Granted {
			return g, err
		}
		wait := racingPoll
		if !g.RetryAt.IsZero() {
			wait = min(wait, time.Until(g.RetryAt))
		}
		timer := time.NewTimer(wait)
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return g, context.Cause(ctx)
		}
		timer.Stop()
	}
}

// raise lifts peak to n if n is higher.
func raise(peak *atomic.Int64, n int64) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func testInspector(t *testing.T, f *fixture) {
	const cool = 200 * time.Millisecond
	never := f.unitState(f.s, "never")
	if !reflect.DeepEqual(never, store.UnitState{ID: f.name("never")}) {
		t.Errorf("unknown unit = %+v, want only its ID", never)
	}

	u, v := f.unit("u", 2), f.unit("v", 5)
	c1, c2, c3 := f.cand(u, "c1", 0), f.cand(u, "c2", 0), f.cand(v, "c3", 0)
	mustGrant(t, f.s, f.req("t1", c1))
	mustGrant(t, f.s, f.req("t2", c2))
	mustQueueAt(t, f.s, f.req("t3", c1), 0)
	t4 := f.in("q2", f.req("t4", c2))
	mustQueueAt(t, f.s, t4, 0)
	mustGrant(t, f.s, f.req("t5", c3))
	states := f.units(f.s, "u", "v")
	wantU := store.UnitState{ID: u.ID, InFlight: 2, Cap: 2, Waiting: 2, WaitingByClass: [store.Classes]int{2, 0, 0},
		OldestByClass: [store.Classes]time.Time{states[0].OldestByClass[0]}, WaitingByTenant: map[string]int{"": 2}}
	wantV := store.UnitState{ID: v.ID, InFlight: 1, Cap: 5}
	if states[0].OldestByClass[0].IsZero() {
		t.Errorf("Units: %s OldestByClass[0] zero with 2 waiting", u.ID)
	}
	if !reflect.DeepEqual(states[0], wantU) || !reflect.DeepEqual(states[1], wantV) {
		t.Errorf("Units = %+v, want %+v", states, []store.UnitState{wantU, wantV})
	}
	f.checkCredentials(map[string]int{"c1": 1, "c2": 1, "c3": 1, "nobody": 0})

	// t2 ends first, so t1 is limited alone: a lone request's 429 teaches
	// no concurrency cap, and the probe is not kept out.
	f.release(f.s, "t2", store.Outcome{})
	before, after := f.release(f.s, "t1", store.Outcome{RateLimited: true, RetryAfter: cool})
	us := f.unitState(f.s, "u")
	if us.InFlight != 0 || us.Level != 1 || us.Probe != "" || us.EffectiveCap != 0 {
		t.Errorf("cooling: %+v, want InFlight 0, Level 1, Probe \"\", EffectiveCap 0", us)
	}
	within(t, "cooling: CoolingUntil", us.CoolingUntil, before.Add(cool), after.Add(cool))

	sleepPast(after.Add(cool))
	if us := f.unitState(f.s, "u"); us.Probe != "available" || us.CoolingUntil.IsZero() {
		t.Errorf("cooldown over: Probe %q, CoolingUntil %v; want available, non-zero", us.Probe, us.CoolingUntil)
	}
	if g := mustGrant(t, f.s, f.req("t3", c1)); !g.Probe {
		t.Errorf("t3 = %+v, want the probe", g)
	}
	if us := f.unitState(f.s, "u"); us.Probe != "in_flight" || us.InFlight != 1 || us.Waiting != 1 {
		t.Errorf("probing: %+v, want Probe in_flight, InFlight 1, Waiting 1", us)
	}
	f.checkCredentials(map[string]int{"c1": 1, "c2": 0})

	f.release(f.s, "t3", store.Outcome{Success: true})
	us = f.unitState(f.s, "u")
	wantU = store.UnitState{ID: u.ID, InFlight: 0, Cap: 2, Waiting: 1, WaitingByClass: [store.Classes]int{1, 0, 0}, Cooled: cool,
		OldestByClass: [store.Classes]time.Time{us.OldestByClass[0]}, WaitingByTenant: map[string]int{"": 1}}
	if us.OldestByClass[0].IsZero() {
		t.Errorf("open again: OldestByClass[0] zero with 1 waiting")
	}
	if !reflect.DeepEqual(us, wantU) {
		t.Errorf("open again: %+v, want %+v", us, wantU)
	}

	// Cap is the last one an Acquire listed.
	u.Cap = 4
	mustGrant(t, f.s, f.in("q3", f.req("t6", f.cand(u, "c1", 0))))
	if got := f.unitState(f.s, "u").Cap; got != 4 {
		t.Errorf("Cap after an Acquire listing 4 = %d, want 4", got)
	}
	if err := f.s.Cancel(t.Context(), f.domain, t4.Queue, t4.Ticket); err != nil {
		t.Fatalf("Cancel error: %v", err)
	}
	for _, lease := range []string{"t2", "t5", "t6"} {
		f.release(f.s, lease, store.Outcome{Success: true})
	}
	if states := f.units(f.s, "u", "v"); states[0].InFlight+states[0].Waiting+states[1].InFlight != 0 {
		t.Errorf("after releasing all: %+v, want nothing in flight or waiting", states)
	}
}

// checkCredentials compares CredentialInFlight for the credentials (short
// names) of want; a credential missing from the answer counts as 0.
func (f *fixture) checkCredentials(want map[string]int) {
	f.t.Helper()
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, f.name(id))
	}
	got, err := f.s.CredentialInFlight(f.t.Context(), f.domain, ids)
	if err != nil {
		f.t.Fatalf("CredentialInFlight error: %v", err)
	}
	for id, n := range want {
		if got[f.name(id)] != n {
			f.t.Errorf("CredentialInFlight[%s] = %d, want %d", id, got[f.name(id)], n)
		}
	}
}

func testStatuses(t *testing.T, f *fixture) {
	since := time.Now().Truncate(time.Millisecond)
	cred, acct := f.name("cred"), f.name("acct")
	steps := []struct {
		name     string
		kind, id string
		set      store.Status
		want     map[string]map[string]*store.Status // kind → id → status; nil = absent
	}{
		{
			"disable a credential", "credential", cred,
			store.Status{State: "disabled", Reason: "auth: 401 invalid_api_key", Since: since},
			map[string]map[string]*store.Status{
				"credential": {cred: {State: "disabled", Reason: "auth: 401 invalid_api_key", Since: since}},
				"account":    {cred: nil, acct: nil},
			},
		},
		{
			"drain an account", "account", acct,
			store.Status{State: "draining", Reason: "operator", Since: since.Add(time.Second)},
			map[string]map[string]*store.Status{
				"credential": {cred: {State: "disabled", Reason: "auth: 401 invalid_api_key", Since: since}, acct: nil},
				"account":    {acct: {State: "draining", Reason: "operator", Since: since.Add(time.Second)}},
			},
		},
		{
			"overwrite", "credential", cred,
			store.Status{State: "draining", Reason: "operator", Since: since.Add(2 * time.Second)},
			map[string]map[string]*store.Status{
				"credential": {cred: {State: "draining", Reason: "operator", Since: since.Add(2 * time.Second)}},
			},
		},
		{
			"active deletes", "credential", cred,
			store.Status{State: "active", Reason: "operator", Since: since.Add(3 * time.Second)},
			map[string]map[string]*store.Status{
				"credential": {cred: nil},
				"account":    {acct: {State: "draining", Reason: "operator", Since: since.Add(time.Second)}},
			},
		},
		{
			"active of an unknown ID", "account", f.name("never"),
			store.Status{State: "active"},
			map[string]map[string]*store.Status{"account": {f.name("never"): nil}},
		},
	}
	for _, st := range steps {
		if err := f.s.SetStatus(t.Context(), st.kind, st.id, st.set); err != nil {
			t.Fatalf("%s: SetStatus error: %v", st.name, err)
		}
		for kind, ids := range st.want {
			got, err := f.s.Statuses(t.Context(), kind)
			if err != nil {
				t.Fatalf("%s: Statuses(%s) error: %v", st.name, kind, err)
			}
			for id, want := range ids {
				s, ok := got[id]
				if ok != (want != nil) || (ok && !sameStatus(s, *want)) {
					t.Errorf("%s: Statuses(%s)[%s] = %+v, %v; want %+v", st.name, kind, id, s, ok, want)
				}
			}
		}
	}
}

// sameStatus compares statuses by instant, not by location or monotonic
// reading.
func sameStatus(a, b store.Status) bool {
	return a.State == b.State && a.Reason == b.Reason && a.Since.Equal(b.Since)
}
