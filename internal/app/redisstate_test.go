package app_test

import (
	"fmt"
	"time"
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
