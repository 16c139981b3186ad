package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The tests here run the stores against the three-primary Redis Cluster of
// testenv, which rejects a script whose keys span slots (CROSSSLOT) and a
// script touching an undeclared key of another node: the check that the
// key layout is cluster safe, with domains and job bindings spread over
// the nodes. The cluster is a throwaway, shared by the tests of this
// process: each test has a prefix of its own and leaves its keys.

// clusterReplica returns a Store on a new cluster client with prefix,
// closed when t ends.
func clusterReplica(t *testing.T, prefix string) *Store {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.RedisCluster(t), ContextTimeoutEnabled: true})
	s := New(c, prefix)
	t.Cleanup(func() {
		s.Close()
		c.Close()
	})
	return s
}

func TestClusterContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() storetest.Stores {
		prefix := testPrefix()
		return func() storetest.Stores { return clusterReplica(t, prefix) }
	})
}

func TestClusterJobsContract(t *testing.T) {
	storetest.RunJobs(t, func(t *testing.T) func() store.Jobs {
		prefix := testPrefix()
		return func() store.Jobs { return clusterReplica(t, prefix) }
	})
}

func TestClusterAffinityContract(t *testing.T) {
	storetest.RunAffinity(t, func(t *testing.T) func() store.Affinity {
		prefix := testPrefix()
		return func() store.Affinity { return clusterReplica(t, prefix) }
	})
}

// TestClusterEveryOperation calls each store operation the contract suite
// may not reach (preloading, renewal, a probe, cancel with a wake-up, the
// inspector, statuses, reassertion) on the cluster: none may fail with
// CROSSSLOT or a non-local key. The wake-up crosses nodes: the domain's
// slot and the replica's channel are on different primaries.
func TestClusterEveryOperation(t *testing.T) {
	s := clusterReplica(t, testPrefix())
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	wake, err := s.Wake(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	c := cand("u", 1, "c")
	acquire(t, s, req("t1", c))
	acquire(t, s, req("t2", c))
	if err := s.Renew(t.Context(), "dom", []string{"t1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(t.Context(), "dom", "t1", store.Outcome{RateLimited: true, RetryAfter: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	g := acquire(t, s, req("t2", c))
	for !g.Granted && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the cooldown of 50 ms ends by the Redis clock
		g = acquire(t, s, req("t2", c))
	}
	if !g.Probe {
		t.Fatalf("t2 = %+v, want the probe", g)
	}
	if err := s.ProbeSucceeded(t.Context(), "dom", "t2"); err != nil {
		t.Fatal(err)
	}
	acquire(t, s, req("t3", c))
	if err := s.Cancel(t.Context(), "dom", "q", "t2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, wake, "t3")
	if _, err := s.Units(t.Context(), "dom", []string{"u"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CredentialInFlight(t.Context(), "dom", []string{"c"}); err != nil {
		t.Fatal(err)
	}
	held := []store.Held{{Lease: "t3", Candidate: c, TTL: time.Minute}}
	if err := s.Reassert(t.Context(), "dom", held); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStatus(t.Context(), "credential", "c", store.Status{State: "disabled", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Statuses(t.Context(), "credential"); err != nil || st["c"].State != "disabled" {
		t.Fatalf("Statuses = %v, %v; want c disabled", st, err)
	}
}
