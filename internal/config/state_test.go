package config

import "testing"

// TestValidateState: the Redis Cluster and degraded-mode fields are taken
// where they do something and refused where they would do nothing.
func TestValidateState(t *testing.T) {
	redis := func(url string) State { return State{Backend: "redis", Redis: Redis{URL: url}} }
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
		{"FailClosed", func() State { s := redis("redis://cache:6379/0"); s.Degraded = "fail_closed"; return s }(), ""},
		{"Local", func() State { s := redis("redis://cache:6379/0"); s.Degraded, s.Replicas = "local", 3; return s }(), ""},
		{"LocalWithoutReplicas", func() State { s := redis("redis://cache:6379/0"); s.Degraded = "local"; return s }(),
			"state.replicas: required with state.degraded local"},
		{"LocalOnMemory", State{Backend: "memory", Degraded: "local", Replicas: 2},
			"state.degraded: local only with state.backend redis"},
		{"ReplicasWithoutLocal", func() State { s := redis("redis://cache:6379/0"); s.Replicas = 2; return s }(),
			"state.replicas: only with state.degraded local"},
		{"UnknownMode", func() State { s := redis("redis://cache:6379/0"); s.Degraded = "open"; return s }(),
			`state.degraded: must be fail_closed or local, got "open"`},
	}
	cases := make([]validateCase, len(tests))
	for i, tt := range tests {
		cases[i] = validateCase{name: tt.name, want: tt.want, give: func(c *Catalog) {
			s := tt.give
			s.LeaseTTL = c.State.LeaseTTL
			c.State = s
		}}
	}
	checkValidate(t, cases)
}
