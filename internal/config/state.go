package config

import "net/url"

// State selects where hot shared state lives, and what a replica does
// while it cannot be reached.
type State struct {
	Backend  string   `yaml:"backend"` // memory (default) | redis
	Redis    Redis    `yaml:"redis"`
	LeaseTTL Duration `yaml:"lease_ttl"` // a claim held by a dead replica comes back after this; default 30s
	// Degraded is what a replica does while Redis cannot be reached:
	// fail_closed (default) refuses requests that need a claim (503
	// state_unavailable); local admits them against limits of its own,
	// each cap, rate and daily budget divided by Replicas, until Redis
	// answers again. Only with backend redis.
	Degraded string `yaml:"degraded"`
	// Replicas is the number of replicas sharing the caps, required with
	// degraded local: each takes cap ÷ replicas, rounded down, at least 1.
	Replicas int `yaml:"replicas"`
}

// The degraded modes.
const (
	DegradedFailClosed = "fail_closed"
	DegradedLocal      = "local"
)

// Redis locates the Redis server for the cluster backend. Exactly one of
// URL, URLEnv and URLFile gives its URL; the last two keep a password out
// of the catalog.
type Redis struct {
	URL     string `yaml:"url"`
	URLEnv  string `yaml:"url_env"`  // environment variable holding the URL
	URLFile string `yaml:"url_file"` // file holding the URL
	Prefix  string `yaml:"prefix"`
	// Cluster says the URL names a node of a Redis Cluster: a
	// redis:// or rediss:// URL without a database, more seed nodes as
	// addr query parameters (redis://:pw@10.0.0.1:6379?addr=10.0.0.2:6379).
	Cluster bool `yaml:"cluster"`
}

func (v *validator) state() {
	st := v.c.State
	switch r := st.Redis; st.Backend {
	case "memory":
		if r.Cluster {
			v.addf("state.redis.cluster", "only with state.backend redis")
		}
	case "redis":
		if r.URL == "" && r.URLEnv == "" && r.URLFile == "" {
			v.addf("state.redis.url", "required when state.backend is redis (or url_env, or url_file)")
			break
		}
		u, at := v.url("state.redis", r.URL, r.URLEnv, r.URLFile)
		if u == "" {
			break
		}
		switch s := scheme(u); {
		case s != "redis" && s != "rediss" && (s != "unix" || r.Cluster):
			if r.Cluster {
				v.addf(at, "must be a redis:// or rediss:// URL with state.redis.cluster")
			} else {
				v.addf(at, "must be a redis://, rediss:// or unix:// URL")
			}
		case r.Cluster:
			if p, err := url.Parse(u); err != nil || p.Path != "" && p.Path != "/" && p.Path != "/0" {
				v.addf(at, "a Redis Cluster has database 0 only: no database in the URL")
			}
		}
	default:
		v.addf("state.backend", "must be memory or redis, got %q", st.Backend)
	}

	switch st.Degraded {
	case "", DegradedFailClosed:
		if st.Replicas != 0 {
			v.addf("state.replicas", "only with state.degraded local")
		}
	case DegradedLocal:
		if st.Backend != "redis" {
			v.addf("state.degraded", "local only with state.backend redis (memory never fails)")
		}
		if st.Replicas < 1 {
			v.addf("state.replicas", "required with state.degraded local: how many replicas share the caps (≥ 1)")
		}
	default:
		v.addf("state.degraded", "must be fail_closed or local, got %q", st.Degraded)
	}
}
