package redisstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/testenv"
)

// BenchmarkDomains measures the Redis-bound throughput of capacity claims
// for a catalog of 30 accounts and 300 tenants with a limit each (issue
// 16), made through the capacity engine as a replica makes them, by
// several replicas (clients) with many requests each, on a single primary
// and on the three-primary cluster of testenv:
//
//   - one-domain: the whole catalog one domain (every account shares an
//     alias), the tenant limit in it: one script to acquire, one to release;
//   - split: every account its own domain (a:<account>), the tenant limits
//     spanning them, each in its own domain (l:tenant:<t>), taken first as
//     a token: two scripts to acquire, two to release, spread over slots.
//
// It reports requests per second (req/s), the Redis time per request in
// scripts summed over the primaries (redis-µs/req, from INFO
// commandstats), and the share of that time on the busiest primary
// (max-node-share): about 1/3 on the cluster is the load spread evenly.
func BenchmarkDomains(b *testing.B) {
	single := func(b *testing.B) redis.UniversalClient {
		srv := testenv.StartRedis(b)
		opt, err := redis.ParseURL(srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		opt.ContextTimeoutEnabled, opt.PoolSize = true, benchWorkers
		return redis.NewClient(opt)
	}
	cluster := func(b *testing.B) redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.RedisCluster(b), ContextTimeoutEnabled: true,
			PoolSize: benchWorkers})
	}
	for _, server := range []struct {
		name string
		dial func(*testing.B) redis.UniversalClient
	}{{"single", single}, {"cluster", cluster}} {
		for _, split := range []bool{false, true} {
			name := server.name + "/one-domain"
			if split {
				name = server.name + "/split"
			}
			b.Run(name, func(b *testing.B) { benchDomains(b, server.dial, split) })
		}
	}
}

const (
	benchAccounts = 30
	benchTenants  = 300
	benchReplicas = 4  // stores, each on a client of its own, each with its engine
	benchWorkers  = 32 // requests in flight per replica
)

func benchDomains(b *testing.B, dial func(*testing.B) redis.UniversalClient, split bool) {
	prefix := testPrefix()
	var clients []redis.UniversalClient
	var engines []*capacity.Engine
	ctx, stop := context.WithCancel(context.Background())
	var running sync.WaitGroup
	b.Cleanup(func() {
		stop()
		running.Wait()
		for _, c := range clients {
			c.Close()
		}
	})
	for r := range benchReplicas {
		c := dial(b)
		clients = append(clients, c)
		s := New(c, prefix)
		b.Cleanup(func() { s.Close() })
		if err := s.Load(b.Context()); err != nil {
			b.Fatal(err)
		}
		e := capacity.New(s, s, fmt.Sprint("bench-r", r), 30*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
		running.Go(func() { _ = e.Run(ctx) })
		engines = append(engines, e)
	}
	plans := benchPlans(split)
	resetStats(b, clients[0])

	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for r, e := range engines {
		for w := range benchWorkers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(r), uint64(w)))
				for {
					i := next.Add(1)
					if i > int64(b.N) {
						return
					}
					a := store.Acquire{Ticket: "t" + strconv.FormatInt(i, 10), Queue: "chat", Class: 1}
					p := plans[rng.IntN(len(plans))]
					a.Tenant = p.tenant
					c, err := e.Wait(b.Context(), a, time.Now().Add(10*time.Second), p.plan)
					if err != nil {
						b.Errorf("Wait: %v", err)
						return
					}
					c.Release(b.Context(), store.Outcome{Success: true})
				}
			})
		}
	}
	wg.Wait()
	for _, e := range engines {
		if err := e.Flush(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	total, busiest := redisCPU(b, clients[0])
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(total)/float64(b.N), "redis-µs/req")
	if total > 0 {
		b.ReportMetric(float64(busiest)/float64(total), "max-node-share")
	}
}

// benchPlan is one (tenant, account) pair a request may have.
type benchPlan struct {
	tenant string
	plan   capacity.Plan
}

// benchPlans returns a plan for every tenant and account: the account
// (no cap worth waiting for) with the tenant's limit, in one domain or
// split (see BenchmarkDomains).
func benchPlans(split bool) []benchPlan {
	var out []benchPlan
	for t := range benchTenants {
		tenant := store.Unit{ID: fmt.Sprint("tenant:t", t), Cap: 1000}
		if split {
			tenant.Domain = "l:" + tenant.ID
		}
		for a := range benchAccounts {
			acct := fmt.Sprint("acct", a)
			domain := "main"
			if split {
				domain = "a:" + acct
			}
			cands := []store.Candidate{{Unit: store.Unit{ID: "account:" + acct, Cap: 10000}, Credential: acct + "-c",
				Limits: []store.Unit{tenant}}}
			out = append(out, benchPlan{tenant: tenant.ID, plan: func() (string, []store.Candidate) { return domain, cands }})
		}
	}
	return out
}

// primaries calls fn on every primary: the one server, or each primary of
// the cluster.
func primaries(b *testing.B, c redis.UniversalClient, fn func(*redis.Client)) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		if err := cc.ForEachMaster(b.Context(), func(_ context.Context, n *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			fn(n)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return
	}
	fn(c.(*redis.Client))
}

func resetStats(b *testing.B, c redis.UniversalClient) {
	primaries(b, c, func(n *redis.Client) {
		if err := n.ConfigResetStat(b.Context()).Err(); err != nil {
			b.Fatal(err)
		}
	})
}

// redisCPU returns the µs the primaries spent in scripts (EVAL, EVALSHA,
// FCALL: every capacity decision) since resetStats, from INFO
// commandstats, in all and on the busiest one.
func redisCPU(b *testing.B, c redis.UniversalClient) (total, busiest int64) {
	primaries(b, c, func(n *redis.Client) {
		info, err := n.Info(b.Context(), "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		var node int64
		for line := range strings.SplitSeq(info, "\n") {
			_, rest, ok := strings.Cut(line, "usec=")
			if !ok || !strings.HasPrefix(line, "cmdstat_fcall") && !strings.HasPrefix(line, "cmdstat_eval") {
				continue // the commands a script calls are in its own time, and listed again
			}
			v, _, _ := strings.Cut(rest, ",")
			us, _ := strconv.ParseInt(v, 10, 64)
			node += us
		}
		total += node
		busiest = max(busiest, node)
	})
	return total, busiest
}
