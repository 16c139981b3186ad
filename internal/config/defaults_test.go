package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

func TestApplyDefaults(t *testing.T) {
	give := `
version: 1
server:
  timeouts: {connect: 2s}
endpoints:
  - id: a
    timeouts: {idle: 5s}
  - id: b
    breaker: {failures: 2, open: 1m}
accounts:
  - id: org-1
  - id: org-2
    quota_scope: credential
    cooldown: {base: 2m}
    max_inflight: 7
credentials:
  - {id: in-org, account: org-1}
  - {id: own}
  - {id: own-capped, max_inflight: 5}
models:
  - alias: fast
    deployments:
      - {model: m}
      - {model: n, weight: 7}
      - {model: o, weight: -1}
  - alias: claude
    protocol: anthropic.messages
pools:
  - id: background
keys:
  - id: web
  - id: batch
    priority: background
    policy: {mode: pool, pool: background}
`
	serverTimeouts := Timeouts{
		Connect:   Duration(2 * time.Second),
		FirstByte: Duration(60 * time.Second),
		Idle:      Duration(30 * time.Second),
		Total:     Duration(10 * time.Minute),
	}
	want := &Catalog{
		Version: 1,
		Server: Server{
			Listen:               "127.0.0.1:8080",
			AdminListen:          "127.0.0.1:8081",
			MaxBodyBytes:         4 << 20,
			MaxInflightBodyBytes: 256 << 20,
			BodyTimeout:          Duration(30 * time.Second),
			WaitTimeout:          Duration(30 * time.Second),
			ShutdownGrace:        Duration(time.Minute),
			KeyStaleness:         Duration(30 * time.Second),
			Timeouts:             serverTimeouts,
			Jobs: Jobs{
				MaxAge: Duration(2 * time.Hour), PollInterval: Duration(2 * time.Second),
				MaxPollInterval: Duration(30 * time.Second), Retention: Duration(24 * time.Hour),
			},
		},
		State:    State{Backend: "memory", LeaseTTL: Duration(30 * time.Second)},
		Database: Database{URL: "sqlite://data/sluice.db"},
		Endpoints: []Endpoint{
			{
				ID: "a",
				Timeouts: Timeouts{
					Connect:   Duration(2 * time.Second),
					FirstByte: Duration(60 * time.Second),
					Idle:      Duration(5 * time.Second),
					Total:     Duration(10 * time.Minute),
				},
				Breaker: Breaker{Failures: 5, Open: Duration(30 * time.Second)},
			},
			{ID: "b", Timeouts: serverTimeouts, Breaker: Breaker{Failures: 2, Open: Duration(time.Minute)}},
		},
		Accounts: []Account{
			{ID: "org-1", QuotaScope: "account", MaxInflight: new(2), Cooldown: Cooldown{Base: Duration(time.Second), Max: Duration(time.Minute)}},
			{ID: "org-2", QuotaScope: "credential", MaxInflight: new(7), Cooldown: Cooldown{Base: Duration(2 * time.Minute), Max: Duration(2 * time.Minute)}},
		},
		Credentials: []Credential{
			{ID: "in-org", Account: "org-1"}, // an inner limit: none unless set
			{ID: "own", MaxInflight: new(2)}, // its own account's cap
			{ID: "own-capped", MaxInflight: new(5)},
		},
		Models: []Model{
			{Alias: "fast", Strategy: "round-robin", Deployments: []Deployment{
				{Model: "m", Weight: 1},
				{Model: "n", Weight: 7},
				{Model: "o", Weight: -1}, // left for Validate
			}},
			{Alias: "claude", Protocol: "anthropic.messages", Strategy: "round-robin"},
		},
		Pools: []Pool{{ID: "background", Strategy: "round-robin"}},
		Keys: []Key{
			{ID: "web", Priority: "standard", KeySettings: sluice.KeySettings{Policy: Policy{Mode: "default"}, OnLimit: "wait"}},
			{ID: "batch", Priority: "background", KeySettings: sluice.KeySettings{Policy: Policy{Mode: "pool", Pool: "background"}, OnLimit: "wait"}},
		},
	}

	got, err := Decode([]byte(give))
	if err != nil {
		t.Fatal(err)
	}
	ApplyDefaults(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ApplyDefaults (-want +got):\n%s", diff)
	}
	ApplyDefaults(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ApplyDefaults twice (-want +got):\n%s", diff)
	}
}

// A database URL read from the environment or a file takes no default: the
// default would make two sources of one URL.
func TestApplyDefaultsDatabaseURLElsewhere(t *testing.T) {
	for _, give := range []Database{{URLEnv: "DATABASE_URL"}, {URLFile: "/run/secrets/database-url"}} {
		c := &Catalog{Database: give}
		ApplyDefaults(c)
		if c.Database != give {
			t.Errorf("ApplyDefaults(database %+v) = %+v, want it unchanged", give, c.Database)
		}
	}
}

// The bodies held at once must have room for the largest one.
func TestApplyDefaultsInflightBodiesHoldTheLargestBody(t *testing.T) {
	c := &Catalog{Server: Server{MaxBodyBytes: 512 << 20}}
	ApplyDefaults(c)
	if got := c.Server.MaxInflightBodyBytes; got != 512<<20 {
		t.Errorf("max_inflight_body_bytes = %d, want max_body_bytes (%d)", got, 512<<20)
	}
}
