package testenv

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// deleteTimeout bounds the deletion of one test's keys.
const deleteTimeout = 10 * time.Second

// RedisPrefix returns a key prefix of t's own ("sluice-test-", random
// characters, ":") and deletes every key under it from the Redis at url
// when t ends. Cleanups run last-registered first: call it before starting
// what writes under the prefix, so the keys go after the writers stop. url
// is the server's own, not that of a proxy the test may have cut.
func RedisPrefix(t testing.TB, url string) string {
	t.Helper()
	prefix := newRedisPrefix()
	t.Cleanup(func() { DeleteRedisKeys(t, url, prefix) })
	return prefix
}

// RedisClusterPrefix is RedisPrefix on the Redis Cluster of addrs (see
// RedisCluster): the keys are deleted from every primary.
func RedisClusterPrefix(t testing.TB, addrs []string) string {
	t.Helper()
	prefix := newRedisPrefix()
	t.Cleanup(func() {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
		defer cancel()
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return unlinkUnder(ctx, node, prefix)
		})
		if err != nil {
			t.Errorf("delete %s* from the cluster: %v", prefix, err)
		}
	})
	return prefix
}

// DeleteRedisKeys deletes every key under prefix (one of RedisPrefix) from
// the Redis at url. It runs on a client and a context of its own: in a
// cleanup the test's context is already cancelled.
func DeleteRedisKeys(t testing.TB, url, prefix string) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Errorf("delete %s*: %v", prefix, err)
		return
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if err := unlinkUnder(ctx, c, prefix); err != nil {
		t.Errorf("delete %s*: %v", prefix, err)
	}
}

func newRedisPrefix() string { return "sluice-test-" + rand.Text()[:10] + ":" }

// unlinkUnder unlinks every key under prefix on the one server c. Each key
// has an UNLINK of its own, pipelined: on a cluster node one command may
// not name keys of different slots.
func unlinkUnder(ctx context.Context, c *redis.Client, prefix string) error {
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan %s: %w", c.Options().Addr, err)
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("unlink on %s: %w", c.Options().Addr, err)
	}
	return nil
}
