package app_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// These tests prove the account acceptance with two real `sluice serve`
// processes sharing one Redis (see cluster_helpers_test.go): caps, queues,
// statuses, leases and cooldowns hold across replicas, not just within one.

func TestClusterTwoReplicasShareAccountCaps(t *testing.T) {
	testReplicasShareAccountCaps(t, newCluster(t, 150*time.Millisecond))
}

// TestClusterOnRedisCluster runs two of the tests above with the replicas
// on a three-primary Redis Cluster: claims, queues and wake-ups work
// across its nodes.
func TestClusterOnRedisCluster(t *testing.T) {
	t.Run("ShareAccountCaps", func(t *testing.T) {
		testReplicasShareAccountCaps(t, newClusterOnRedisCluster(t, 150*time.Millisecond))
	})
	t.Run("WaiterServedWhenTheOtherReleases", func(t *testing.T) {
		testWaiterServedWhenTheOtherReleases(t, newClusterOnRedisCluster(t, waiterLatency))
	})
}

func testReplicasShareAccountCaps(t *testing.T, c *cluster) {
	type result struct {
		code int
		body string
		err  error
	}
	results := make([]result, 20)
	var wg sync.WaitGroup
	for i := range results {
		r := c.A
		if i%2 == 1 {
			r = c.B
		}
		wg.Go(func() {
			code, body, err := c.chat(t.Context(), r)
			results[i] = result{code, body, err}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != http.StatusOK || r.err != nil {
			t.Errorf("request %d = %d %s (%v), want 200", i, r.code, r.body, r.err)
		}
	}
	if peak := c.sim.MaxInFlight("org-1"); peak != 2 {
		t.Errorf("org-1 peak in flight at the provider = %d, want exactly its cap 2 across both replicas", peak)
	}
	if n := c.upstream429s(); n != 0 {
		t.Errorf("upstream 429s = %d, want 0: the replicas together stayed under the hidden cap", n)
	}
	for _, r := range []*replica{c.A, c.B} {
		eventually(t, 3*time.Second, "no claims left seen by "+r.name, func() bool {
			a := c.account(r)
			return a.InFlight == 0 && a.Waiting == 0
		})
	}
}

func TestClusterWaiterOnOneReplicaIsServedWhenTheOtherReleases(t *testing.T) {
	testWaiterServedWhenTheOtherReleases(t, newCluster(t, waiterLatency))
}

// waiterLatency is the upstream latency of testWaiterServedWhenTheOtherReleases.
const waiterLatency = 600 * time.Millisecond

func testWaiterServedWhenTheOtherReleases(t *testing.T, c *cluster) {
	const latency = waiterLatency
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			var body string
			var err error
			if codes[i], body, err = c.chat(t.Context(), c.A); codes[i] != http.StatusOK {
				t.Errorf("request %d through A = %d %s (%v), want 200", i, codes[i], body, err)
			}
		})
	}
	eventually(t, 5*time.Second, "A holds both of org-1's slots", func() bool { return c.sim.InFlight() == 2 })
	// B's waiter queues well before A's calls end, and its 1s safety tick
	// would fire well after: only a wake-up from A's release serves it soon.
	time.Sleep(200 * time.Millisecond)
	if a := c.account(c.B); a.InFlight != 2 {
		t.Errorf("B sees org-1 in flight %d, want A's 2", a.InFlight)
	}
	code, body, err := c.chat(t.Context(), c.B)
	wg.Wait()
	if code != http.StatusOK {
		t.Fatalf("request through B = %d %s (%v), want 200 after waiting (never a 429)", code, body, err)
	}
	recs := c.sim.Requests()
	if len(recs) != 3 {
		t.Fatalf("upstream calls = %d, want 3 (two through A, then B's)", len(recs))
	}
	firstEnd := earliest(recs[0].At, recs[1].At).Add(latency)
	gap := recs[2].At.Sub(firstEnd)
	t.Logf("B's upstream call started %v after A's first call ended", gap)
	switch {
	case gap < 0:
		t.Errorf("B's upstream call started %v before A's first call ended: the account's cap was exceeded", -gap)
	case gap > 400*time.Millisecond:
		t.Errorf("B's upstream call started %v after A's first call ended, want soon (woken by A's release, not by its 1s tick)", gap)
	}
	if peak, n := c.sim.MaxInFlight("org-1"), c.upstream429s(); peak != 2 || n != 0 {
		t.Errorf("org-1 peak %d, upstream 429s %d; want 2 and 0", peak, n)
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func TestClusterStatusSeenByTheOtherReplicaWithinASecond(t *testing.T) {
	c := newCluster(t, 20*time.Millisecond)
	k1 := upstreamKey("k1")
	// Round-robin reaches k1 through B while it is active, so "never again"
	// below means something.
	for range 6 {
		c.mustChat(c.B)
	}
	if c.sim.Count(k1) == 0 {
		t.Fatal("six requests through B never used k1 while active; the check below would prove nothing")
	}
	c.adminPost(c.A, "/admin/credentials/k1/disable")
	time.Sleep(time.Second)
	before := c.sim.Count(k1)
	for range 10 {
		c.mustChat(c.B)
	}
	if n := c.sim.Count(k1) - before; n != 0 {
		t.Errorf("B sent %d of 10 requests to k1 a second after A disabled it, want none", n)
	}
	if cr := c.credential(c.B, "k1"); cr.Status != "disabled" {
		t.Errorf("k1 as B shows it = %+v, want disabled", cr)
	}
}

func TestClusterKilledReplicaReleasesItsSlotsWithinTheLeaseTTL(t *testing.T) {
	const leaseTTL = 2 * time.Second
	c := newCluster(t, 30*time.Second)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.chat(t.Context(), c.A) }) // fails when A dies: expected
	}
	eventually(t, 5*time.Second, "A holds both of org-1's slots", func() bool { return c.sim.InFlight() == 2 })
	if a := c.account(c.B); a.InFlight != 2 {
		t.Errorf("B sees org-1 in flight %d, want A's 2", a.InFlight)
	}
	killed := time.Now()
	c.A.kill()
	wg.Wait()
	c.setKeys(simulator.Behavior{Latency: 100 * time.Millisecond})

	code, body, err := c.chat(t.Context(), c.B)
	served := time.Since(killed)
	t.Logf("B served %v after A was killed", served)
	if code != http.StatusOK {
		t.Fatalf("request through B after A died = %d %s (%v), want 200", code, body, err)
	}
	if limit := leaseTTL + 1500*time.Millisecond; served > limit {
		t.Errorf("B served %v after A was killed, want within the lease TTL %v + slack (%v)", served, leaseTTL, limit)
	}
	// A renews its leases every TTL/3: they outlive it by at least 2/3 of
	// the TTL, and B must not have had a slot before that.
	recs := c.sim.Requests()
	last := recs[len(recs)-1]
	if len(recs) != 3 || last.Status != http.StatusOK {
		t.Fatalf("upstream calls %d (last status %d), want A's two then B's one, answered", len(recs), last.Status)
	}
	if held := last.At.Sub(killed); held < leaseTTL/2 {
		t.Errorf("B's upstream call started %v after A was killed, want the dead replica's leases to hold org-1 for most of the TTL %v", held, leaseTTL)
	}
	if n := c.upstream429s(); n != 0 {
		t.Errorf("upstream 429s = %d, want 0", n)
	}
	eventually(t, 2*time.Second, "org-1 free again as B sees it", func() bool {
		a := c.account(c.B)
		return a.InFlight == 0 && a.Waiting == 0
	})
}

func TestClusterRateLimitCoolsTheAccountOnEveryReplica(t *testing.T) {
	const (
		latency    = 200 * time.Millisecond
		retryAfter = 800 * time.Millisecond
	)
	c := newCluster(t, latency)
	c.setKeys(simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: retryAfter})
	codes := make([]int, 4)
	var wg sync.WaitGroup
	send := func(i int, r *replica) {
		wg.Go(func() {
			var body string
			var err error
			if codes[i], body, err = c.chat(t.Context(), r); codes[i] != http.StatusOK {
				t.Errorf("request %d through %s = %d %s (%v), want 200", i, r.name, codes[i], body, err)
			}
		})
	}
	send(0, c.A)
	eventually(t, 5*time.Second, "the first 429", func() bool { return c.upstream429s() == 1 })
	c.setKeys(simulator.Behavior{Latency: latency})
	// A records the cooldown a moment after the provider answered; B must
	// see it in the shared state before its callers arrive.
	eventually(t, 2*time.Second, "org-1 cooling as B sees it", func() bool { return !c.account(c.B).CoolingUntil.IsZero() })
	for i := 1; i < len(codes); i++ {
		send(i, c.B)
	}
	wg.Wait()

	recs := c.sim.Requests()
	if len(recs) != 5 {
		t.Fatalf("upstream calls = %d, want 5 (one 429, then A's request and B's three answered)", len(recs))
	}
	limited, probe, next := recs[0], recs[1], recs[2]
	t.Logf("calls after the 429 at %v, %v, %v, %v", probe.At.Sub(limited.At), next.At.Sub(limited.At), recs[3].At.Sub(limited.At), recs[4].At.Sub(limited.At))
	if limited.Status != http.StatusTooManyRequests {
		t.Fatalf("first upstream call answered %d, want the 429", limited.Status)
	}
	if gap := probe.At.Sub(limited.At); gap < 700*time.Millisecond {
		t.Errorf("org-1 was called %v after the 429, want no call during its %v cooldown on either replica", gap, retryAfter)
	}
	if gap := next.At.Sub(probe.At); gap < latency {
		t.Errorf("second call %v after the first one past the cooldown, want it alone for its %v (the single probe)", gap, latency)
	} else if gap > latency+700*time.Millisecond {
		t.Errorf("second call %v after the probe, want the others soon after the probe's answer (%v)", gap, latency)
	}
	if peak, n := c.sim.MaxInFlight("org-1"), c.upstream429s(); peak > 2 || n != 1 {
		t.Errorf("org-1 peak %d, upstream 429s %d; want ≤ 2 and only the one injected", peak, n)
	}
}

// When an account reopens after its probe, both of its slots serve the
// waiters at once, whichever replica they wait on: a waiter woken for a
// free slot must not leave it idle because another woken waiter queued
// ahead of it had not claimed yet.
func TestClusterReopenedAccountUsesItsWholeCap(t *testing.T) {
	const (
		// Long enough that a wake-up crossing replicas through Redis on a
		// busy machine (tens of ms) stays well inside the latency of
		// difference between serving two at a time and one at a time.
		latency = 400 * time.Millisecond
		waiters = 6
	)
	c := newCluster(t, latency)
	c.setKeys(simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: 500 * time.Millisecond})
	var wg sync.WaitGroup
	send := func(r *replica) {
		wg.Go(func() {
			if code, body, err := c.chat(t.Context(), r); code != http.StatusOK {
				t.Errorf("request through %s = %d %s (%v), want 200", r.name, code, body, err)
			}
		})
	}
	send(c.A)
	eventually(t, 5*time.Second, "the first 429", func() bool { return c.upstream429s() == 1 })
	c.setKeys(simulator.Behavior{Latency: latency})
	eventually(t, 2*time.Second, "org-1 cooling as B sees it", func() bool { return !c.account(c.B).CoolingUntil.IsZero() })
	for i := range waiters - 1 {
		send([]*replica{c.A, c.B}[i%2])
	}
	wg.Wait()
	recs := c.sim.Requests()
	if len(recs) != waiters+1 {
		t.Fatalf("upstream calls = %d, want %d (one 429, then every waiter answered)", len(recs), waiters+1)
	}
	probe, last := recs[1], recs[len(recs)-1]
	var starts []time.Duration
	for _, r := range recs[1:] {
		starts = append(starts, r.At.Sub(probe.At).Round(time.Millisecond))
	}
	t.Logf("calls after the probe started at %v", starts)
	// Probe alone, then the other five two at a time: the last starts about
	// 3 latencies after the probe; one at a time it would start after 5.
	if got, limit := last.At.Sub(probe.At), 4*latency; got > limit {
		t.Errorf("last waiter's call started %v after the probe, want ≤ %v: org-1 served its backlog below its cap of 2 (calls at %v)", got, limit, starts)
	}
}
