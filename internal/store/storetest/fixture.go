package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

const (
	longTTL   = 5 * time.Second        // for leases and tickets a case releases or cancels itself
	clockSlop = 50 * time.Millisecond  // skew allowed between the backend's clock and the test's
	wakeWait  = time.Second            // how long a replica may take to receive its hint
	baseCool  = 100 * time.Millisecond // Unit.Base of fixture units
	maxCool   = time.Second            // Unit.Max of fixture units
)

// runs numbers fixtures, so names stay unique within one process even when
// two fixtures start in the same nanosecond.
var runs atomic.Int64

// fixture gives one case its names, all unique to the case and the run: a
// domain, a default queue and a default replica, plus the first replica
// handle of the case's backend.
type fixture struct {
	t          *testing.T
	newReplica func() Stores
	s          Stores
	prefix     string
	domain     string
	queue      string
	replica    string
}

func newFixture(t *testing.T, newReplica func() Stores) *fixture {
	p := fmt.Sprintf("st%x.%d.", time.Now().UnixNano(), runs.Add(1))
	return &fixture{
		t:          t,
		newReplica: newReplica,
		s:          newReplica(),
		prefix:     p,
		domain:     p + "dom",
		queue:      p + "q",
		replica:    p + "r",
	}
}

// name makes short unique to the case: every ticket, unit, credential,
// queue and replica name of a case goes through it.
func (f *fixture) name(short string) string { return f.prefix + short }

// unit returns a unit with n slots and the fixture's cooldown durations.
func (f *fixture) unit(short string, n int) store.Unit {
	return store.Unit{ID: f.name(short), Cap: n, Base: baseCool, Max: maxCool}
}

// cand returns a candidate on credential cred of u, with credential cap n.
func (f *fixture) cand(u store.Unit, cred string, n int) store.Candidate {
	return store.Candidate{Unit: u, Credential: f.name(cred), CredentialCap: n}
}

// req returns an Acquire of ticket in the fixture's domain, default queue
// and default replica, with a lease TTL of longTTL.
func (f *fixture) req(ticket string, cands ...store.Candidate) store.Acquire {
	return store.Acquire{
		Domain:     f.domain,
		Ticket:     f.name(ticket),
		Queue:      f.queue,
		Candidates: cands,
		LeaseTTL:   longTTL,
		Replica:    f.replica,
	}
}

// in returns a copy of a in queue (a short name).
func (f *fixture) in(queue string, a store.Acquire) store.Acquire {
	a.Queue = f.name(queue)
	return a
}

// ttl returns a copy of a with lease TTL d.
func ttl(d time.Duration, a store.Acquire) store.Acquire {
	a.LeaseTTL = d
	return a
}

// mustGrant acquires a and fails the case unless it is granted.
func mustGrant(t *testing.T, s store.Claims, a store.Acquire) store.Grant {
	t.Helper()
	g, err := s.Acquire(t.Context(), a)
	if err != nil {
		t.Fatalf("Acquire(%s) error: %v", a.Ticket, err)
	}
	if !g.Granted {
		t.Fatalf("Acquire(%s) = %+v, want granted", a.Ticket, g)
	}
	if g.Lease != a.Ticket {
		t.Errorf("Acquire(%s).Lease = %q, want the ticket", a.Ticket, g.Lease)
	}
	return g
}

// mustQueue acquires a and fails the case unless it is queued.
func mustQueue(t *testing.T, s store.Claims, a store.Acquire) store.Grant {
	t.Helper()
	g, err := s.Acquire(t.Context(), a)
	if err != nil {
		t.Fatalf("Acquire(%s) error: %v", a.Ticket, err)
	}
	if g.Granted || g.Refused {
		t.Fatalf("Acquire(%s) = %+v, want queued", a.Ticket, g)
	}
	return g
}

// mustQueueAt acquires a and fails the case unless it is queued at pos.
func mustQueueAt(t *testing.T, s store.Claims, a store.Acquire, pos int) store.Grant {
	t.Helper()
	g := mustQueue(t, s, a)
	if g.Position != pos {
		t.Errorf("Acquire(%s).Position = %d, want %d", a.Ticket, g.Position, pos)
	}
	return g
}

// release releases lease (a short name) with out and fails the case on an
// error. It returns the times just before and after the call, which bracket
// the backend's "now" of the release.
func (f *fixture) release(s store.Claims, lease string, out store.Outcome) (before, after time.Time) {
	f.t.Helper()
	before = time.Now()
	if err := s.Release(f.t.Context(), f.domain, f.name(lease), out); err != nil {
		f.t.Fatalf("Release(%s, %+v) error: %v", lease, out, err)
	}
	return before, time.Now()
}

// cancel cancels ticket (a short name) in the default queue.
func (f *fixture) cancel(s store.Claims, ticket string) {
	f.t.Helper()
	if err := s.Cancel(f.t.Context(), f.domain, f.queue, f.name(ticket)); err != nil {
		f.t.Fatalf("Cancel(%s) error: %v", ticket, err)
	}
}

// wake subscribes to the wake-ups of replica for the rest of the case.
func (f *fixture) wake(s store.Waker, replica string) <-chan string {
	f.t.Helper()
	ch, err := s.Wake(f.t.Context(), replica)
	if err != nil {
		f.t.Fatalf("Wake(%s) error: %v", replica, err)
	}
	return ch
}

// waitWake waits up to wakeWait for ticket on ch, skipping other hints
// (duplicates and hints for other tickets are allowed).
func waitWake(t *testing.T, ch <-chan string, ticket string) {
	t.Helper()
	timer := time.NewTimer(wakeWait)
	defer timer.Stop()
	for {
		select {
		case id, ok := <-ch:
			if !ok {
				t.Fatalf("wake channel closed while waiting for %s", ticket)
			}
			if id == ticket {
				return
			}
		case <-timer.C:
			t.Fatalf("no wake-up for %s within %v", ticket, wakeWait)
		}
	}
}

// noWake fails the case if ticket arrives on ch within d.
func noWake(t *testing.T, ch <-chan string, ticket string, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case id, ok := <-ch:
			if !ok {
				t.Fatalf("wake channel closed")
			}
			if id == ticket {
				t.Errorf("woke %s on the wrong replica", ticket)
				return
			}
		case <-timer.C:
			return
		}
	}
}

// units reads the state of the units (short names) from s.
func (f *fixture) units(s store.Inspector, short ...string) []store.UnitState {
	f.t.Helper()
	ids := make([]string, len(short))
	for i, id := range short {
		ids[i] = f.name(id)
	}
	got, err := s.Units(f.t.Context(), f.domain, ids)
	if err != nil {
		f.t.Fatalf("Units(%v) error: %v", short, err)
	}
	if len(got) != len(ids) {
		f.t.Fatalf("Units(%v) returned %d states, want %d", short, len(got), len(ids))
	}
	for i, us := range got {
		if us.ID != ids[i] {
			f.t.Fatalf("Units(%v)[%d].ID = %q, want %q", short, i, us.ID, ids[i])
		}
	}
	return got
}

// unitState reads the state of one unit (a short name) from s.
func (f *fixture) unitState(s store.Inspector, short string) store.UnitState {
	f.t.Helper()
	return f.units(s, short)[0]
}

// within checks that got lies in [lo, hi], widened by clockSlop each side.
func within(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo.Add(-clockSlop)) || got.After(hi.Add(clockSlop)) {
		t.Errorf("%s = %v, want within [%v, %v] ± %v",
			what, got.Format(time.StampMilli), lo.Format(time.StampMilli), hi.Format(time.StampMilli), clockSlop)
	}
}

// sleepPast sleeps until tm, plus clockSlop for a backend clock running
// behind the test's.
func sleepPast(tm time.Time) {
	time.Sleep(time.Until(tm.Add(clockSlop)))
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// acquireAll calls Acquire for every a concurrently, and returns the grants
// in the order of as.
func acquireAll(t *testing.T, s store.Claims, as []store.Acquire) []store.Grant {
	t.Helper()
	grants := make([]store.Grant, len(as))
	errs := make([]error, len(as))
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Go(func() { grants[i], errs[i] = s.Acquire(t.Context(), a) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Acquire(%s) error: %v", as[i].Ticket, err)
		}
	}
	return grants
}
