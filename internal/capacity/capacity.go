// Package capacity turns the shared claim store into what a request needs:
// Wait blocks until one of the request's candidate edges has room on its
// unit (account, or credential acting as its own account), queueing in FIFO
// order with every replica and waking on a release anywhere in the cluster;
// a Claim is renewed while the request runs and released exactly once, in
// the background so that a slow store never delays an answer. A request
// claims in one capacity domain (its accounts'); a limit of its held in a
// domain of its own is taken first, as a token (tokens.go). It depends on
// package sluice and the store interfaces, never on a store implementation.
package capacity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// Engine hands out claims. One per process; safe for concurrent use. Call
// Flush before the process exits, so that releases still on their way
// reach the store.
type Engine struct {
	claims   store.Claims
	waker    store.Waker
	replica  string
	leaseTTL time.Duration
	log      *slog.Logger
	// local: the store lives in this process (store.InProcess), so its
	// calls are made inline; a shared store's releases go in the background.
	local bool

	mu      sync.Mutex
	waiters map[string]chan struct{}         // ticket → wake signal (size 1: a wake is a hint, one pending is enough)
	held    map[string]map[string]store.Held // domain → leases to renew, and to reassert if the store loses them
	copies  map[string][]string              // lease → the domains Rehome copied it to (also in held)
	copied  atomic.Int64                     // len(copies), read without mu
	bg      background                       // releases on their way to the store
	// lost orders releases against reasserting (see reassert): a release
	// holds it shared while it calls the store, a reassertion exclusively.
	lost sync.RWMutex
	// reasserted counts the reassertions done, so that callers refused by a
	// store that lost its state reassert it once between them.
	reasserted atomic.Uint64
	// rates measure how fast each queue is served, for the wait a caller
	// refused at its deadline is told (see estimate).
	rates serviceRates
}

// New returns an Engine. replica names this process in the store; leaseTTL
// is how long a claim of a dead replica lingers.
func New(claims store.Claims, waker store.Waker, replica string, leaseTTL time.Duration, log *slog.Logger) *Engine {
	_, local := claims.(store.InProcess)
	e := &Engine{
		claims: claims, waker: waker, replica: replica, leaseTTL: leaseTTL, log: log, local: local,
		waiters: map[string]chan struct{}{}, held: map[string]map[string]store.Held{}, copies: map[string][]string{},
	}
	e.bg.ctx, e.bg.stop = context.WithCancel(context.Background())
	return e
}

// Run routes wake-ups to waiters and renews held leases until ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	wake, err := e.waker.Wake(ctx, e.replica)
	if err != nil {
		return fmt.Errorf("subscribe to wake-ups: %w", err)
	}
	renew := time.NewTicker(e.leaseTTL / 3)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ticket, ok := <-wake:
			if !ok {
				return nil
			}
			e.signal(ticket)
		case <-renew.C:
			e.renew(ctx)
		}
	}
}

func (e *Engine) signal(ticket string) {
	e.mu.Lock()
	ch := e.waiters[ticket]
	e.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// renew extends every held lease, one batched call per domain; a store
// that lost them gets them reasserted. A failed renewal is logged: the call
// in flight is never aborted for it.
func (e *Engine) renew(ctx context.Context) {
	e.mu.Lock()
	batches := make(map[string][]string, len(e.held))
	for d, leases := range e.held {
		for l := range leases {
			batches[d] = append(batches[d], l)
		}
	}
	e.mu.Unlock()
	seen := e.reasserted.Load()
	for d, leases := range batches {
		err := e.claims.Renew(ctx, d, leases, e.leaseTTL)
		if errors.Is(err, store.ErrStateLost) {
			err = e.reassert(ctx, d, seen)
		}
		if err != nil && ctx.Err() == nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "lease renewal failed; claims may lapse",
				slog.String("domain", d), slog.Int("leases", len(leases)), slog.Any("err", err))
		}
	}
}

// safetyTick bounds how long a waiter sleeps without a wake-up, covering
// lost pub/sub messages and capacity that appears without a release (a
// lease of a dead replica expiring).
const safetyTick = time.Second

// Claim is a held slot. Release it exactly once; later calls do nothing.
type Claim struct {
	Index int  // which candidate was granted
	Probe bool // the unit's single post-cooldown probe
	e     *Engine
	dom   string
	lease string
	// tokens are the domains of the limit tokens the claim holds besides
	// its slot (see tokens.go), under the same lease ID; nil for most.
	tokens []string
	once   sync.Once
	// sent is done once the release's first call to the store has
	// returned (see WaitReleased).
	sent sync.WaitGroup
}

// Plan returns the capacity domain a request claims in and its candidates
// there, in preference order.
type Plan func() (domain string, candidates []store.Candidate)

// Wait claims a slot on the first candidate with room, waiting in the queue
// until deadline. A deadline already passed at the first try is a try
// once: the ticket is taken out of the queue at once when nothing is
// granted. plan returns the request's domain and candidates; it is called
// before every try, so a credential added (or disabled) while the request
// waits is seen; a.Domain and a.Candidates are ignored. When the domain
// changes (a catalog edit moved the accounts), the ticket leaves the old
// domain's queue and queues in the new one. Limits of the candidates held
// in domains of their own (store.Unit.Domain) are taken first, as tokens
// (see tokens.go), then the slot. Claim.Index refers to
// the list of the plan call that won. An empty plan fails at once with
// no_upstream_available. Wait returns capacity_wait_timeout when the deadline
// passes (wrapping ErrCooling when its candidates were cooling), with a
// RetryAfter estimated from the ticket's place in the queue and the queue's
// recent service rate (see estimate), ErrRefused
// when the store refused rather than queued, the context's cause when the
// caller leaves, and state_unavailable (see StateUnavailable) wrapping
// store.ErrUnavailable when the store cannot be reached. A store that lost
// its state since this replica's last call gets the leases this replica
// holds reasserted before anything is granted.
func (e *Engine) Wait(ctx context.Context, a store.Acquire, deadline time.Time, plan Plan) (*Claim, error) {
	return e.wait(ctx, a, deadline, plan, false)
}

// WaitOpen is Wait for a request that waits for its candidates only while
// one of them is open: once a try finds every candidate cooling, it gives
// up at once with capacity_wait_timeout wrapping ErrCooling, as Wait does
// at its deadline. Session affinity leaves a cooling account this way
// rather than wait for its probe.
func (e *Engine) WaitOpen(ctx context.Context, a store.Acquire, deadline time.Time, plan Plan) (*Claim, error) {
	return e.wait(ctx, a, deadline, plan, true)
}

func (e *Engine) wait(ctx context.Context, a store.Acquire, deadline time.Time, plan Plan, open bool) (*Claim, error) {
	a.Replica, a.LeaseTTL, a.Domain = e.replica, e.leaseTTL, ""
	var tk tokens
	// Most requests find room at once and need no wake channel nor timers.
	// A wake-up sent before the waiter below is registered is not lost: the
	// loop tries again at once, and Acquire keeps a queued ticket's place.
	c, g, err := e.try(ctx, &a, &tk, plan)
	if c != nil || err != nil {
		return e.granted(a, c, time.Time{}), err
	}
	if open && g.Cooling || !time.Now().Before(deadline) {
		return nil, e.leave(ctx, a, &tk, e.timedOut(a, g))
	}
	queued := time.Now()
	wake := make(chan struct{}, 1)
	e.mu.Lock()
	e.waiters[a.Ticket] = wake
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.waiters, a.Ticket)
		e.mu.Unlock()
	}()
	expired := time.NewTimer(time.Until(deadline))
	defer expired.Stop()
	retry := time.NewTimer(safetyTick)
	defer retry.Stop()
	for {
		if c, g, err = e.try(ctx, &a, &tk, plan); c != nil || err != nil {
			return e.granted(a, c, queued), err
		}
		if open && g.Cooling {
			return nil, e.leave(ctx, a, &tk, e.timedOut(a, g))
		}
		next := safetyTick
		if !g.RetryAt.IsZero() {
			next = min(next, max(time.Until(g.RetryAt), time.Millisecond))
		}
		retry.Reset(next)
		select {
		case <-wake:
		case <-retry.C:
		case <-expired.C:
			return nil, e.leave(ctx, a, &tk, e.timedOut(a, g))
		case <-ctx.Done():
			return nil, e.leave(ctx, a, &tk, context.Cause(ctx))
		}
	}
}

// granted records the grant of c (nil: none) to the ticket of a, queued
// since queued (zero: granted at its first try), in the service rate of
// its queue, and returns c.
func (e *Engine) granted(a store.Acquire, c *Claim, queued time.Time) *Claim {
	if c != nil {
		e.rates.granted(a.Domain, a.Queue, queued, time.Now())
	}
	return c
}

// timedOut is the capacity_wait_timeout of the ticket of a whose last try
// got g.
func (e *Engine) timedOut(a store.Acquire, g store.Grant) error {
	var cause error
	if g.Cooling {
		cause = ErrCooling
	}
	return &sluice.Error{
		Code: sluice.CodeCapacityWaitTimeout, Msg: "no upstream capacity became free in time",
		RetryAfter: e.estimate(a, g), Err: cause,
	}
}

// try plans and asks the store: for the tokens of the limits held in
// domains of their own first (see tokens.go), then for the slot. It
// returns a claim when granted, an error when the request cannot wait any
// longer, else the grant that queued it.
func (e *Engine) try(ctx context.Context, a *store.Acquire, tk *tokens, plan Plan) (*Claim, store.Grant, error) {
	dom, cands := plan()
	if len(cands) == 0 {
		return nil, store.Grant{}, e.leave(ctx, *a, tk, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "no upstream can serve the request"})
	}
	if dom != a.Domain {
		if a.Domain != "" {
			e.cancel(ctx, a.Domain, a.Queue, a.Ticket) // the accounts moved: queue again in their new domain
		}
		a.Domain = dom
	}
	a.Candidates = cands
	if tk.wanted(cands) {
		g, err := e.takeTokens(ctx, a, tk)
		if err != nil || !g.Granted {
			if err == nil && !g.Refused && tk.queued {
				// It waits for a limit now: not for the accounts as well.
				e.cancel(ctx, a.Domain, a.Queue, a.Ticket)
				tk.queued = false
			}
			return nil, g, e.failed(ctx, *a, tk, g, err)
		}
		a.Candidates = withoutTokens(cands)
	}
	g, err := e.acquire(ctx, *a)
	if err != nil || g.Refused {
		return nil, g, e.failed(ctx, *a, tk, g, err)
	}
	if g.Granted {
		e.hold(a.Domain, store.Held{Lease: g.Lease, Candidate: a.Candidates[g.Index], Tokens: a.Tokens})
		return &Claim{Index: g.Index, Probe: g.Probe, e: e, dom: a.Domain, lease: g.Lease, tokens: tk.domains()}, g, nil
	}
	if len(tk.list) > 0 {
		// It waits for the accounts without holding the slots of its
		// limits that cost nothing to take again (see tokens.go).
		e.dropTokens(ctx, *a, tk, slices.DeleteFunc(slices.Clone(tk.list), token.free))
		tk.queued = true
	}
	return nil, g, nil
}

// acquire asks the store once for a, reasserting this replica's leases in
// a's domain first if the store lost its state.
func (e *Engine) acquire(ctx context.Context, a store.Acquire) (store.Grant, error) {
	seen := e.reasserted.Load()
	g, err := e.claims.Acquire(ctx, a)
	if errors.Is(err, store.ErrStateLost) {
		if err = e.reassert(ctx, a.Domain, seen); err == nil {
			g, err = e.claims.Acquire(ctx, a)
		}
	}
	return g, err
}

// failed is what try returns for an Acquire (of the slot or of a token)
// that answered g, err: the error that ends the wait, or nil while the
// request queues.
func (e *Engine) failed(ctx context.Context, a store.Acquire, tk *tokens, g store.Grant, err error) error {
	switch {
	case err != nil && ctx.Err() != nil:
		return e.leave(ctx, a, tk, context.Cause(ctx))
	case err != nil:
		e.dropTokens(ctx, a, tk, nil)
		return StateUnavailable(err)
	case g.Refused && len(tk.list) > 0:
		return e.leave(ctx, a, tk, ErrRefused) // the slot's ticket may wait from an earlier try
	case g.Refused:
		return ErrRefused // the store took the ticket out of its queue
	}
	return nil
}

// ErrRefused is what Wait returns when the store refused the request
// rather than queue it: a limit it must never wait for is full (see
// store.Unit.Refuse).
var ErrRefused = errors.New("a limit that is never waited for is full")

// ErrCooling is the cause of a capacity_wait_timeout whose last try found
// every candidate's unit closed by a cooldown (store.Grant.Cooling): the
// request waited for rate limits, not for free slots.
var ErrCooling = errors.New("every candidate is cooling")

// stateRetryAfter is how long a caller refused for an unreachable store is
// asked to wait: long enough not to hammer a store that is down, short
// enough to find one that is back.
const stateRetryAfter = 2 * time.Second

// StateUnavailable is the answer to a request refused because the shared
// state store failed (err): 503 state_unavailable with a Retry-After.
func StateUnavailable(err error) *sluice.Error {
	return &sluice.Error{Code: sluice.CodeStateUnavailable, Msg: "the gateway's shared state is unavailable; retry later",
		RetryAfter: stateRetryAfter, Err: err}
}

// leave takes the ticket out of the queue (or releases what was granted in
// the race), gives back the tokens it holds or waits for, and returns why.
func (e *Engine) leave(ctx context.Context, a store.Acquire, tk *tokens, why error) error {
	if a.Domain != "" {
		e.cancel(ctx, a.Domain, a.Queue, a.Ticket)
	}
	e.dropTokens(ctx, a, tk, nil)
	return why
}

// cancel takes ticket out of queue in domain, or releases what it was
// granted meanwhile, even after the caller left.
func (e *Engine) cancel(ctx context.Context, domain, queue, ticket string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := e.claims.Cancel(cctx, domain, queue, ticket); err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "leaving the wait queue failed; the ticket expires on its own",
			slog.String("request_id", ticket), slog.String("domain", domain), slog.Any("err", err))
	}
}

func (e *Engine) hold(domain string, h store.Held) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.holdLocked(domain, h)
}

func (e *Engine) holdLocked(domain string, h store.Held) {
	m := e.held[domain]
	if m == nil {
		m = map[string]store.Held{}
		e.held[domain] = m
	}
	m[h.Lease] = h
}

// Release gives the slot back with the call's outcome. It runs at most once
// (and not at all after Keep) and never waits for a shared store: the
// release goes in the background, retried until it lands or the lease
// lapses, so a stalled store neither delays the answer nor keeps the slot
// until the lease expires. See WaitReleased.
func (c *Claim) Release(ctx context.Context, out store.Outcome) {
	c.once.Do(func() {
		if c.e.local {
			c.e.releaseNow(ctx, c.dom, c.lease, out, true)
			for _, d := range c.tokens {
				c.e.releaseNow(ctx, d, c.lease, tokenOutcome(out), true)
			}
			for _, d := range c.e.takeCopies(c.lease) {
				c.e.releaseNow(ctx, d, c.lease, out, false)
			}
			return
		}
		c.sent.Add(1)
		c.e.bg.start()
		go func() {
			defer c.e.bg.done()
			err := c.e.releaseNow(ctx, c.dom, c.lease, out, true)
			errs := make([]error, len(c.tokens))
			for i, d := range c.tokens {
				errs[i] = c.e.releaseNow(ctx, d, c.lease, tokenOutcome(out), true)
			}
			// Taken after the slot's release, which Rehome cannot overtake:
			// a copy it makes is either here or never made.
			copies := c.e.takeCopies(c.lease)
			copyErrs := make([]error, len(copies))
			for i, d := range copies {
				copyErrs[i] = c.e.releaseNow(ctx, d, c.lease, out, false)
			}
			c.sent.Done()
			c.e.retryRelease(c.dom, c.lease, out, err)
			for i, d := range c.tokens {
				c.e.retryRelease(d, c.lease, tokenOutcome(out), errs[i])
			}
			for i, d := range copies {
				c.e.retryRelease(d, c.lease, out, copyErrs[i])
			}
		}()
	})
}

// WaitReleased waits until Release has made its first calls to the store
// (at most releaseTimeout each), so that another attempt of the same
// request sees the outcome in the store — a rate limit's cooldown keeps it
// off the unit — and finds its tokens free. It returns at once after
// Keep, or before Release.
func (c *Claim) WaitReleased() { c.sent.Wait() }

// ProbeSucceeded tells the store that the claim, its unit's post-cooldown
// probe, succeeded: the upstream answered 2xx and its first byte is on its
// way, so the unit reopens for everyone while this claim stays held until
// Release. It does nothing for a claim that is not the probe, and never
// waits for a shared store (the Release of a successful call opens the unit
// too, should this be lost).
func (c *Claim) ProbeSucceeded(ctx context.Context) {
	if !c.Probe {
		return
	}
	if c.e.local {
		c.e.probeSucceeded(ctx, c.dom, c.lease)
		return
	}
	c.e.bg.start()
	go func() {
		defer c.e.bg.done()
		c.e.probeSucceeded(ctx, c.dom, c.lease)
	}()
}

// Keep hands the claim over to an async job, which holds it until the job
// ends, beyond the request and maybe beyond this process: the lease (and
// its tokens' and copies') is no longer renewed but extended once to ttl
// (the job's maximum age), Release becomes a no-op, and
// ReleaseLease(domain, lease) frees the slot, the tokens and the copies
// from any replica (domain then names their domains too). A lease nobody
// releases lapses after ttl. If the extension fails the claim is released
// and the error returned.
func (c *Claim) Keep(ctx context.Context, ttl time.Duration) (domain, lease string, err error) {
	domain = c.dom
	if len(c.tokens) > 0 {
		domain = claimDomains(c.dom, c.tokens)
	}
	c.once.Do(func() {
		if copies := c.e.takeCopies(c.lease); len(copies) > 0 {
			domain = claimDomains(c.dom, append(slices.Clip(c.tokens), copies...))
		}
		for _, d := range splitDomains(domain) {
			c.e.unhold(d, c.lease)
			if err == nil {
				err = c.e.claims.Renew(ctx, d, []string{c.lease}, ttl)
			}
		}
		if err != nil {
			_ = c.e.ReleaseLease(ctx, domain, c.lease, store.Outcome{})
		}
	})
	return domain, c.lease, err
}

func (e *Engine) unhold(domain, lease string) {
	e.mu.Lock()
	delete(e.held[domain], lease)
	e.mu.Unlock()
}

// ReleaseLease releases a lease by its ID with the call's outcome: a kept
// claim, from whichever replica learns that its job ended. Releasing a lease
// twice, or one that lapsed, does nothing. It waits for the store's first
// answer (at most releaseTimeout) and returns its error; a store that could
// not be reached is tried again in the background for up to a lease TTL.
func (e *Engine) ReleaseLease(ctx context.Context, domain, lease string, out store.Outcome) error {
	var errs []error
	for i, d := range splitDomains(domain) {
		o := out
		if i > 0 {
			o = tokenOutcome(out)
		}
		err := e.releaseNow(ctx, d, lease, o, false)
		if errors.Is(err, store.ErrUnavailable) {
			e.bg.start()
			go func() {
				defer e.bg.done()
				e.retryRelease(d, lease, o, err)
			}()
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
