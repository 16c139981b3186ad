package authn

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Throttle bounds failed authentications per source (a client IP). Each
// source may fail Burst times at once, and one time more per Refill after
// that; a source over its budget is refused until one failure's worth has
// refilled, and its refusals are counted for the next failure's log line,
// so a guessing loop costs neither a line per guess nor unbounded memory.
// Safe for concurrent use.
type Throttle struct {
	burst  float64
	refill time.Duration
	now    func() time.Time

	mu      sync.Mutex
	sources map[string]*budget
}

// budget is one source's failures left, as of at, and the refusals since
// it ran out.
type budget struct {
	left    float64
	at      time.Time
	refused int
}

// maxSources bounds the sources a Throttle remembers; past it, those whose
// budget is whole again are forgotten.
const maxSources = 10_000

// NewThrottle returns a Throttle allowing burst failures at once, and one
// more each refill. now is the clock; nil means time.Now.
func NewThrottle(burst int, refill time.Duration, now func() time.Time) *Throttle {
	if now == nil {
		now = time.Now
	}
	return &Throttle{burst: float64(burst), refill: refill, now: now, sources: map[string]*budget{}}
}

// Refused reports whether source is over its budget and, if so, how long
// until it may try again. A refusal is counted for the next Failed report.
func (t *Throttle) Refused(source string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.sources[source]
	if b == nil {
		return 0, false
	}
	t.fill(b)
	if b.left >= 1 {
		return 0, false
	}
	b.refused++
	return time.Duration((1 - b.left) * float64(t.refill)), true
}

// Failed records a failed authentication of source and returns the
// refusals since its last failure: a caller logs each failure with that
// count, which makes a guessing loop about one line per refill.
func (t *Throttle) Failed(source string) (refused int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.sources[source]
	if b == nil {
		if len(t.sources) >= maxSources {
			t.forget()
		}
		b = &budget{left: t.burst, at: t.now()}
		t.sources[source] = b
	}
	t.fill(b)
	b.left = max(b.left-1, 0)
	refused, b.refused = b.refused, 0
	return refused
}

// fill adds what refilled since b was last seen.
func (t *Throttle) fill(b *budget) {
	now := t.now()
	b.left = min(t.burst, b.left+float64(now.Sub(b.at))/float64(t.refill))
	b.at = now
}

// forget drops the sources whose budget is whole again.
func (t *Throttle) forget() {
	for s, b := range t.sources {
		if t.fill(b); b.left >= t.burst {
			delete(t.sources, s)
		}
	}
}

// Source is the address r came from, without its port: what a Throttle
// counts by. Forwarding headers are not trusted, as any caller can send
// them.
func Source(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
