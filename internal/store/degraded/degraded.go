// Package degraded keeps a replica serving while its shared state store
// (Redis) cannot be reached: the operator's state.degraded: local. A Store
// wraps the shared store; while the shared store answers, every call goes
// to it. The first call that finds it unreachable switches the replica to
// a local in-process store (the app gives it a memstore) in which every
// cap, rate and daily budget is the shared one divided by the number of
// replicas (rounded down, at least 1), so that the replicas together stay
// within the caps as long as they number at most those caps. A probe PINGs
// the shared store every probeEvery while degraded; once it answers, the
// claims granted locally that still run are handed over to it (reasserted,
// so they count against the shared caps) and the replica returns to shared
// state; while it hands them over it grants nothing locally (the hand-over
// frees their local slots, and a grant into one would pass the replica's
// share while the others still admit theirs). Nothing is leaked: a local
// claim is released in whichever store holds it, a ticket queued locally
// leaves the local queue at its next try, and claims the shared store held
// before the outage stay there.
//
// At the return, replicas switch back at different moments: one back on
// the shared store would not see the local claims of one still local. So
// a replica back holds new claims (they wait, none is refused) for
// returnPause after handing its own over, by which time every replica that
// can reach the shared store has handed over its own and stopped admitting
// locally; and so does a replica that did not find the store down (its
// requests were waiting meanwhile, say) when the store tells it that it
// lost its state. When the shared store came back empty, the hand-over
// reasserts every lease the replica holds, those it was granted there
// before the outage included, so that the calls still running count again
// before anything new is admitted.
//
// At the outage, the calls the shared store admitted for this replica
// still run: they count against its local shares too (mirrored in the
// local store) until they end or the replica returns. So the replicas
// together stay within a cap as long as none had more than its share of
// it in flight at the outage. Not covered: one that had more (no replica
// knows what the others had) passes the cap by that excess until those
// calls end; and when only some replicas lose the shared store (a
// partition), or it comes back with its state, the others admit through
// it without seeing their local claims.
//
// It depends on package store only.
package degraded

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Shared is the shared store a Store wraps: what the gateway keeps in it.
type Shared interface {
	store.Claims
	store.Reasserter
	store.Waker
	store.Inspector
	store.Statuses
	store.Affinity
}

// Local is the in-process store a Store falls back to. It must never
// fail: its errors are ignored where a shared store's would be retried.
// Reassert counts there the calls the shared store admitted before the
// outage (see enter).
type Local interface {
	store.Claims
	store.Reasserter
	store.Waker
	store.Inspector
	store.Affinity
}

// probeEvery is how often a degraded replica asks whether the shared
// store is back; it returns to it within about this long.
const probeEvery = 200 * time.Millisecond

// Options configure a Store.
type Options struct {
	// Replicas is the number of replicas sharing the caps (≥ 1): each
	// takes cap ÷ Replicas of every cap while degraded.
	Replicas int
	// Ping asks the shared store whether it answers.
	Ping func(ctx context.Context) error
	Log  *slog.Logger
	// Changed, if set, is called at each transition: true when the replica
	// turns to local state, false when it is back on shared state.
	Changed func(degraded bool)
}

// Store is a store.Claims, store.Waker, store.Inspector, store.Statuses
// and store.Affinity that falls back to local state while the shared store
// is unreachable. Safe for concurrent use.
type Store struct {
	shared Shared
	local  Local
	opts   Options

	degraded atomic.Bool
	// held counts the leases and tickets in local, so that a replica on
	// shared state with none (the usual case) pays one atomic load per call.
	held atomic.Int64

	// pausedUntil (Unix nanoseconds, 0 for none) holds new claims back
	// after the return to shared state (see the package comment).
	pausedUntil atomic.Int64

	mu      sync.Mutex
	leases  map[leaseKey]store.Held // granted locally, by domain and lease
	tickets map[leaseKey]string     // queued locally (not granted), their queue
	remote  map[leaseKey]store.Held // granted by the shared store and not released
	mirrors map[leaseKey]struct{}   // remote leases counted locally too, from the outage to the return
	probing bool                    // the probe loop runs
	// handingOver is set while the probe hands the local leases over: a
	// local grant meanwhile is undone (see acquireLocal).
	handingOver bool
	stop        chan struct{} // closed by Close
	wg          sync.WaitGroup
}

type leaseKey struct{ domain, id string }

var (
	_ store.Claims     = (*Store)(nil)
	_ store.Reasserter = (*Store)(nil)
	_ store.Waker      = (*Store)(nil)
	_ store.Inspector  = (*Store)(nil)
	_ store.Statuses   = (*Store)(nil)
	_ store.Affinity   = (*Store)(nil)
)

// New wraps shared, falling back to local, which must be empty and used by
// nothing else. opts.Replicas below 1 counts as 1.
func New(shared Shared, local Local, opts Options) *Store {
	opts.Replicas = max(opts.Replicas, 1)
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Store{
		shared: shared, local: local, opts: opts,
		leases: make(map[leaseKey]store.Held), tickets: make(map[leaseKey]string), remote: make(map[leaseKey]store.Held),
		mirrors: make(map[leaseKey]struct{}), stop: make(chan struct{}),
	}
}

// Degraded reports whether the replica runs on local state.
func (s *Store) Degraded() bool { return s.degraded.Load() }

// Close stops the probe loop. It does not close the shared store.
func (s *Store) Close() error {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// outage reports whether err, from a call with ctx, says the shared store
// cannot be reached (and not that it lost its state, which it says when
// it answers, nor that the caller gave up).
func outage(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrStateLost)
}

// Acquire asks the shared store, or the local one while degraded. A
// ticket the local store knows is answered there if it holds a local
// lease (Acquire is idempotent), else taken out of the local queue first.
func (s *Store) Acquire(ctx context.Context, a store.Acquire) (store.Grant, error) {
	if !s.degraded.Load() {
		if s.held.Load() > 0 {
			if g, ok, err := s.knownLocally(ctx, a); ok {
				return g, err
			}
		}
		if g, ok := s.paused(); ok {
			return g, nil
		}
		g, err := s.shared.Acquire(ctx, a)
		s.lostState(err)
		if !outage(ctx, err) {
			if g.Granted {
				s.mu.Lock()
				s.remote[leaseKey{a.Domain, a.Ticket}] = store.Held{Lease: g.Lease, Candidate: a.Candidates[g.Index], Tokens: a.Tokens, TTL: a.LeaseTTL}
				s.mu.Unlock()
			}
			return g, err
		}
		s.enter(err)
	}
	return s.acquireLocal(ctx, a)
}

// returnPause is how long a replica back on shared state holds new claims:
// long enough for the others to find the shared store back and hand their
// local claims over. Their probes run probeEvery apart, a hand-over takes
// at most another probeEvery (its timeout), and a Redis client that failed
// to dial many times in a row (go-redis: as many as its pool size) dials
// again only once a second: so a replica may reach Redis up to a second
// after another does (seen in TestRedisKilledAndRestartedMidLoad).
const returnPause = time.Second + 2*probeEvery

// paused answers a new claim while the replica holds them back after its
// return to shared state: wait, and try again when the pause ends.
func (s *Store) paused() (store.Grant, bool) {
	until := s.pausedUntil.Load()
	if until == 0 {
		return store.Grant{}, false
	}
	if time.Now().UnixNano() < until {
		return store.Grant{Position: 1, RetryAt: time.Unix(0, until)}, true
	}
	s.pausedUntil.CompareAndSwap(until, 0)
	return store.Grant{}, false
}

// lostState holds new claims back for returnPause when err says the
// shared store came back without its state, unless they are already: a
// replica that did not find the store down meanwhile (its requests were
// waiting, say) must not admit through it while others may still admit
// locally.
func (s *Store) lostState(err error) {
	if errors.Is(err, store.ErrStateLost) {
		s.pausedUntil.CompareAndSwap(0, time.Now().Add(returnPause).UnixNano())
	}
}

// released forgets a lease the shared store granted, and releases its
// mirror in the local store with out when it has one (see enter).
func (s *Store) released(ctx context.Context, domain, lease string, out store.Outcome) {
	k := leaseKey{domain, lease}
	s.mu.Lock()
	delete(s.remote, k)
	_, mirrored := s.mirrors[k]
	delete(s.mirrors, k)
	s.mu.Unlock()
	if mirrored {
		s.local.Release(ctx, domain, lease, out)
	}
}

// knownLocally answers a ticket that holds a local lease, and takes one
// queued locally out of the local queue (it now queues in the shared one).
func (s *Store) knownLocally(ctx context.Context, a store.Acquire) (store.Grant, bool, error) {
	k := leaseKey{a.Domain, a.Ticket}
	s.mu.Lock()
	_, granted := s.leases[k]
	queue, queued := s.tickets[k]
	if queued {
		delete(s.tickets, k)
		s.held.Add(-1)
	}
	s.mu.Unlock()
	switch {
	case granted:
		g, err := s.local.Acquire(ctx, s.scaled(a))
		return g, true, err
	case queued:
		s.local.Cancel(ctx, a.Domain, queue, a.Ticket) // the local store never fails
	}
	return store.Grant{}, false, nil
}

// acquireLocal asks the local store with every cap divided by the
// replicas, and remembers what it granted or queued. A new grant during a
// hand-over, or after it (the replica switched back while the local store
// granted), is released at once and the call told to try again: it would
// count in neither store's view of the others.
func (s *Store) acquireLocal(ctx context.Context, a store.Acquire) (store.Grant, error) {
	g, err := s.local.Acquire(ctx, s.scaled(a))
	if err != nil {
		return g, err
	}
	k := leaseKey{a.Domain, a.Ticket}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, wasQueued := s.tickets[k]
	_, wasHeld := s.leases[k]
	switch {
	case g.Granted && !wasHeld && (s.handingOver || !s.degraded.Load()):
		s.local.Release(ctx, a.Domain, g.Lease, store.Outcome{}) // the local store never fails
		if wasQueued {
			delete(s.tickets, k)
			s.held.Add(-1)
		}
		return store.Grant{Position: 1, RetryAt: time.Now().Add(probeEvery)}, nil
	case g.Granted && !wasHeld:
		s.leases[k] = store.Held{Lease: g.Lease, Candidate: a.Candidates[g.Index], Tokens: a.Tokens, TTL: a.LeaseTTL}
		if wasQueued {
			delete(s.tickets, k)
		} else {
			s.held.Add(1)
		}
	case !g.Granted && !g.Refused && !wasQueued:
		s.tickets[k] = a.Queue
		s.held.Add(1)
	case g.Refused && wasQueued:
		delete(s.tickets, k)
		s.held.Add(-1)
	}
	return g, nil
}

// scaled is a with its candidates' caps divided by the replicas. The
// candidates are copied: the caller's stay as they are.
func (s *Store) scaled(a store.Acquire) store.Acquire {
	cs := make([]store.Candidate, len(a.Candidates))
	for i, c := range a.Candidates {
		cs[i] = scaleCandidate(c, s.opts.Replicas)
	}
	a.Candidates = cs
	return a
}

// scaleCandidate is c with its caps divided by n replicas; its limits are
// copied.
func scaleCandidate(c store.Candidate, n int) store.Candidate {
	c.Unit = scaleUnit(c.Unit, n)
	c.CredentialCap = share(c.CredentialCap, n)
	if len(c.Limits) > 0 {
		lims := make([]store.Unit, len(c.Limits))
		for j, l := range c.Limits {
			lims[j] = scaleUnit(l, n)
		}
		c.Limits = lims
	}
	return c
}

func scaleUnit(u store.Unit, n int) store.Unit {
	u.Cap, u.RPM, u.TPM = share(u.Cap, n), share(u.RPM, n), share(u.TPM, n)
	u.DailyTokens, u.DailyRequests = share(u.DailyTokens, n), share(u.DailyRequests, n)
	if len(u.Reserve) > 0 {
		r := make([]int, len(u.Reserve))
		for i, v := range u.Reserve {
			r[i] = max(v, 0) / n
		}
		u.Reserve = r
	}
	return u
}

// share is one replica's share of a limit: v ÷ n rounded down, at least 1;
// 0 (unlimited) stays 0.
func share(v, n int) int {
	if v <= 0 {
		return v
	}
	return max(1, v/n)
}

// local reports whether lease of domain is held in the local store.
func (s *Store) isLocal(domain, lease string) bool {
	if s.held.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.leases[leaseKey{domain, lease}]
	return ok
}

// takeLocal forgets lease and reports true if it is a local one. One
// step: a hand-over moving it to the shared store meanwhile either finds it
// gone (and releases it there at once, see reassert) or has moved it
// before (and the caller releases it there). Checked and forgotten apart,
// a lease moved in between was released in neither store, and held its
// slot in the shared one until it expired.
func (s *Store) takeLocal(domain, lease string) bool {
	if s.held.Load() == 0 {
		return false
	}
	k := leaseKey{domain, lease}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[k]; !ok {
		return false
	}
	delete(s.leases, k)
	s.held.Add(-1)
	return true
}

// Release releases the lease in the store that granted it.
func (s *Store) Release(ctx context.Context, domain, lease string, out store.Outcome) error {
	if s.takeLocal(domain, lease) {
		return s.local.Release(ctx, domain, lease, out)
	}
	s.released(ctx, domain, lease, out)
	return s.shared.Release(ctx, domain, lease, out)
}

// Renew renews each lease in the store that holds it.
func (s *Store) Renew(ctx context.Context, domain string, leases []string, ttl time.Duration) error {
	degraded := s.degraded.Load()
	if degraded {
		// Its local leases, and the mirrors of its shared ones (see enter);
		// the local store ignores the others.
		s.local.Renew(ctx, domain, leases, ttl)
	}
	if s.held.Load() == 0 {
		err := s.shared.Renew(ctx, domain, leases, ttl)
		s.lostState(err)
		return err
	}
	var local, shared []string
	for _, l := range leases {
		if s.isLocal(domain, l) {
			local = append(local, l)
		} else {
			shared = append(shared, l)
		}
	}
	if !degraded {
		s.local.Renew(ctx, domain, local, ttl) // the local store never fails
	}
	if len(shared) == 0 {
		return nil
	}
	err := s.shared.Renew(ctx, domain, shared, ttl)
	s.lostState(err)
	return err
}

// Cancel takes the ticket out of the local queue if it waits there (or
// releases its local lease), and out of the shared one unless degraded.
func (s *Store) Cancel(ctx context.Context, domain, queue, ticket string) error {
	if s.held.Load() > 0 {
		k := leaseKey{domain, ticket}
		s.mu.Lock()
		_, queued := s.tickets[k]
		_, granted := s.leases[k]
		if queued {
			delete(s.tickets, k)
		}
		if granted {
			delete(s.leases, k)
		}
		if queued || granted {
			s.held.Add(-1)
		}
		s.mu.Unlock()
		if queued || granted {
			s.local.Cancel(ctx, domain, queue, ticket)
			if s.degraded.Load() {
				return nil // a ticket the shared store has from before the outage lapses there
			}
		}
	}
	s.released(ctx, domain, ticket, store.Outcome{})
	return s.shared.Cancel(ctx, domain, queue, ticket)
}

// ProbeSucceeded opens the probe's unit in the store that holds the lease.
func (s *Store) ProbeSucceeded(ctx context.Context, domain, lease string) error {
	if s.isLocal(domain, lease) {
		return s.local.ProbeSucceeded(ctx, domain, lease)
	}
	return s.shared.ProbeSucceeded(ctx, domain, lease)
}

// Reassert makes the held leases live in the shared store that lost its
// state. The local leases among them count there from then on, and are
// released there: the local store forgets them. One released meanwhile
// (its call ended while the shared store reasserted it) is released there
// at once, so that it does not hold its slot until it expires.
func (s *Store) Reassert(ctx context.Context, domain string, held []store.Held) error {
	if s.degraded.Load() {
		// Still admitting locally (the capacity engine reasserts when a
		// renewal finds the store back without its state): the local
		// leases keep counting here until the hand-over moves them.
		held = slices.DeleteFunc(slices.Clone(held), func(h store.Held) bool { return s.isLocal(domain, h.Lease) })
	}
	return s.reassert(ctx, domain, held)
}

// reassert is Reassert, local leases included: the hand-over's.
func (s *Store) reassert(ctx context.Context, domain string, held []store.Held) error {
	if err := s.shared.Reassert(ctx, domain, held); err != nil {
		return err
	}
	var ended []string
	for _, h := range held {
		k := leaseKey{domain, h.Lease}
		s.mu.Lock()
		_, local := s.leases[k]
		_, remote := s.remote[k]
		if local {
			delete(s.leases, k)
			s.held.Add(-1)
		}
		if local || remote {
			s.remote[k] = h
		}
		s.mu.Unlock()
		switch {
		case local:
			s.local.Release(ctx, domain, h.Lease, store.Outcome{})
		case !remote:
			ended = append(ended, h.Lease)
		}
	}
	for _, lease := range ended {
		if err := s.shared.Release(ctx, domain, lease, store.Outcome{}); err != nil {
			return err
		}
	}
	return nil
}

// enter switches to local state after cause, once, and starts the probe.
func (s *Store) enter(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.probing {
		return
	}
	select {
	case <-s.stop:
		return
	default:
	}
	s.probing = true
	s.degraded.Store(true)
	// The calls the shared store admitted here still run: they count
	// against the local shares too, until the return (their mirrors).
	byDomain := make(map[string][]store.Held)
	for k, h := range s.remote {
		h.Candidate = scaleCandidate(h.Candidate, s.opts.Replicas)
		byDomain[k.domain] = append(byDomain[k.domain], h)
		s.mirrors[k] = struct{}{}
	}
	for domain, held := range byDomain {
		s.local.Reassert(context.Background(), domain, held) // the local store never fails
	}
	s.opts.Log.LogAttrs(context.Background(), slog.LevelError, "shared state store unreachable; admitting against local limits (each cap ÷ replicas)",
		slog.Int("replicas", s.opts.Replicas), slog.Int("calls_in_flight", len(s.mirrors)), slog.Any("err", cause))
	if s.opts.Changed != nil {
		s.opts.Changed(true)
	}
	s.wg.Add(1)
	go s.probe()
}

// probe PINGs the shared store until it answers and the local leases are
// handed over to it, then switches back to shared state.
func (s *Store) probe() {
	defer s.wg.Done()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeEvery)
		err := s.opts.Ping(ctx)
		if err == nil {
			s.setHandingOver(true)
			err = s.handOver(ctx)
		}
		cancel()
		if err != nil {
			s.setHandingOver(false) // admitting locally again
			continue
		}
		s.mu.Lock()
		s.handingOver = false
		s.probing = false
		s.pausedUntil.Store(time.Now().Add(returnPause).UnixNano())
		s.degraded.Store(false)
		for k := range s.mirrors { // the shared store counts their calls again
			s.local.Release(context.Background(), k.domain, k.id, store.Outcome{})
		}
		clear(s.mirrors)
		s.mu.Unlock()
		s.opts.Log.LogAttrs(context.Background(), slog.LevelWarn, "shared state store reachable again; back on shared limits",
			slog.Duration("new_claims_held_for", returnPause))
		if s.opts.Changed != nil {
			s.opts.Changed(false)
		}
		return
	}
}

func (s *Store) setHandingOver(on bool) {
	s.mu.Lock()
	s.handingOver = on
	s.mu.Unlock()
}

// handOver makes the local leases count in the shared store before any new
// claim goes there. In a domain whose state the shared store lost, it
// reasserts the leases the shared store granted before the outage too:
// every lease this replica holds there.
func (s *Store) handOver(ctx context.Context) error {
	type leases struct{ local, remote []store.Held }
	byDomain := make(map[string]*leases)
	of := func(domain string) *leases {
		if byDomain[domain] == nil {
			byDomain[domain] = &leases{}
		}
		return byDomain[domain]
	}
	s.mu.Lock()
	for k, h := range s.leases {
		of(k.domain).local = append(of(k.domain).local, h)
	}
	for k, h := range s.remote {
		of(k.domain).remote = append(of(k.domain).remote, h)
	}
	s.mu.Unlock()
	for domain, held := range byDomain {
		// The shared store renews the leases it holds among these and
		// ignores the others; it answers ErrStateLost when the domain's
		// state is not the one this replica knows.
		ids, ttl := make([]string, 0, len(held.local)+len(held.remote)), time.Second
		for _, h := range held.local {
			ids = append(ids, h.Lease)
		}
		for _, h := range held.remote {
			ids, ttl = append(ids, h.Lease), max(ttl, h.TTL) // not shorter than they were granted for
		}
		err := s.shared.Renew(ctx, domain, ids, ttl)
		switch {
		case errors.Is(err, store.ErrStateLost):
			err = s.reassert(ctx, domain, append(held.local, held.remote...))
		case err == nil && len(held.local) > 0:
			err = s.reassert(ctx, domain, held.local)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Wake merges the wake-ups of the shared and the local store. The channel
// closes when ctx ends or the shared store closes its own.
func (s *Store) Wake(ctx context.Context, replica string) (<-chan string, error) {
	shared, err := s.shared.Wake(ctx, replica)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	local, err := s.local.Wake(lctx, replica)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan string, cap(shared)+cap(local))
	go func() {
		defer close(out)
		defer cancel()
		for {
			var t string
			var ok bool
			select {
			case t, ok = <-shared:
				if !ok {
					return
				}
			case t = <-local:
			}
			select {
			case out <- t:
			default: // full: a hint dropped, as the stores drop theirs
			}
		}
	}()
	return out, nil
}

// current is the store of the Inspector and Affinity calls: local state
// while degraded.
func (s *Store) current() interface {
	store.Inspector
	store.Affinity
} {
	if s.degraded.Load() {
		return s.local
	}
	return s.shared
}

// Units reads the units' state in the current store.
func (s *Store) Units(ctx context.Context, domain string, ids []string) ([]store.UnitState, error) {
	return s.current().Units(ctx, domain, ids)
}

// CredentialInFlight reads the credentials' claims in the current store.
func (s *Store) CredentialInFlight(ctx context.Context, domain string, ids []string) (map[string]int, error) {
	return s.current().CredentialInFlight(ctx, domain, ids)
}

// Touch, Bind and Binding keep session-affinity bindings in the current
// store: while degraded, sessions bind per replica.
func (s *Store) Touch(ctx context.Context, domain string, owner store.SeedOwner, seed string, ttl time.Duration) (string, error) {
	return s.current().Touch(ctx, domain, owner, seed, ttl)
}

// Bind: see Touch.
func (s *Store) Bind(ctx context.Context, domain string, owner store.SeedOwner, seed, from, to string, ttl time.Duration) (string, error) {
	return s.current().Bind(ctx, domain, owner, seed, from, to, ttl)
}

// Binding: see Touch.
func (s *Store) Binding(ctx context.Context, domain, seed string) (store.Binding, bool, error) {
	return s.current().Binding(ctx, domain, seed)
}

// SetStatus and Statuses stay on the shared store: a status change must
// reach every replica, and the gateway keeps its last view while the store
// is unreachable.
func (s *Store) SetStatus(ctx context.Context, kind, id string, st store.Status) error {
	return s.shared.SetStatus(ctx, kind, id, st)
}

// Statuses: see SetStatus.
func (s *Store) Statuses(ctx context.Context, kind string) (map[string]store.Status, error) {
	return s.shared.Statuses(ctx, kind)
}
