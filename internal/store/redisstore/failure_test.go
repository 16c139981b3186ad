package redisstore

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/testenv"
)

// roundTrips counts what the client sends: one per command, one per
// pipeline. It skips the set-up of new connections (HELLO, CLIENT SETINFO,
// AUTH, SELECT), which is not part of a call's cost.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) count(name string) {
	switch name {
	case "hello", "client", "auth", "select":
	default:
		h.n.Add(1)
	}
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		h.count(c.Name())
		return next(ctx, c)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error {
		h.count(cs[0].Name())
		return next(ctx, cs)
	}
}

func TestRoundTrips(t *testing.T) {
	b := newTestBackend(t)
	s := b.replica()
	h := &roundTrips{}
	s.rdb.AddHook(h)
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	c := cand("u", 1, "c")
	acquire(t, s, req("warm", c)) // warms the pool
	if err := s.Release(t.Context(), "dom", "warm", store.Outcome{}); err != nil {
		t.Fatal(err)
	}

	trips := func(what string, want int64, call func()) {
		t.Helper()
		h.n.Store(0)
		call()
		if got := h.n.Load(); got != want {
			t.Errorf("%s took %d round trips, want %d", what, got, want)
		}
	}
	trips("Acquire (granted)", 1, func() { acquire(t, s, req("t1", c)) })
	trips("Acquire (queued)", 1, func() { acquire(t, s, req("t2", c)) })
	trips("waiting 300ms", 0, func() {
		select {
		case id := <-wake:
			t.Errorf("woken %s with no release", id)
		case <-time.After(300 * time.Millisecond):
		}
	})
	trips("Renew (2 leases)", 1, func() {
		if err := s.Renew(t.Context(), "dom", []string{"t1", "t2"}, time.Minute); err != nil {
			t.Fatal(err)
		}
	})
	trips("Release", 1, func() {
		if err := s.Release(t.Context(), "dom", "t1", store.Outcome{Success: true}); err != nil {
			t.Fatal(err)
		}
	})
	waitFor(t, wake, "t2")
	trips("Cancel", 1, func() {
		if err := s.Cancel(t.Context(), "dom", "q", "t2"); err != nil {
			t.Fatal(err)
		}
	})

	// A Redis that lost the capacity functions (restarted without
	// persistence) costs two extra trips, once: the library is loaded again.
	if err := s.rdb.FunctionDelete(t.Context(), capacityLib.name).Err(); err != nil {
		t.Fatal(err)
	}
	trips("Acquire after FUNCTION DELETE", 3, func() { acquire(t, s, req("t3", c)) })
	trips("Acquire after that", 1, func() { acquire(t, s, req("t3", c)) })
}

// unavailableWithin checks that every call fails with store.ErrUnavailable
// before the deadline has long passed.
func unavailableWithin(t *testing.T, s *Store, deadline time.Duration) {
	t.Helper()
	calls := map[string]func(ctx context.Context) error{
		"Acquire": func(ctx context.Context) error {
			_, err := s.Acquire(ctx, req("t1", cand("u", 1, "c")))
			return err
		},
		"Release": func(ctx context.Context) error { return s.Release(ctx, "dom", "t1", store.Outcome{}) },
		"Renew":   func(ctx context.Context) error { return s.Renew(ctx, "dom", []string{"t1"}, time.Second) },
		"Cancel":  func(ctx context.Context) error { return s.Cancel(ctx, "dom", "q", "t1") },
		"Units": func(ctx context.Context) error {
			_, err := s.Units(ctx, "dom", []string{"u"})
			return err
		},
		"SetStatus": func(ctx context.Context) error {
			return s.SetStatus(ctx, "credential", "c", store.Status{State: "disabled"})
		},
		"Wake": func(ctx context.Context) error {
			_, err := s.Wake(ctx, "r")
			return err
		},
		"CreateJob": func(ctx context.Context) error { return s.CreateJob(ctx, store.Job{ID: "j"}) },
		"Job": func(ctx context.Context) error {
			_, err := s.Job(ctx, "j")
			return err
		},
		"UpdateJob": func(ctx context.Context) error {
			_, err := s.UpdateJob(ctx, store.Job{ID: "j"})
			return err
		},
		"DueJobs": func(ctx context.Context) error {
			_, err := s.DueJobs(ctx, time.Now(), time.Minute, 10)
			return err
		},
	}
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Go(func() { // concurrently: each may take the whole deadline
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			took := time.Since(start)
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s error = %v, want store.ErrUnavailable", name, err)
			}
			if took > deadline+100*time.Millisecond {
				t.Errorf("%s took %v, want at most the %v deadline", name, took, deadline)
			}
		})
	}
	wg.Wait()
}

func TestRedisGoneAway(t *testing.T) {
	t.Run("ConnectionRefused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer c.Close()
		unavailableWithin(t, New(c, "x:"), time.Second)
	})
	t.Run("Stalled", func(t *testing.T) {
		// A server that accepts and never answers: only the deadline ends a call.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c)
			}
		}()
		c := redis.NewClient(&redis.Options{Addr: l.Addr().String(), ContextTimeoutEnabled: true})
		defer c.Close()
		unavailableWithin(t, New(c, "x:"), 200*time.Millisecond)
	})
}

// clientIDs lists the IDs of the server's connections named name that
// hold a subscription.
func clientIDs(t *testing.T, rdb *redis.Client, name string) []string {
	t.Helper()
	list, err := rdb.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for line := range strings.Lines(list) {
		f := strings.Fields(line)
		if slices.Contains(f, "name="+name) && !slices.Contains(f, "sub=0") {
			ids = append(ids, strings.TrimPrefix(f[0], "id="))
		}
	}
	return ids
}

// The subscription survives its connection being killed: go-redis
// re-subscribes, and wake-ups flow again.
func TestWakeSurvivesReconnect(t *testing.T) {
	b := newTestBackend(t)
	opt, err := redis.ParseURL(b.url)
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	opt.ClientName = "sluicetest-" + strings.TrimSuffix(strings.TrimPrefix(b.prefix, "sluicetest:"), ":")
	c := redis.NewClient(opt)
	defer c.Close()
	s := New(c, b.prefix)
	defer s.Close()
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, b.url)
	defer admin.Close()
	ids := clientIDs(t, admin, opt.ClientName)
	if len(ids) != 1 {
		t.Fatalf("subscribed connections named %s: %v, want one", opt.ClientName, ids)
	}
	if err := admin.Do(t.Context(), "CLIENT", "KILL", "ID", ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	// Lost while disconnected: the gap's wake-ups are what RetryAt and the
	// safety tick cover. Wait for the re-subscription.
	channel := b.prefix + "wake:r"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := admin.PubSubNumSub(t.Context(), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[channel] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not re-subscribed within 5s")
		}
	}
	cd := cand("u", 1, "c")
	acquire(t, s, req("t1", cd))
	acquire(t, s, req("t2", cd))
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, wake, "t2")
}

// Wake hands every caller for one replica its own channel over one
// subscription, and closes each when its context ends.
func TestWakeSharesOneSubscription(t *testing.T) {
	b := newTestBackend(t)
	s := b.replica()
	ctx1, cancel1 := context.WithCancel(t.Context())
	ch1, err := s.Wake(ctx1, "r")
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, b.url)
	defer admin.Close()
	n, err := admin.Publish(t.Context(), b.prefix+"wake:r", "x").Result()
	if err != nil || n != 1 {
		t.Fatalf("PUBLISH reached %d subscribers (%v), want 1", n, err)
	}
	waitFor(t, ch1, "x")
	waitFor(t, ch2, "x")
	cancel1()
	for range ch1 { // closed once ctx1 ends
	}
	admin.Publish(t.Context(), b.prefix+"wake:r", "y")
	waitFor(t, ch2, "y")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range ch2 { // closed by Close
	}
}

// loseState deletes every key of the backend, as a Redis restarted empty
// (or flushed) would, without touching other tests' keys.
func (b *backend) loseState(t *testing.T) {
	t.Helper()
	testenv.DeleteRedisKeys(t, b.url, b.prefix)
}

// TestReassertAfterStateLost: a replica whose leases the store lost is
// refused every decision (store.ErrStateLost) until it reasserts them;
// then they count against the cap again, with their limits and token
// reservations, and release as before. A replica that never decided
// anything is not held up, and a retried Reassert changes nothing.
func TestReassertAfterStateLost(t *testing.T) {
	b := newTestBackend(t)
	s := b.replica()
	user := store.Unit{ID: "user:a", Cap: 2, TPM: 1000}
	c := cand("u", 2, "c")
	c.Limits = []store.Unit{user}
	held := make([]store.Held, 2)
	for i, id := range []string{"t1", "t2"} {
		a := req(id, c)
		a.Tokens = 400
		if g := acquire(t, s, a); !g.Granted {
			t.Fatalf("%s = %+v, want granted", id, g)
		}
		held[i] = store.Held{Lease: id, Candidate: c, Tokens: 400, TTL: time.Minute}
	}

	b.loseState(t)
	if _, err := s.Acquire(t.Context(), req("t3", c)); !errors.Is(err, store.ErrStateLost) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Acquire after the loss: %v, want ErrStateLost (an ErrUnavailable)", err)
	}
	if err := s.Renew(t.Context(), "dom", []string{"t1"}, time.Minute); !errors.Is(err, store.ErrStateLost) {
		t.Fatalf("Renew after the loss: %v, want ErrStateLost", err)
	}
	fresh := b.replica()
	if g := acquire(t, fresh, req("f1", cand("other", 1, "c2"))); !g.Granted {
		t.Fatalf("a fresh replica's Acquire = %+v, want granted", g)
	}

	for range 2 {
		if err := s.Reassert(t.Context(), "dom", held); err != nil {
			t.Fatal(err)
		}
	}
	us, err := s.Units(t.Context(), "dom", []string{"u", "user:a"})
	if err != nil {
		t.Fatal(err)
	}
	if us[0].InFlight != 2 || us[1].InFlight != 2 {
		t.Errorf("after Reassert: u %d, user:a %d in flight, want 2 and 2", us[0].InFlight, us[1].InFlight)
	}
	// The user's TPM window holds the two reservations again: 800 of 1000.
	other := cand("v", 4, "c3")
	other.Limits = []store.Unit{{ID: "user:a", Cap: 4, TPM: 1000}}
	big := req("t4", other)
	big.Tokens = 300
	if g := acquire(t, s, big); g.Granted {
		t.Errorf("a request over the user's TPM after Reassert was granted")
	}
	if err := s.Cancel(t.Context(), "dom", "q", "t4"); err != nil {
		t.Fatal(err)
	}
	if g := acquire(t, s, req("t3", c)); g.Granted {
		t.Errorf("t3 granted over the cap of 2 after Reassert")
	}
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{Success: true}); err != nil {
		t.Fatal(err)
	}
	if g := acquire(t, s, req("t3", c)); !g.Granted {
		t.Errorf("t3 after a release = %+v, want granted", g)
	}
	if err := s.Renew(t.Context(), "dom", []string{"t2", "t3"}, time.Minute); err != nil {
		t.Errorf("Renew after Reassert: %v", err)
	}
}
