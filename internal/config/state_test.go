package config

import (
	"strings"
	"testing"
)

// TestValidateState: the Redis Cluster field is taken where it does
// something and refused where it would do nothing.
func TestValidateState(t *testing.T) {
	tests := []struct {
		name string
		give State
		want string // "" = valid
	}{
		{"Cluster", State{Backend: "redis", Redis: Redis{URL: "redis://:pw@10.0.0.1:6379?addr=10.0.0.2:6379", Cluster: true}}, ""},
		{"ClusterDatabaseZero", State{Backend: "redis", Redis: Redis{URL: "rediss://cache:6380/0", Cluster: true}}, ""},
		{"ClusterOtherDatabase", State{Backend: "redis", Redis: Redis{URL: "redis://cache:6379/3", Cluster: true}},
			"state.redis.url: a Redis Cluster has database 0 only"},
		{"ClusterUnixSocket", State{Backend: "redis", Redis: Redis{URL: "unix:///run/redis.sock", Cluster: true}},
			"state.redis.url: must be a redis:// or rediss:// URL with state.redis.cluster"},
		{"ClusterOnMemory", State{Backend: "memory", Redis: Redis{Cluster: true}}, "state.redis.cluster: only with state.backend redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base(t)
			tt.give.LeaseTTL = c.State.LeaseTTL
			c.State = tt.give
			err := Validate(c, lookup(testEnv))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
