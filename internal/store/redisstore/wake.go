package redisstore

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// wakeBuffer is the size of each channel Wake returns. One release can wake
// several tickets of a replica at once (up to four per queue), and a burst
// of releases more; the buffer absorbs a burst while the receiver hands
// tickets to their waiters. Past it, wake-ups are dropped, never blocking
// the fan-out: a waiter that misses one retries at RetryAt or on its tick.
const wakeBuffer = 64

// hub is the one subscription of a replica, fanned out to every channel
// Wake returned for it.
type hub struct {
	ps   *redis.PubSub
	mu   sync.Mutex
	subs map[chan string]struct{}
}

// errClosed is returned by Wake after Close.
var errClosed = errors.New("redisstore: store closed")

// Wake returns a channel of the ticket IDs woken for replica, closed when
// ctx ends or the Store closes. All calls for one replica share ONE Redis
// subscription (on <prefix>wake:<replica>), held while any channel is open.
//
// Wake-ups are hints, delivered at most once. go-redis re-subscribes by
// itself after a lost connection, but what was published during the gap is
// lost, and a full channel drops; waiters cover both by retrying at
// Grant.RetryAt and on a safety tick. The subscription uses plain PUBLISH
// and SUBSCRIBE, which a Redis Cluster broadcasts to every node; sharded
// pub/sub (SPUBLISH on a {d:<domain>} channel) would keep wake-ups on the
// domain's shard, at the price of one subscription per domain and replica.
func (s *Store) Wake(ctx context.Context, replica string) (<-chan string, error) {
	if err := checkID("replica", replica); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	h := s.hubs[replica]
	if h == nil {
		var err error
		if h, err = s.subscribe(ctx, replica); err != nil {
			return nil, err
		}
		s.hubs[replica] = h
	}
	ch := make(chan string, wakeBuffer)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() { s.unsubscribe(replica, h, ch) })
	return ch, nil
}

// subscribe opens the replica's subscription and waits for Redis to confirm
// it, so nothing published after Wake returns is missed. Called with s.mu
// held: a replica subscribes once, at startup.
func (s *Store) subscribe(ctx context.Context, replica string) (*hub, error) {
	ps := s.rdb.Subscribe(ctx, s.wakePrefix()+replica)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, unavailable("subscribe "+replica, err)
	}
	h := &hub{ps: ps, subs: make(map[chan string]struct{})}
	msgs := ps.Channel(redis.WithChannelSize(wakeBuffer))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		h.run(msgs)
	}()
	return h, nil
}

// run fans messages out until the subscription closes, then closes every
// channel still open.
func (h *hub) run(msgs <-chan *redis.Message) {
	for m := range msgs {
		h.mu.Lock()
		for ch := range h.subs {
			select {
			case ch <- m.Payload:
			default: // full: drop the hint rather than stall every waiter
			}
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

// unsubscribe closes ch once its ctx ends, and the subscription with the
// last channel of the replica.
func (s *Store) unsubscribe(replica string, h *hub, ch chan string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.mu.Lock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
	last := len(h.subs) == 0
	h.mu.Unlock()
	if last && s.hubs[replica] == h {
		delete(s.hubs, replica)
		h.ps.Close() // run sees the channel close and returns
	}
}
