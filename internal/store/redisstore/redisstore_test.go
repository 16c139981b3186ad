package redisstore

import (
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// newClient connects to the test server with the options New asks for.
func newClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt)
}

// testPrefix is unique per test and run, so tests share the server.
func testPrefix() string { return "sluicetest:" + rand.Text()[:12] + ":" }

// backend is one isolated store backend: every replica handle gets its own
// client (its own connections) and shares the prefix.
type backend struct {
	t      testing.TB
	url    string
	prefix string

	mu      sync.Mutex
	stores  []*Store
	clients []*redis.Client
}

func newTestBackend(t testing.TB) *backend {
	t.Helper()
	return newBackendAt(t, testenv.Redis(t))
}

// newPrivateBackend is newTestBackend on a redis-server of t's own, for
// tests that write more keys than a shared server should keep (a long run
// of random histories leaves millions, and every SCAN of the shared
// database then crawls): they go when the server does.
func newPrivateBackend(t testing.TB) *backend {
	t.Helper()
	return newBackendAt(t, testenv.StartRedis(t).URL())
}

func newBackendAt(t testing.TB, url string) *backend {
	t.Helper()
	b := &backend{t: t, url: url, prefix: testPrefix()}
	t.Cleanup(b.close)
	return b
}

// replica returns a new Store on a new client.
func (b *backend) replica() *Store {
	c := newClient(b.t, b.url)
	s := New(c, b.prefix)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stores = append(b.stores, s)
	b.clients = append(b.clients, c)
	return s
}

func (b *backend) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.stores {
		if err := s.Close(); err != nil {
			b.t.Errorf("close store: %v", err)
		}
	}
	testenv.DeleteRedisKeys(b.t, b.url, b.prefix)
	for _, c := range b.clients {
		c.Close()
	}
}

// cand is a candidate on unit u (cap n) and credential cred.
func cand(u string, n int, cred string) store.Candidate {
	return store.Candidate{Unit: store.Unit{ID: u, Cap: n, Base: 100 * time.Millisecond, Max: time.Second}, Credential: cred}
}

func req(ticket string, cs ...store.Candidate) store.Acquire {
	return store.Acquire{Domain: "dom", Ticket: ticket, Queue: "q", Candidates: cs, LeaseTTL: 5 * time.Second, Replica: "r"}
}

func acquire(t *testing.T, s *Store, a store.Acquire) store.Grant {
	t.Helper()
	g, err := s.Acquire(t.Context(), a)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", a.Ticket, err)
	}
	return g
}

func waitFor(t *testing.T, ch <-chan string, ticket string) {
	t.Helper()
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	for {
		select {
		case id := <-ch:
			if id == ticket {
				return
			}
		case <-timer.C:
			t.Fatalf("no wake-up for %s", ticket)
		}
	}
}

// TestContract runs the shared contract suite; every replica handle is a
// new client and Store on one fresh prefix.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() storetest.Stores {
		b := newTestBackend(t)
		return func() storetest.Stores { return b.replica() }
	})
}

// TestJobsContract runs the job bindings' contract suite the same way.
func TestJobsContract(t *testing.T) {
	storetest.RunJobs(t, func(t *testing.T) func() store.Jobs {
		b := newTestBackend(t)
		return func() store.Jobs { return b.replica() }
	})
}

func TestGrantQueueWake(t *testing.T) {
	s := newTestBackend(t).replica()
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	c := cand("u", 1, "c")
	if g := acquire(t, s, req("t1", c)); !g.Granted || g.Index != 0 || g.Lease != "t1" || g.Probe {
		t.Fatalf("t1 = %+v, want granted at index 0", g)
	}
	if g := acquire(t, s, req("t1", c)); !g.Granted {
		t.Fatalf("t1 again = %+v, want the same grant", g)
	}
	if g := acquire(t, s, req("t2", c)); g.Granted || g.Position != 0 {
		t.Fatalf("t2 = %+v, want queued at 0", g)
	}
	if g := acquire(t, s, req("t3", c)); g.Granted || g.Position != 1 {
		t.Fatalf("t3 = %+v, want queued at 1", g)
	}
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{Success: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, wake, "t2")
	if g := acquire(t, s, req("t3", c)); g.Granted || g.Position != 1 {
		t.Fatalf("t3 barging = %+v, want queued at 1", g)
	}
	if g := acquire(t, s, req("t2", c)); !g.Granted {
		t.Fatalf("t2 after wake = %+v, want granted", g)
	}
	if g := acquire(t, s, req("t3", c)); g.Granted || g.Position != 0 {
		t.Fatalf("t3 = %+v, want queued at 0", g)
	}
	st, err := s.Units(t.Context(), "dom", []string{"u"})
	if err != nil {
		t.Fatal(err)
	}
	want := store.UnitState{ID: "u", InFlight: 1, Cap: 1, Waiting: 1, WaitingByClass: [store.Classes]int{1, 0, 0},
		OldestByClass: [store.Classes]time.Time{st[0].OldestByClass[0]}, WaitingByTenant: map[string]int{"": 1}}
	if st[0].OldestByClass[0].IsZero() || !reflect.DeepEqual(st[0], want) {
		t.Errorf("Units = %+v, want %+v", st[0], want)
	}
}

func TestCooldownAndProbe(t *testing.T) {
	s := newTestBackend(t).replica()
	c := cand("u", 2, "c")
	acquire(t, s, req("t1", c))
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{RateLimited: true, RetryAfter: 150 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	g := acquire(t, s, req("t2", c))
	if g.Granted || g.RetryAt.IsZero() {
		t.Fatalf("t2 while cooling = %+v, want queued with RetryAt", g)
	}
	if d := time.Until(g.RetryAt); d < 50*time.Millisecond || d > 250*time.Millisecond {
		t.Errorf("RetryAt in %v, want about 150ms", d)
	}
	time.Sleep(time.Until(g.RetryAt) + 20*time.Millisecond)
	if g := acquire(t, s, req("t2", c)); !g.Granted || !g.Probe {
		t.Fatalf("t2 after cooldown = %+v, want the probe", g)
	}
	if g := acquire(t, s, req("t3", c)); g.Granted {
		t.Fatalf("t3 while the probe is out = %+v, want queued", g)
	}
	st, _ := s.Units(t.Context(), "dom", []string{"u"})
	if st[0].Probe != "in_flight" || st[0].Level != 1 {
		t.Errorf("Units while probing = %+v, want probe in_flight, level 1", st[0])
	}
	// A failed probe without retry-after cools for Base·2^level = 200ms.
	if err := s.Release(t.Context(), "dom", "t2", store.Outcome{RateLimited: true}); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Units(t.Context(), "dom", []string{"u"})
	if d := time.Until(st[0].CoolingUntil); st[0].Level != 2 || d < 120*time.Millisecond || d > 300*time.Millisecond {
		t.Errorf("after a failed probe: %+v (cooling for %v), want level 2 and about 200ms", st[0], d)
	}
	time.Sleep(time.Until(st[0].CoolingUntil) + 20*time.Millisecond)
	if st, _ = s.Units(t.Context(), "dom", []string{"u"}); st[0].Probe != "available" {
		t.Errorf("Probe after the cooldown = %q, want available", st[0].Probe)
	}
	if g := acquire(t, s, req("t3", c)); !g.Granted || !g.Probe {
		t.Fatalf("t3 = %+v, want the probe", g)
	}
	if err := s.Release(t.Context(), "dom", "t3", store.Outcome{Success: true}); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Units(t.Context(), "dom", []string{"u"})
	// Open again, with the two cooldowns (150ms and 200ms) counted.
	if want := (store.UnitState{ID: "u", Cap: 2, Cooled: 350 * time.Millisecond}); !reflect.DeepEqual(st[0], want) {
		t.Errorf("after a good probe: %+v, want %+v", st[0], want)
	}
}

func TestProbeLeaseExpiryFreesProbe(t *testing.T) {
	s := newTestBackend(t).replica()
	c := cand("u", 2, "c")
	acquire(t, s, req("t1", c))
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{RateLimited: true, RetryAfter: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	short := req("t2", c)
	short.LeaseTTL = 50 * time.Millisecond
	if g := acquire(t, s, short); !g.Probe {
		t.Fatalf("t2 = %+v, want the probe", g)
	}
	time.Sleep(80 * time.Millisecond)
	if g := acquire(t, s, req("t3", c)); !g.Probe {
		t.Fatalf("t3 after the probe expired = %+v, want a new probe", g)
	}
}

func TestCancel(t *testing.T) {
	s := newTestBackend(t).replica()
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	c := cand("u", 1, "c")
	acquire(t, s, req("t1", c))
	acquire(t, s, req("t2", c))
	acquire(t, s, req("t3", c))
	if err := s.Cancel(t.Context(), "dom", "q", "t2"); err != nil {
		t.Fatal(err)
	}
	if g := acquire(t, s, req("t3", c)); g.Position != 0 {
		t.Errorf("t3 after t2 left = %+v, want position 0", g)
	}
	// Cancelling a granted ticket releases its lease and wakes the next.
	if err := s.Cancel(t.Context(), "dom", "q", "t1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, wake, "t3")
	if g := acquire(t, s, req("t3", c)); !g.Granted {
		t.Fatalf("t3 = %+v, want granted", g)
	}
	// Cancelling twice, or an unknown ticket, is a no-op.
	for _, id := range []string{"t1", "nobody"} {
		if err := s.Cancel(t.Context(), "dom", "q", id); err != nil {
			t.Errorf("Cancel(%s): %v", id, err)
		}
	}
}

// A waiter woken for a free slot that cancels instead passes the wake-up on.
func TestCancelledHeadWakesNext(t *testing.T) {
	s := newTestBackend(t).replica()
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	c := cand("u", 1, "c")
	acquire(t, s, req("t1", c))
	acquire(t, s, req("t2", c))
	acquire(t, s, req("t3", c))
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, wake, "t2")
	if err := s.Cancel(t.Context(), "dom", "q", "t2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, wake, "t3")
}

// A release wakes the first waiter listing the unit in every queue.
func TestReleaseWakesEveryQueue(t *testing.T) {
	s := newTestBackend(t).replica()
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	u, v := cand("u", 1, "cu"), cand("v", 1, "cv")
	acquire(t, s, req("t1", u))
	acquire(t, s, req("t2", v))
	acquire(t, s, req("a1", v)) // queue q, lists v only: not woken by u
	b := req("b1", u)
	b.Queue = "other"
	acquire(t, s, b)
	acquire(t, s, req("a2", v, u)) // queue q, lists u
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{Success: true}); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	timer := time.NewTimer(300 * time.Millisecond)
	defer timer.Stop()
	for len(got) < 2 {
		select {
		case id := <-wake:
			got[id] = true
		case <-timer.C:
			t.Fatalf("woken %v, want a2 and b1", got)
		}
	}
	if !got["a2"] || !got["b1"] {
		t.Errorf("woken %v, want a2 and b1", got)
	}
}

// Reaping is bounded per call; counts converge over the next calls.
func TestReapIsBounded(t *testing.T) {
	s := newTestBackend(t).replica()
	const n = 150
	for i := range n {
		a := req(fmt.Sprint("t", i), cand("u", 0, "c"))
		a.LeaseTTL = 300 * time.Millisecond // longer than the loop takes
		acquire(t, s, a)
	}
	time.Sleep(350 * time.Millisecond)
	var got []int
	for range 3 {
		st, err := s.Units(t.Context(), "dom", []string{"u"})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, st[0].InFlight)
	}
	if want := []int{n - 64, n - 128, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("InFlight after successive reaps = %v, want %v", got, want)
	}
}

func TestRenew(t *testing.T) {
	s := newTestBackend(t).replica()
	a := req("t1", cand("u", 1, "c"))
	// Renewed every 100ms for 400ms, each renewal good for 400ms: the
	// lease outlives its first TTL with 300ms to spare for a busy machine.
	const ttl = 400 * time.Millisecond
	a.LeaseTTL = ttl
	acquire(t, s, a)
	for range 4 {
		time.Sleep(ttl / 4)
		if err := s.Renew(t.Context(), "dom", []string{"t1", "unknown"}, ttl); err != nil {
			t.Fatal(err)
		}
	}
	if g := acquire(t, s, req("t2", cand("u", 1, "c"))); g.Granted {
		t.Fatalf("t2 = %+v while t1 is renewed, want queued", g)
	}
	time.Sleep(ttl + ttl/2)
	if err := s.Renew(t.Context(), "dom", []string{"t1"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if g := acquire(t, s, req("t2", cand("u", 1, "c"))); !g.Granted {
		t.Fatalf("t2 = %+v after t1 expired, want granted (renewal must not revive it)", g)
	}
}

// Every key of a domain carries its hash tag, and a drained domain leaves
// only bounded per-unit facts behind (cap, arrival counter, state
// generation).
func TestKeysAreTaggedAndDrain(t *testing.T) {
	b := newTestBackend(t)
	s := b.replica()
	c := cand("u", 1, "c")
	acquire(t, s, req("t1", c))
	acquire(t, s, req("t2", c))
	if err := s.SetStatus(t.Context(), "credential", "c", store.Status{State: "disabled", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rdb := newClient(t, b.url)
	defer rdb.Close()
	keys, err := rdb.Keys(t.Context(), b.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, b.prefix+"{d:dom}:") && k != b.prefix+"status:credential" {
			t.Errorf("key %q is not tagged {d:dom}", k)
		}
	}
	if err := s.Cancel(t.Context(), "dom", "q", "t2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{Success: true}); err != nil {
		t.Fatal(err)
	}
	keys, _ = rdb.Keys(t.Context(), b.prefix+"{d:dom}:*").Result()
	slices.Sort(keys)
	want := []string{b.prefix + "{d:dom}:gen", b.prefix + "{d:dom}:seq", b.prefix + "{d:dom}:unit"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys after draining = %q, want %q", keys, want)
	}
	if f, _ := rdb.HKeys(t.Context(), b.prefix+"{d:dom}:unit").Result(); !slices.Equal(f, []string{"\x00reap", "u\x00cap"}) {
		t.Errorf("unit fields after draining = %q, want only the domain's reap time and the cap", f)
	}
}

func TestRejectsReservedBytes(t *testing.T) {
	s := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), "x:")
	_, err := s.Acquire(t.Context(), req("t\x1f", cand("u", 1, "c")))
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Acquire with a separator in the ticket: %v, want a plain error", err)
	}
}

func TestStatuses(t *testing.T) {
	b := newTestBackend(t)
	s1, s2 := b.replica(), b.replica()
	since := time.UnixMilli(time.Now().UnixMilli())
	want := store.Status{State: "disabled", Reason: "auth: 401", Since: since}
	if err := s1.SetStatus(t.Context(), "credential", "c1", want); err != nil {
		t.Fatal(err)
	}
	got, err := s2.Statuses(t.Context(), "credential")
	if err != nil || len(got) != 1 || !got["c1"].Since.Equal(since) || got["c1"].State != want.State || got["c1"].Reason != want.Reason {
		t.Fatalf("Statuses = %v, %v; want c1 %+v", got, err, want)
	}
	if err := s2.SetStatus(t.Context(), "credential", "c1", store.Status{State: "active"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s1.Statuses(t.Context(), "credential"); err != nil || len(got) != 0 {
		t.Errorf("Statuses after active = %v, %v; want empty", got, err)
	}
}

// A crashed holder's lease, once reaped by any later call in the domain,
// wakes the waiter it was blocking: no release will announce that slot.
func TestReapWakesWaiters(t *testing.T) {
	s := newTestBackend(t).replica()
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	c := cand("u", 1, "c")
	holder := req("dead", c)
	holder.LeaseTTL = 100 * time.Millisecond
	acquire(t, s, holder)
	acquire(t, s, req("t1", c))
	time.Sleep(150 * time.Millisecond)
	other := req("x", cand("v", 1, "cv")) // any call in the domain reaps
	other.Queue = "elsewhere"
	acquire(t, s, other)
	waitFor(t, wake, "t1")
}

// The largest candidate list Acquire accepts fits the script, new units
// with reserves included (the most unit fields it writes at once).
func TestMaxCandidates(t *testing.T) {
	s := newTestBackend(t).replica()
	cs := make([]store.Candidate, maxCandidates)
	for i := range cs {
		cs[i] = cand(fmt.Sprint("u", i), 3, fmt.Sprint("c", i))
		cs[i].Unit.Reserve = []int{1, 1}
	}
	a := req("t1", cs...)
	a.Class = 2
	if g := acquire(t, s, a); !g.Granted || g.Index != 0 {
		t.Fatalf("Acquire = %+v, want granted at 0", g)
	}
	a = req("t2", cs...)
	a.Class = 2
	if g := acquire(t, s, a); !g.Granted || g.Index != 1 {
		t.Fatalf("Acquire = %+v, want granted at 1 (u0's last slot is reserved)", g)
	}
}

// A ticket record written before arrival times were stored (no trailing
// field) still counts by tenant, and only has no arrival for OldestByClass;
// cancelling it still works.
func TestUnitsReadsOldTicketRecords(t *testing.T) {
	b := newTestBackend(t)
	s := b.replica()
	c := cand("u", 1, "c")
	acquire(t, s, req("t1", c))
	old := req("t2", c)
	old.Tenant = "x"
	if g := acquire(t, s, old); g.Granted {
		t.Fatalf("t2 = %+v, want queued", g)
	}
	rdb := newClient(t, b.url)
	defer rdb.Close()
	key := b.prefix + "{d:dom}:tix"
	rec, err := rdb.HGet(t.Context(), key, "t2").Result()
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(rec, '\x1f')
	if !strings.HasSuffix(rec[:i], "\x1fx") {
		t.Fatalf("ticket record %q: want tenant x, then the arrival", rec)
	}
	if err := rdb.HSet(t.Context(), key, "t2", rec[:i]).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := s.Units(t.Context(), "dom", []string{"u"})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].OldestByClass != [store.Classes]time.Time{} || !reflect.DeepEqual(st[0].WaitingByTenant, map[string]int{"x": 1}) {
		t.Errorf("old record: OldestByClass %v, WaitingByTenant %v; want zero, map[x:1]", st[0].OldestByClass, st[0].WaitingByTenant)
	}
	if err := s.Cancel(t.Context(), "dom", "q", "t2"); err != nil {
		t.Fatal(err)
	}
	if st, err = s.Units(t.Context(), "dom", []string{"u"}); err != nil || st[0].Waiting != 0 || st[0].WaitingByTenant != nil {
		t.Errorf("after cancel: %+v, %v; want nothing waiting", st, err)
	}
}
