package app_test

import (
	"fmt"
	neturl "net/url"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// redisState is a catalog's state section on the Redis at url with keys
// under prefix and leases of 2s, as changed by opts. On a shared Redis the
// prefix comes from testenv.RedisPrefix (or RedisClusterPrefix), so that
// the test's keys are deleted when it ends.
func redisState(url, prefix string, opts ...stateOption) string {
	s := stateSection{leaseTTL: 2 * time.Second}
	for _, o := range opts {
		o(&s)
	}
	return fmt.Sprintf("{backend: redis, redis: {url: %q, prefix: %q%s}, lease_ttl: %s%s}", url, prefix, s.redisFields, s.leaseTTL, s.stateFields)
}

// redisThroughProxy puts a test proxy, built by newProxy on the shared
// Redis's address, between the gateway and Redis, and returns it with the
// state section (redisState with opts) that reaches Redis through it alone.
func redisThroughProxy[P interface{ addr() string }](t *testing.T, newProxy func(t *testing.T, target string) P, opts ...stateOption) (P, string) {
	t.Helper()
	redisURL := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, redisURL) // deleted through Redis itself: the proxy is closed by then
	u, err := neturl.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newProxy(t, u.Host)
	u.Host = proxy.addr()
	return proxy, redisState(u.String(), prefix, opts...)
}

// stateSection is what a stateOption changes of redisState's section.
type stateSection struct {
	redisFields string // ", " and further state.redis fields
	leaseTTL    time.Duration
	stateFields string // ", " and further state fields
}

type stateOption func(*stateSection)

// withRedisFields adds fields (flow-style YAML) to state.redis.
func withRedisFields(fields string) stateOption {
	return func(s *stateSection) { s.redisFields += ", " + fields }
}

// withStateFields adds fields (flow-style YAML) to the state section.
func withStateFields(fields string) stateOption {
	return func(s *stateSection) { s.stateFields += ", " + fields }
}

// withLeaseTTL sets state.lease_ttl.
func withLeaseTTL(d time.Duration) stateOption {
	return func(s *stateSection) { s.leaseTTL = d }
}
