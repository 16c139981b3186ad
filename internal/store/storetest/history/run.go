package history

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storemodel"
)

// Target is a store under test.
type Target struct {
	Claims    store.Claims
	Inspector store.Inspector
	Waker     store.Waker
	// Reasserter, if set, runs the Reassert operations; they are skipped
	// without it.
	Reasserter store.Reasserter
	// Lose, if set, makes the store lose the state of domains (the
	// store's names) as a Redis restarted empty would; the Lose
	// operations are skipped without it (or without a Reasserter).
	Lose func(ctx context.Context, domains []string) error
	// Outage, if set, cuts a degraded store off from its shared store for
	// the rest of the history, and returns once the store has turned to
	// its local state; the Outage operations are skipped without it. From
	// then on every decision is local, the calls the shared store granted
	// and that have not ended carry on in the local store (each for its
	// Acquire's LeaseTTL from the outage on), and a call the store answers
	// locally may still fail with store.ErrUnavailable for what it owes
	// the shared store: its local effect is what is compared. A target
	// with Outage suits RunEach (a new store per history).
	Outage func(ctx context.Context) error
	// OutageShare, if set, is what the store makes of a candidate once an
	// Outage has cut it off: a degraded store of one replica among
	// several takes its share of every cap and rate. The model decides on
	// the shares too, for new calls and for the calls in flight.
	OutageShare func(store.Candidate) store.Candidate
	// SetClock sets the store's clock to now for the domains given (the
	// store's names): at the start of a history and after each Advance,
	// and to the zero time (the store's own clock) at its end.
	SetClock func(ctx context.Context, now time.Time, domains []string) error
	// WakeWait is how long a required hint may take to arrive; 0 for a
	// store that delivers it before the call returns.
	WakeWait time.Duration
	// MayFailUnheld says that Release, Renew, Cancel and ProbeSucceeded of
	// a lease or ticket the store does not hold (never granted, or ended)
	// may fail with store.ErrUnavailable rather than do nothing: a
	// degraded store cut off from its shared store cannot ask it whether
	// it holds them; and so may Reassert.
	MayFailUnheld bool
}

// runs makes the names of every session and history unique, so that
// histories can share a store (and a Redis) with each other and with
// other tests.
var runs atomic.Int64

// session is a target with its wake subscriptions, which the histories
// checked on it share: a subscription costs a round trip or more, a
// history a few milliseconds. Every history names its domains and tickets
// apart, so a late hint of one is never taken for another's.
type session struct {
	tg       Target
	replicas string // prefix of the replicas' names
	wakes    []<-chan string
}

func open(ctx context.Context, tg Target) (*session, error) {
	s := &session{tg: tg, replicas: fmt.Sprintf("h%x.%d.", time.Now().UnixNano(), runs.Add(1))}
	for _, rep := range []string{"r0", "r1"} {
		ch, err := tg.Waker.Wake(ctx, s.replicas+rep)
		if err != nil {
			return nil, fmt.Errorf("wake %s: %w", rep, err)
		}
		s.wakes = append(s.wakes, ch)
	}
	return s, nil
}

// Check runs ops against the model and tg step by step, and returns the
// first disagreement: its step and what each said.
func Check(ctx context.Context, tg Target, ops []Op) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := open(ctx, tg)
	if err != nil {
		return err
	}
	return s.check(ctx, ops)
}

func (s *session) check(ctx context.Context, ops []Op) error {
	r := &runner{session: s, prefix: fmt.Sprintf("%sh%d.", s.replicas, runs.Add(1)), model: storemodel.New(), now: Start,
		got: make(map[string]bool), grants: make(map[string]grant)}
	r.collect(ops)
	if err := r.setClock(ctx); err != nil {
		return err
	}
	defer func() {
		r.now = time.Time{}
		r.setClock(context.WithoutCancel(ctx)) // a store's clock outlives the history otherwise
	}()
	for i, op := range ops {
		if err := r.step(ctx, op); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, op.Kind, err)
		}
	}
	return nil
}

type runner struct {
	*session
	prefix string // of the history's domains and tickets
	model  *storemodel.Model
	now    time.Time
	got    map[string]bool // tickets woken since the step began
	held   map[string]bool // the model's live leases (true) and queued tickets (false) before the step
	units  []string        // every unit and limit ID of the history
	creds  []string
	// grants are the leases granted or reasserted and not ended, as the
	// replica holding them would reassert them after a loss (with the
	// TTL it asked for).
	grants map[string]grant
	down   bool // after an Outage
}

// grant is a lease the replica holds in domain.
type grant struct {
	domain string
	held   store.Held
}

func (r *runner) collect(ops []Op) {
	units, creds := map[string]bool{}, map[string]bool{}
	for _, op := range ops {
		for _, c := range op.Acquire.Candidates {
			units[c.Unit.ID], creds[c.Credential] = true, true
			for _, l := range c.Limits {
				units[l.ID] = true
			}
		}
	}
	r.units, r.creds = slices.Sorted(maps.Keys(units)), slices.Sorted(maps.Keys(creds))
}

func (r *runner) dom(d string) string { return r.prefix + d }

func (r *runner) tick(t string) string { return r.prefix + t }

func (r *runner) setClock(ctx context.Context) error {
	ds := make([]string, len(domains))
	for i, d := range domains {
		ds[i] = r.dom(d)
	}
	return r.tg.SetClock(ctx, r.now, ds)
}

func (r *runner) step(ctx context.Context, op Op) error {
	r.drain()
	clear(r.got)
	err := r.apply(ctx, op)
	if err != nil && r.tg.MayFailUnheld && errors.Is(err, store.ErrUnavailable) {
		lease, known := r.held[op.Lease]
		if op.Kind == Cancel && !known || op.Kind != Cancel && !lease {
			return nil
		}
	}
	return err
}

func (r *runner) apply(ctx context.Context, op Op) error {
	if op.Kind != Advance && op.Kind != Inspect {
		r.held = r.model.Holds(op.Domain, r.now)
	}
	var want []storemodel.Wake
	switch op.Kind {
	case Acquire:
		a := op.Acquire
		g, w := r.model.Acquire(r.shared(a), r.now)
		want = w
		a.Domain, a.Ticket, a.Replica = r.dom(a.Domain), r.tick(a.Ticket), r.replicas+a.Replica
		got, err := r.tg.Claims.Acquire(ctx, a)
		if err != nil {
			return err
		}
		if g.Lease != "" {
			g.Lease = r.tick(g.Lease)
		}
		if !sameGrant(got, g) {
			return fmt.Errorf("acquire %s: store %s, model %s", op.Acquire.Ticket, grantString(got), grantString(g))
		}
		if g.Granted {
			r.grants[op.Acquire.Ticket] = grant{op.Acquire.Domain, store.Held{Lease: op.Acquire.Ticket, Candidate: op.Acquire.Candidates[g.Index],
				Tokens: op.Acquire.Tokens, TTL: op.Acquire.LeaseTTL}}
		}
	case Release:
		want = r.model.Release(op.Domain, op.Lease, op.Out, r.now)
		delete(r.grants, op.Lease)
		if err := r.owed(r.tg.Claims.Release(ctx, r.dom(op.Domain), r.tick(op.Lease), op.Out)); err != nil {
			return err
		}
	case Renew:
		r.model.Renew(op.Domain, []string{op.Lease}, op.TTL, r.now)
		if err := r.owed(r.tg.Claims.Renew(ctx, r.dom(op.Domain), []string{r.tick(op.Lease)}, op.TTL)); err != nil {
			return err
		}
	case Cancel:
		want = r.model.Cancel(op.Domain, op.Queue, op.Lease, r.now)
		delete(r.grants, op.Lease)
		if err := r.owed(r.tg.Claims.Cancel(ctx, r.dom(op.Domain), op.Queue, r.tick(op.Lease))); err != nil {
			return err
		}
	case Probe:
		want = r.model.ProbeSucceeded(op.Domain, op.Lease, r.now)
		if err := r.owed(r.tg.Claims.ProbeSucceeded(ctx, r.dom(op.Domain), r.tick(op.Lease))); err != nil {
			return err
		}
	case Reassert:
		if isLease, ok := r.held[op.Lease]; ok && !isLease || r.tg.Reasserter == nil {
			return nil
		}
		h := op.Held
		h.Lease = r.tick(h.Lease)
		if err := r.tg.Reasserter.Reassert(ctx, r.dom(op.Domain), []store.Held{h}); err != nil {
			if r.tg.MayFailUnheld && errors.Is(err, store.ErrUnavailable) {
				return nil // cut off from the shared store: nothing was reasserted
			}
			return err
		}
		r.model.Reassert(op.Domain, []store.Held{op.Held}, r.now)
		if !r.held[op.Lease] { // made live: held as reasserted from now on
			r.grants[op.Held.Lease] = grant{op.Domain, op.Held}
		}
	case Lose:
		return r.lose(ctx, op.Domain)
	case Outage:
		return r.outage(ctx)
	case Advance:
		r.now = r.now.Add(op.Step)
		return r.setClock(ctx)
	case Inspect:
		return r.inspect(ctx, op.Domain)
	}
	return r.woken(want)
}

// lose makes the store and the model lose domain's state, and reasserts
// the leases live before, as the capacity engine of the replica holding
// them does. A store that granted a lease must say the state was lost
// (store.ErrStateLost) until it is reasserted.
func (r *runner) lose(ctx context.Context, d string) error {
	if r.tg.Lose == nil || r.tg.Reasserter == nil {
		return nil
	}
	var held, named []store.Held
	for lease, exp := range r.model.Expires(d, r.now) {
		h := r.grants[lease].held
		h.TTL = exp.Sub(r.now)
		held = append(held, h)
		h.Lease = r.tick(lease)
		named = append(named, h)
	}
	r.model.Lose(d)
	if err := r.tg.Lose(ctx, []string{r.dom(d)}); err != nil {
		return err
	}
	if len(held) > 0 {
		if err := r.tg.Claims.Renew(ctx, r.dom(d), []string{named[0].Lease}, time.Second); !errors.Is(err, store.ErrStateLost) {
			return fmt.Errorf("renew after the loss of %d leases: %v, want store.ErrStateLost", len(held), err)
		}
	}
	if err := r.tg.Reasserter.Reassert(ctx, r.dom(d), named); err != nil {
		return err
	}
	r.model.Reassert(d, held, r.now)
	return nil
}

// outage cuts the store off from its shared store, once; the model loses
// every domain's state and takes back the calls the replica was granted
// and has not ended, each for the LeaseTTL it asked for, as a degraded
// store's local state does.
func (r *runner) outage(ctx context.Context) error {
	if r.tg.Outage == nil || r.down {
		return nil
	}
	if err := r.tg.Outage(ctx); err != nil {
		return err
	}
	r.down = true
	held := make(map[string][]store.Held)
	for _, g := range r.grants {
		if r.tg.OutageShare != nil {
			g.held.Candidate = r.tg.OutageShare(g.held.Candidate)
		}
		held[g.domain] = append(held[g.domain], g.held)
	}
	for _, d := range domains {
		r.model.Lose(d)
		r.model.Reassert(d, held[d], r.now)
	}
	return nil
}

// shared is a as the model is to decide it: with the replica's share of
// its candidates after an Outage (Target.OutageShare).
func (r *runner) shared(a store.Acquire) store.Acquire {
	if !r.down || r.tg.OutageShare == nil {
		return a
	}
	a.Candidates = slices.Clone(a.Candidates)
	for i, c := range a.Candidates {
		a.Candidates[i] = r.tg.OutageShare(c)
	}
	return a
}

// owed is err, but for the shared store's failure once it is unreachable:
// a degraded store answers the call locally and reports what it could not
// tell the shared store (see Target.Outage).
func (r *runner) owed(err error) error {
	if r.down && errors.Is(err, store.ErrUnavailable) {
		return nil
	}
	return err
}

// drain takes the hints that have arrived into got.
func (r *runner) drain() {
	for _, ch := range r.wakes {
		for more := true; more; {
			select {
			case t := <-ch:
				r.got[t] = true
			default:
				more = false
			}
		}
	}
}

// woken checks that every hint the model requires arrived: the head of
// each queue for a unit that has room. A store may send more (Waker:
// hints may be duplicated, and a store may wake several waiters for
// several slots), so extra hints are not an error.
func (r *runner) woken(want []storemodel.Wake) error {
	var timeout <-chan time.Time
	for _, w := range want {
		for r.drain(); !r.got[r.tick(w.Ticket)]; r.drain() {
			if r.tg.WakeWait == 0 {
				return fmt.Errorf("no wake-up for %s, model requires one", w.Ticket)
			}
			if timeout == nil {
				timeout = time.After(r.tg.WakeWait)
			}
			select {
			case t := <-r.wakes[0]:
				r.got[t] = true
			case t := <-r.wakes[1]:
				r.got[t] = true
			case <-timeout:
				return fmt.Errorf("no wake-up for %s within %v, model requires one", w.Ticket, r.tg.WakeWait)
			}
		}
	}
	return nil
}

// inspect compares what the Inspector shows of every unit and credential.
// Cap is left out: a limit that has lapsed may be forgotten (store.Claims,
// "Limit state is bounded"), and then shows Cap 0 until listed again.
func (r *runner) inspect(ctx context.Context, d string) error {
	got, err := r.tg.Inspector.Units(ctx, r.dom(d), r.units)
	if err != nil {
		return err
	}
	want := r.model.Units(d, r.units, r.now)
	for i := range want {
		g, w := got[i], want[i]
		g.Cap, w.Cap = 0, 0
		if !sameUnit(g, w) {
			return fmt.Errorf("units %s: store %+v, model %+v", w.ID, g, w)
		}
	}
	gc, err := r.tg.Inspector.CredentialInFlight(ctx, r.dom(d), r.creds)
	if err != nil {
		return err
	}
	if wc := r.model.CredentialInFlight(d, r.creds, r.now); !maps.Equal(gc, wc) {
		return fmt.Errorf("credentials in flight: store %v, model %v", gc, wc)
	}
	return nil
}

func sameGrant(a, b store.Grant) bool {
	return a.Granted == b.Granted && a.Index == b.Index && a.Lease == b.Lease && a.Expires.Equal(b.Expires) &&
		a.Probe == b.Probe && a.Position == b.Position && a.RetryAt.Equal(b.RetryAt) && a.Cooling == b.Cooling &&
		a.Refused == b.Refused
}

func grantString(g store.Grant) string {
	switch {
	case g.Granted:
		return fmt.Sprintf("granted #%d expires %s probe %t", g.Index, clock(g.Expires), g.Probe)
	case g.Refused:
		return "refused"
	}
	return fmt.Sprintf("queued at %d retry at %s cooling %t", g.Position, clock(g.RetryAt), g.Cooling)
}

// clock prints t as the offset from Start, the way a history reads.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + t.Sub(Start).String()
}

func sameUnit(a, b store.UnitState) bool {
	if !a.CoolingUntil.Equal(b.CoolingUntil) {
		return false
	}
	for c := range a.OldestByClass {
		if !a.OldestByClass[c].Equal(b.OldestByClass[c]) {
			return false
		}
	}
	a.CoolingUntil, b.CoolingUntil = time.Time{}, time.Time{}
	a.OldestByClass, b.OldestByClass = [store.Classes]time.Time{}, [store.Classes]time.Time{}
	if len(a.WaitingByTenant) == 0 {
		a.WaitingByTenant = nil
	}
	if len(b.WaitingByTenant) == 0 {
		b.WaitingByTenant = nil
	}
	return reflect.DeepEqual(a, b)
}

// Run checks histories against tg, and fails t with the shrunk history of
// the first that disagrees. It checks n histories, or $SLUICE_HISTORIES of
// them when that is set: the long run (SLUICE_HISTORIES=100000 go test
// -run Histories ./internal/store/...) is a bench, not CI. Seeds start at
// $SLUICE_HISTORY_SEED (default 1).
func Run(t *testing.T, tg Target, n int) {
	first, n := span(t, n)
	report(t, Find(t.Context(), tg, first, n), first, n)
}

// RunEach is Run on a new target for every history, and for every history
// the shrinker tries: for a store that a history leaves in a state the
// next cannot start from (a degraded store after an Outage). newTarget
// returns the target and what ends it.
func RunEach(t *testing.T, newTarget func() (Target, func()), n int) {
	first, n := span(t, n)
	report(t, FindEach(t.Context(), newTarget, first, n), first, n)
}

// span is the first seed and the number of histories to check: n, or as
// the environment says (see Run).
func span(t *testing.T, n int) (uint64, int) {
	first := uint64(1)
	if v := os.Getenv("SLUICE_HISTORIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SLUICE_HISTORIES=%q: %v", v, err)
		}
	}
	if v := os.Getenv("SLUICE_HISTORY_SEED"); v != "" {
		var err error
		if first, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SLUICE_HISTORY_SEED=%q: %v", v, err)
		}
	}
	return first, n
}

func report(t *testing.T, f Failure, first uint64, n int) {
	switch {
	case f.Err != nil && f.Shrunk == nil:
		t.Fatal(f.Err)
	case f.Err != nil:
		t.Fatal(f)
	}
	t.Logf("%d histories (seeds %d–%d), %d operations: the store agrees with the model", f.Histories, first, first+uint64(n)-1, f.Ops)
}

// Failure is what Find found.
type Failure struct {
	Histories, Ops int // checked, the failing one included
	Seed           uint64
	Err            error // nil when every history agreed
	Shrunk         []Op  // a minimal history that still disagrees
}

func (f Failure) String() string {
	return fmt.Sprintf("seed %d disagrees with the model: %v\nshrunk to %d operations, ready to paste into Regressions:\n%s",
		f.Seed, f.Err, len(f.Shrunk), Format(f.Shrunk))
}

// Find checks the histories of seeds first to first+n-1 against tg and
// stops at the first that disagrees, which it shrinks.
func Find(ctx context.Context, tg Target, first uint64, n int) Failure {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := open(ctx, tg)
	if err != nil {
		return Failure{Err: err}
	}
	return find(first, n, func(ops []Op) error { return s.check(ctx, ops) })
}

// FindEach is Find on a new target for every history checked (see RunEach).
func FindEach(ctx context.Context, newTarget func() (Target, func()), first uint64, n int) Failure {
	return find(first, n, func(ops []Op) error {
		tg, end := newTarget()
		defer end()
		return Check(ctx, tg, ops)
	})
}

func find(first uint64, n int, check func([]Op) error) Failure {
	var f Failure
	for seed := first; seed < first+uint64(n); seed++ {
		ops := Generate(seed, Length(seed))
		f.Histories++
		f.Ops += len(ops)
		if err := check(ops); err != nil {
			f.Seed = seed
			f.Shrunk = Shrink(ops, func(ops []Op) bool { return check(ops) != nil })
			f.Err = check(f.Shrunk)
			if f.Err == nil { // a flaky failure: report the history as it failed
				f.Shrunk, f.Err = ops, err
			}
			return f
		}
	}
	return f
}

// Length is the number of operations of the history of seed: 20 to 60.
func Length(seed uint64) int { return 20 + int(seed*7919%41) }
