package capacity

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// serviceRates are this replica's measure of how fast each wait queue is
// served: an EWMA of the interval between two grants in the queue, sampled
// only while a waiter of this replica stood in the queue throughout the
// interval, so that idle time never counts as service time. A replica sees
// only its own grants: with replicas sharing a queue (Redis) each measures
// its own share, and a deferred caller is told a longer wait than the
// cluster's (the queue position it is estimated from is shared). A queue
// is a model alias, so the map is bounded by the catalog.
type serviceRates struct {
	mu     sync.Mutex
	queues map[queueKey]*serviceRate
}

type queueKey struct{ domain, queue string }

type serviceRate struct {
	last     time.Time     // this replica's latest grant in the queue
	interval time.Duration // EWMA of the sampled intervals; 0 = no sample yet
}

// rateWeight is the weight of a new interval in the EWMA: about the last
// ten grants count, so a change of load shows within a second at the
// rates where waiting happens.
const rateWeight = 0.1

// granted records a grant in queue at now to a ticket that queued at
// queued (zero for one granted at its first try, which proves nothing of
// the service rate: there was room).
func (r *serviceRates) granted(domain, queue string, queued, now time.Time) {
	k := queueKey{domain, queue}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.queues[k]
	if s == nil {
		if r.queues == nil {
			r.queues = map[queueKey]*serviceRate{}
		}
		s = &serviceRate{}
		r.queues[k] = s
	}
	if !queued.IsZero() && !s.last.IsZero() && queued.Before(s.last) {
		x := now.Sub(s.last)
		if s.interval == 0 {
			s.interval = x
		} else {
			s.interval += time.Duration(rateWeight * float64(x-s.interval))
		}
	}
	s.last = now
}

// interval is the queue's recent interval between grants; 0 when unknown.
func (r *serviceRates) interval(domain, queue string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.queues[queueKey{domain, queue}]; s != nil {
		return s.interval
	}
	return 0
}

// unknownWait is the wait a refused request is told when nothing better is
// known: no grant in its queue was measured yet, nor is a cooldown or a
// window to pass.
const unknownWait = time.Second

// estimate is how long the ticket of a, whose last try got g, would still
// wait for a grant: until a cooldown or a window it waits for passes
// (g.RetryAt), then one grant interval for each ticket ahead of it
// (g.Position, shared by every replica) and one for itself. Never below a
// millisecond, so it is always sent.
func (e *Engine) estimate(a store.Acquire, g store.Grant) time.Duration {
	now := time.Now()
	var wait time.Duration
	if g.RetryAt.After(now) {
		wait = g.RetryAt.Sub(now)
	}
	iv := e.rates.interval(a.Domain, a.Queue)
	if iv == 0 && wait == 0 {
		return unknownWait
	}
	return max(wait+time.Duration(g.Position+1)*iv, time.Millisecond)
}
