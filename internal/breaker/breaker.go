// Package breaker provides the endpoint circuit breaker: after a number of
// consecutive failures it stops traffic to an endpoint for a while, then lets
// one probe through to decide whether to close again. It counts only what its
// caller reports; deciding what is a failure (a 5xx or a dial error is, a 429
// or another 4xx is not) is the caller's job. It depends only on the standard
// library.
package breaker

import (
	"sync"
	"sync/atomic"
	"time"
)

// State is where a Breaker stands.
type State int32

// The states of a Breaker.
const (
	Closed   State = iota // requests are allowed
	Open                  // requests are refused until the open period ends
	HalfOpen              // the open period has ended: one probe is, or may be, in flight
)

// String returns "closed", "open" or "half-open", for metrics and the admin API.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

// Breaker is one endpoint's circuit breaker. It is safe for concurrent use.
// On a closed breaker Allow and Success take no lock, nor does Failure below
// the threshold, and Success writes shared memory only when it resets a count.
//
// Reports are not tied to the Allow that admitted them: Success and Failure
// say something about the endpoint, whoever made the call. While open, reports
// are ignored, because they come from requests admitted before it opened;
// while half-open, any report decides, the probe's or not. Callers should
// report as soon as the outcome is known (a stream at its response headers),
// because the probe is leased for one open period only.
type Breaker struct {
	threshold int64
	open      time.Duration
	epoch     time.Time    // until is measured from here, on the monotonic clock
	state     atomic.Int32 // a State; written under mu
	failures  atomic.Int64 // consecutive failures while closed
	until     atomic.Int64 // open: end of the open period; half-open: end of the probe's lease (ns since epoch)
	mu        sync.Mutex   // serialises state changes
}

// New returns a closed Breaker that opens after failures consecutive failures
// (at least 1) and stays open for open before admitting a probe. The probe is
// leased for open too: if it neither reports nor is cancelled by then, the
// next Allow admits another. open must be > 0 for the single-probe guarantee.
func New(failures int, open time.Duration) *Breaker {
	return &Breaker{threshold: max(int64(failures), 1), open: open, epoch: time.Now()}
}

// Allow reports whether a request may go to the endpoint. Closed: always.
// Open: no, until the open period has elapsed; then exactly one caller gets
// true and the breaker is half-open. Half-open: no, until the probe reports,
// is cancelled, or its lease of one open period runs out.
func (b *Breaker) Allow() bool {
	if State(b.state.Load()) == Closed {
		return true // short enough to inline: the hot path
	}
	return b.allowSlow()
}

// allowSlow is Allow on a breaker that was not closed: it may admit the probe.
func (b *Breaker) allowSlow() bool {
	now := b.now()
	if now < b.until.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch State(b.state.Load()) {
	case Closed:
		return true
	default: // Open or HalfOpen
		if now < b.until.Load() {
			return false // another caller took the probe first
		}
		b.until.Store(now + int64(b.open))
		b.state.Store(int32(HalfOpen))
		return true
	}
}

// Success reports that a request reached the endpoint and got an answer. It
// resets the count of consecutive failures and closes a half-open breaker. An
// open breaker ignores it.
func (b *Breaker) Success() {
	if State(b.state.Load()) == Closed {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		return
	}
	b.successSlow()
}

// successSlow is Success on a breaker that was not closed.
func (b *Breaker) successSlow() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if State(b.state.Load()) == HalfOpen {
		b.failures.Store(0)
		b.state.Store(int32(Closed))
	}
}

// Failure reports an endpoint failure. On a closed breaker it counts one more
// consecutive failure and opens the breaker at the threshold; on a half-open
// one it reopens for another open period. An open breaker ignores it.
func (b *Breaker) Failure() {
	st := State(b.state.Load())
	if st == Closed && b.failures.Add(1) < b.threshold {
		return
	}
	if st == Open {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch State(b.state.Load()) {
	case Closed:
		if b.failures.Load() < b.threshold {
			return // a Success came in between
		}
	case Open:
		return
	}
	b.until.Store(b.now() + int64(b.open)) // before state: a lock-free Allow that sees Open sees this too
	b.state.Store(int32(Open))
}

// Cancel reports that a request ended without telling anything about the
// endpoint, such as a caller that went away. On a half-open breaker it ends the
// probe's lease, so the next Allow admits a new probe; otherwise it does
// nothing. Because it can't tell the probe from other requests, a Cancel from a
// request admitted before the breaker opened may let a second probe in early.
func (b *Breaker) Cancel() {
	if State(b.state.Load()) != HalfOpen {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if State(b.state.Load()) == HalfOpen {
		b.until.Store(0)
	}
}

// State returns the breaker's state. An open breaker whose open period has
// elapsed is reported as HalfOpen: the next Allow admits a probe.
func (b *Breaker) State() State {
	st := State(b.state.Load())
	if st == Open && b.now() >= b.until.Load() {
		return HalfOpen
	}
	return st
}

// now returns the time since the breaker was made, in ns, on the monotonic clock.
func (b *Breaker) now() int64 {
	return int64(time.Since(b.epoch))
}
