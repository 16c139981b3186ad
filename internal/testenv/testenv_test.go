package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// recorder is a testing.TB that records how a test would have ended.
type recorder struct {
	testing.TB
	ended string
}

func (r *recorder) Skipf(format string, a ...any)  { r.ended = "skip: " + fmt.Sprintf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) { r.ended = "fatal: " + fmt.Sprintf(format, a...) }

func TestUnreachableSkipsUnlessCI(t *testing.T) {
	tests := []struct {
		name string
		ci   string
		want string
	}{
		{"Local", "", "skip: redis not reachable at redis://x: refused"},
		{"CIOtherValue", "1", "skip: redis not reachable at redis://x: refused"},
		{"CI", "true", "fatal: redis not reachable at redis://x (required because CI=true): refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			r := &recorder{TB: t}
			unreachable(r, "redis", "redis://x", fmt.Errorf("refused"))
			if r.ended != tt.want {
				t.Errorf("unreachable ended the test with %q, want %q", r.ended, tt.want)
			}
		})
	}
}

func TestServerDownIsSkipped(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("SLUICE_TEST_REDIS_URL", "redis://127.0.0.1:1/0")
	t.Setenv("SLUICE_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:1/test?sslmode=disable")
	for name, open := range map[string]func(testing.TB) string{"Redis": Redis, "Postgres": Postgres} {
		var skipped bool
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			open(t)
		})
		if !skipped {
			t.Errorf("%s with no server was not skipped", name)
		}
	}
}

func TestRedisAnswers(t *testing.T) {
	if u := Redis(t); u == "" {
		t.Error("Redis returned an empty URL")
	}
}

func TestPostgresSchemaIsFreshAndDropped(t *testing.T) {
	var schema string
	t.Run("Use", func(t *testing.T) {
		u := Postgres(t)
		db, err := sql.Open("pgx", u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := db.QueryRowContext(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if parsed, _ := url.Parse(u); schema != parsed.Query().Get("search_path") {
			t.Errorf("current_schema() = %q, want the schema named in %s", schema, u)
		}
	})
	if t.Failed() || schema == "" {
		return
	}
	admin, err := sql.Open("pgx", Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s after its test ended: count %d, %v; want dropped", schema, n, err)
	}
}

// TestRedisCluster: the shared cluster has three primaries serving every
// slot, and a second call returns the same cluster rather than another.
func TestRedisCluster(t *testing.T) {
	start := time.Now()
	addrs := RedisCluster(t)
	took := time.Since(start)
	if len(addrs) != clusterNodes {
		t.Fatalf("RedisCluster = %v, want %d nodes", addrs, clusterNodes)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	masters := map[string]bool{}
	for i := range 30 { // keys in many slots, so on every node
		key := fmt.Sprintf("testenv:%d", i)
		if err := c.Set(t.Context(), key, "v", time.Minute).Err(); err != nil {
			t.Fatalf("set %s: %v", key, err)
		}
		n, err := c.MasterForKey(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		masters[n.Options().Addr] = true
	}
	if len(masters) != clusterNodes {
		t.Errorf("keys landed on %d primaries, want %d", len(masters), clusterNodes)
	}
	if again := RedisCluster(t); !slices.Equal(again, addrs) {
		t.Errorf("second RedisCluster = %v, want the same cluster %v", again, addrs)
	}
	t.Logf("cluster started in %s", took)
}

// TestStartRedisKillAndStart: a private server refuses connections once
// killed and answers, empty, once started again on the same address.
func TestStartRedisKillAndStart(t *testing.T) {
	s := StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Start()
	if n, err := c.Exists(t.Context(), "k").Result(); err != nil || n != 0 {
		t.Fatalf("after a restart EXISTS k = %d, %v; want 0 (empty)", n, err)
	}
}

// TestStartOnATakenPortFails: a server started on a port another server
// holds is refused — whether it exits at once or the other answers first —
// rather than mistaken for a fresh one.
func TestStartOnATakenPortFails(t *testing.T) {
	s := StartRedis(t)
	if p, err := startServer(s.bin, s.port, t.TempDir()); err == nil {
		p.kill()
		t.Fatalf("a second server on %s started without error", s.Addr)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Errorf("the first server after the refused start: %v", err)
	}
}

// TestFreePortsBelowTheEphemeralRange: chosen ports are distinct and, where
// the kernel leaves room, below its ephemeral range.
func TestFreePortsBelowTheEphemeralRange(t *testing.T) {
	ports, err := freePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	floor := ephemeralFloor()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d chosen twice", p)
		}
		seen[p] = true
		if floor-fixedPortsFloor > 1000 && (p < fixedPortsFloor || p >= floor) {
			t.Errorf("port %d outside [%d, %d)", p, fixedPortsFloor, floor)
		}
	}
}

// TestRedisPrefixKeysGoWithTheTest: the keys written under a RedisPrefix,
// with a TTL or without, are gone once the test that asked for it has
// ended; a key beside the prefix is left alone.
func TestRedisPrefixKeysGoWithTheTest(t *testing.T) {
	url := Redis(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	var prefix, beside string
	t.Run("Write", func(t *testing.T) {
		prefix = RedisPrefix(t, url)
		beside = strings.TrimSuffix(prefix, ":") + "-beside"
		if err := c.Set(t.Context(), beside, "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		for key, ttl := range map[string]time.Duration{"lease": time.Minute, "{jobs:1}:exp": 0} {
			if err := c.Set(t.Context(), prefix+key, "v", ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if t.Failed() {
		return
	}
	if keys, err := c.Keys(t.Context(), prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys under %s after its test ended: %v (%v), want none", prefix, keys, err)
	}
	if n, err := c.Del(t.Context(), beside).Result(); err != nil || n != 1 {
		t.Errorf("DEL %s = %d (%v), want 1: the key beside the prefix was deleted with it", beside, n, err)
	}
}

// TestRedisClusterPrefixKeysGoFromEveryPrimary: the keys written under a
// RedisClusterPrefix, spread over every primary, are gone from each once
// the test that asked for it has ended.
func TestRedisClusterPrefixKeysGoFromEveryPrimary(t *testing.T) {
	addrs := RedisCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	var prefix string
	masters := map[string]bool{}
	t.Run("Write", func(t *testing.T) {
		prefix = RedisClusterPrefix(t, addrs)
		for i := range 30 { // keys in many slots, so on every node
			key := fmt.Sprintf("%s%d", prefix, i)
			if err := c.Set(t.Context(), key, "v", 0).Err(); err != nil {
				t.Fatalf("set %s: %v", key, err)
			}
			n, err := c.MasterForKey(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			masters[n.Options().Addr] = true
		}
	})
	if t.Failed() {
		return
	}
	if len(masters) != clusterNodes {
		t.Fatalf("keys landed on %d primaries, want %d", len(masters), clusterNodes)
	}
	err := c.ForEachMaster(t.Context(), func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) != 0 {
			err = fmt.Errorf("%s keeps %v", node.Options().Addr, keys)
		}
		return err
	})
	if err != nil {
		t.Errorf("keys under %s after its test ended: %v", prefix, err)
	}
}
