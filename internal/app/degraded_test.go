package app_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestRedisKilledAndRestartedMidLoad runs two replicas on a private Redis
// under steady load through both, kills Redis, and starts it again
// (empty), in each state.degraded mode. fail_closed answers 503
// state_unavailable meanwhile; local keeps serving on each replica's share
// of org-1's cap (2 ÷ 2 replicas). While Redis is down the provider never
// sees more than the cap in flight (once the calls admitted before the
// kill have ended: see package degraded), nor across the recovery (a
// replica back on Redis holds new claims until the other has handed its
// local ones over), and after Redis is back the replicas serve through it
// again with the whole cap and nothing leaked.
func TestRedisKilledAndRestartedMidLoad(t *testing.T) {
	for _, mode := range []string{"fail_closed", "local"} {
		t.Run(mode, func(t *testing.T) { testRedisKilledMidLoad(t, mode) })
	}
}

func testRedisKilledMidLoad(t *testing.T, mode string) {
	const latency = 50 * time.Millisecond
	srv := testenv.StartRedis(t)
	degraded := "degraded: " + mode
	if mode == "local" {
		degraded += ", replicas: 2"
	}
	// A private server, discarded with its keys: the prefix need not be unique.
	c := newClusterWith(t, latency, redisState(srv.URL(), "degraded:", withStateFields(degraded)))

	var ok, unavailable, other atomic.Int64
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 6 {
		r := c.A
		if i%2 == 1 {
			r = c.B
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				code, _, err := c.chat(ctx, r)
				switch {
				case ctx.Err() != nil:
				case code == http.StatusOK:
					ok.Add(1)
				case code == http.StatusServiceUnavailable:
					unavailable.Add(1)
					time.Sleep(20 * time.Millisecond)
				default:
					other.Add(1)
					t.Logf("request through %s = %d (%v)", r.name, code, err)
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	eventually(t, 5*time.Second, "requests served through Redis", func() bool { return ok.Load() > 20 })

	srv.Kill()
	time.Sleep(3 * latency) // the calls admitted through Redis before the kill end
	c.sim.Reset()
	served := ok.Load()
	if mode == "local" {
		eventually(t, 5*time.Second, "requests served on local limits", func() bool { return ok.Load() > served+30 })
	} else {
		eventually(t, 5*time.Second, "requests refused with 503", func() bool { return unavailable.Load() > 10 })
	}
	if peak := c.sim.MaxInFlight("org-1"); peak > 2 {
		t.Errorf("org-1 peak in flight while Redis was down = %d, want at most its cap 2", peak)
	}

	srv.Start()
	served = ok.Load()
	eventually(t, 5*time.Second, "requests served through Redis again", func() bool { return ok.Load() > served+30 })
	// Counted before the load stops: the clients' cancellations at stop
	// release slots at once, while the provider counts a cancelled call
	// until its handler notices the closed connection, so a call admitted
	// in that gap may meet a 429 that says nothing about the recovery.
	peak, n429 := c.sim.MaxInFlight("org-1"), c.upstream429s()
	stop()
	wg.Wait()
	if peak > 2 || n429 != 0 {
		t.Errorf("org-1 peak in flight %d, upstream 429s %d since the kill; want at most 2 and none", peak, n429)
	}
	if n := other.Load(); n != 0 {
		t.Errorf("%d answers neither 200 nor 503", n)
	}
	for _, r := range []*replica{c.A, c.B} {
		eventually(t, 3*time.Second, "no claims left seen by "+r.name, func() bool {
			a := c.account(r)
			return a.InFlight == 0 && a.Waiting == 0
		})
	}
	// The whole cap is free again: four requests at once run two at a
	// time. A 429 of the recovery lowers the learned cap, and the account
	// may still be cooling from it, so bursts are sent until one reaches
	// the cap; none may pass it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.sim.Reset()
		var burst sync.WaitGroup
		for i := range 4 {
			burst.Go(func() { c.mustChat([]*replica{c.A, c.B}[i%2]) })
		}
		burst.Wait()
		peak := c.sim.MaxInFlight("org-1")
		if peak > 2 {
			t.Fatalf("org-1 peak in flight after recovery = %d, want at most its cap 2", peak)
		}
		if peak == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("org-1 peak in flight after recovery = %d for 5 s, want its whole cap 2 back", peak)
		}
	}
}
