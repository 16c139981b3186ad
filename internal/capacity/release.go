package capacity

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// releaseTimeout bounds one call to the store made after the request has
// no use for its answer: a release, the opening of a probe, a reassertion.
const releaseTimeout = 2 * time.Second

// A release the store could not take is tried again after retryFirst,
// doubling up to retryMax: once the store is back, the slot returns within
// about retryMax, not at the lease's expiry.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 500 * time.Millisecond
)

// background counts the calls to the store that goroutines make on behalf
// of requests that no longer wait for them, so that Flush can wait for them.
type background struct {
	ctx  context.Context // ended by Flush when it gives up: the calls then stop
	stop context.CancelFunc

	mu      sync.Mutex
	n       int
	drained chan struct{} // closed when n drops to 0; made by a waiting Flush
}

func (b *background) start() {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
}

func (b *background) done() {
	b.mu.Lock()
	if b.n--; b.n == 0 && b.drained != nil {
		close(b.drained)
		b.drained = nil
	}
	b.mu.Unlock()
}

// wait returns when no call is on its way, or with ctx's error.
func (b *background) wait(ctx context.Context) error {
	b.mu.Lock()
	if b.n == 0 {
		b.mu.Unlock()
		return nil
	}
	if b.drained == nil {
		b.drained = make(chan struct{})
	}
	drained := b.drained
	b.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Flush waits until every release on its way has reached the store (or
// given up), or ctx ends: then the rest are abandoned, their leases lapse
// after the lease TTL, and Flush returns ctx's cause once they stopped.
// Call it at shutdown, once no request runs any more; an Engine whose
// Flush gave up must not be used again.
func (e *Engine) Flush(ctx context.Context) error {
	err := e.bg.wait(ctx)
	if err != nil {
		e.bg.stop()
		_ = e.bg.wait(context.Background()) // prompt: every call's context ends with bg.ctx
	}
	return err
}

// releaseNow makes one call to release lease. With unhold the lease first
// leaves the held set, under the same shared hold of e.lost as the call: a
// reassertion then either does not see the lease, or completes before the
// release, which undoes it.
func (e *Engine) releaseNow(ctx context.Context, domain, lease string, out store.Outcome, unhold bool) error {
	e.lost.RLock()
	defer e.lost.RUnlock()
	if unhold {
		e.unhold(domain, lease)
	}
	if e.local {
		return e.claims.Release(ctx, domain, lease, out) // never waits
	}
	rctx, cancel := context.WithTimeout(e.bg.ctx, releaseTimeout)
	defer cancel()
	return e.claims.Release(rctx, domain, lease, out)
}

// retryRelease tries again a release whose call failed with err, while the
// store could not be reached: until it lands, or the lease has lapsed of
// itself (a lease TTL from now, its last renewal being earlier), or Flush
// gives up. Releasing twice is harmless, so is releasing a lapsed lease.
func (e *Engine) retryRelease(domain, lease string, out store.Outcome, err error) {
	lapsed := time.Now().Add(e.leaseTTL)
	wait := retryFirst
	for errors.Is(err, store.ErrUnavailable) && time.Now().Add(wait).Before(lapsed) {
		t := time.NewTimer(wait)
		select {
		case <-e.bg.ctx.Done():
			t.Stop()
			e.log.LogAttrs(e.bg.ctx, slog.LevelWarn, "shutting down with a release not done; the claim lapses after the lease TTL",
				slog.String("lease", lease), slog.Any("err", err))
			return
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
		err = e.releaseNow(e.bg.ctx, domain, lease, out, false)
	}
	if err != nil {
		e.log.LogAttrs(e.bg.ctx, slog.LevelError, "releasing a claim failed; it lapses after the lease TTL",
			slog.String("lease", lease), slog.Any("err", err))
	}
}

// probeSucceeded makes the one call that opens the unit of a probe lease.
func (e *Engine) probeSucceeded(ctx context.Context, domain, lease string) {
	if !e.local {
		rctx, cancel := context.WithTimeout(e.bg.ctx, releaseTimeout)
		defer cancel()
		ctx = rctx
	}
	if err := e.claims.ProbeSucceeded(ctx, domain, lease); err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "opening an account at its probe's first byte failed; it opens when the probe ends",
			slog.String("lease", lease), slog.Any("err", err))
	}
}

// reassert claims again, in a store that lost its state, the leases this
// replica holds in domain, before anything new is granted there: the calls
// they were granted for still run, and must count against their caps.
// seen is e.reasserted as the caller saw it before the store refused it:
// if another caller reasserted since, there is nothing left to do. It
// holds e.lost exclusively, so no release overtakes it.
func (e *Engine) reassert(ctx context.Context, domain string, seen uint64) error {
	r, ok := e.claims.(store.Reasserter)
	if !ok {
		return store.ErrStateLost
	}
	e.lost.Lock()
	defer e.lost.Unlock()
	if e.reasserted.Load() != seen {
		return nil
	}
	e.mu.Lock()
	held := make([]store.Held, 0, len(e.held[domain]))
	for _, h := range e.held[domain] {
		h.TTL = e.leaseTTL
		held = append(held, h)
	}
	e.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := r.Reassert(rctx, domain, held); err != nil {
		return err
	}
	e.reasserted.Add(1)
	e.log.LogAttrs(ctx, slog.LevelWarn, "the shared state store lost its state; reasserted the claims held here",
		slog.String("domain", domain), slog.Int("leases", len(held)))
	return nil
}
