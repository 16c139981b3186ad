package memstore

import (
	"context"
	"sync"
)

// wakeBuffer is the capacity of a wake channel. One release sends at most
// one hint per queue, but a burst of releases can outpace the replica's
// reader; the buffer absorbs that, and past it hints are dropped, which the
// waiters' retries at Grant.RetryAt and on their safety tick make up for.
const wakeBuffer = 64

// hub routes wake-ups to the channels subscribed for each replica.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan string]struct{} // by replica
}

// wake is a hint for one ticket of one replica.
type wake struct{ replica, ticket string }

// subscribe returns a new channel for the hints of replica, closed when ctx
// ends.
func (h *hub) subscribe(ctx context.Context, replica string) <-chan string {
	ch := make(chan string, wakeBuffer)
	h.mu.Lock()
	subs := h.subs[replica]
	if subs == nil {
		subs = make(map[chan string]struct{})
		h.subs[replica] = subs
	}
	subs[ch] = struct{}{}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[replica], ch)
		if len(h.subs[replica]) == 0 {
			delete(h.subs, replica)
		}
		close(ch)
	})
	return ch
}

// publish sends each hint to every channel of its replica, dropping it for
// a channel that is full. It never blocks.
func (h *hub) publish(wakes []wake) {
	if len(wakes) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range wakes {
		for ch := range h.subs[w.replica] {
			select {
			case ch <- w.ticket:
			default:
			}
		}
	}
}
