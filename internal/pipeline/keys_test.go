package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// admissionCatalog has a chat and an embeddings alias, a pool, and one
// catalog key scoped to the chat alias, chat path and flex tier.
const admissionCatalog = `version: 1
endpoints: [{id: ep, base_url: "http://127.0.0.1:1", protocols: [openai.chat, openai.embeddings]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep]}]
models:
  - {alias: fast, deployments: [{model: m, endpoints: [ep]}]}
  - {alias: other, deployments: [{model: m, endpoints: [ep]}]}
  - {alias: embed, protocol: openai.embeddings, deployments: [{model: e, endpoints: [ep]}]}
pools: [{id: p, accounts: [c1]}]
task_types: [{id: chat}]
keys:
  - {id: scoped, tenant: t, secret_env: KEY, models: [fast, embed], paths: [chat], service_tiers: [flex], task: chat}
`

func admissionLive(t *testing.T) (*Live, *sluice.Key) {
	t.Helper()
	snap := compileCatalog(t, admissionCatalog, func(string) (string, bool) { return "sk-secret-value", true })
	live := &Live{}
	live.Swap(snap)
	return live, snap.StaticKeys[0]
}

// TestAdmitOrder checks each refusal of admit, and that an earlier check
// wins over a later one.
func TestAdmitOrder(t *testing.T) {
	live, scoped := admissionLive(t)
	now := time.Now()
	api := func(id string, change func(k *sluice.Key)) *sluice.Key {
		k := &sluice.Key{ID: id, Tenant: "t", Hash: "hash-" + id, Status: sluice.KeyActive, Priority: "standard", KeySettings: sluice.KeySettings{OnLimit: sluice.OnLimitWait}}
		change(k)
		return k
	}
	unbound := api("unbound", func(k *sluice.Key) { k.Policy = sluice.RoutePolicy{Mode: "pool", Pool: "gone"} })
	disabled := api("disabled", func(k *sluice.Key) { k.Status = sluice.KeyDisabled })
	expired := api("expired", func(k *sluice.Key) { k.ExpiresAt = now.Add(-time.Second) })
	pool := api("pool", func(k *sluice.Key) { k.Policy = sluice.RoutePolicy{Mode: "pool", Pool: "p"} })
	live.SetStoredKeys([]*sluice.Key{unbound, disabled, expired, pool})

	active := func(k *sluice.Key) *sluice.Key {
		c := *k
		c.Status = sluice.KeyActive
		c.ExpiresAt = time.Time{}
		return &c
	}
	rotated := *scoped
	rotated.Hash = "the hash before a rotation"
	chat := func(model string) *sluice.Request {
		return &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: model, Received: now}
	}
	tests := []struct {
		name string
		key  *sluice.Key // as it authenticated
		req  *sluice.Request
		want sluice.Code // "" = admitted
	}{
		{"Admitted", scoped, chat("fast"), ""},
		{"AdmittedWithItsTier", scoped, &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "fast", ServiceTier: "flex", Received: now}, ""},
		{"PoolKeyAdmitted", pool, chat("other"), ""},
		{"DisabledSinceAuthentication", active(disabled), chat("fast"), sluice.CodeCredentialInactive},
		{"ExpiredSinceAuthentication", active(expired), chat("fast"), sluice.CodeCredentialInactive},
		{"RotatedSinceAuthentication", &rotated, chat("nope"), sluice.CodeCredentialInactive},
		{"UnknownToTheSnapshot", api("gone", func(*sluice.Key) {}), chat("fast"), sluice.CodeCredentialInactive},
		{"MissingAliasOutsideItsScope", scoped, chat("nope"), sluice.CodeModelNotFound},
		{"AliasOfAnotherProtocol", scoped, &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "embed", Received: now}, sluice.CodeModelNotFound},
		{"AliasOutOfScope", scoped, chat("other"), sluice.CodeScopeDenied},
		{"PathOutOfScope", scoped, &sluice.Request{Protocol: sluice.ProtocolOpenAIEmbeddings, Model: "embed", Received: now}, sluice.CodeScopeDenied},
		{"TierOutOfScope", scoped, &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "fast", ServiceTier: "priority", Received: now}, sluice.CodeScopeDenied},
		{"TaskOutOfScope", scoped, &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "fast", Task: "batch", Received: now}, sluice.CodeScopeDenied},
		{"PoolGone", unbound, chat("fast"), sluice.CodeKeyUnbound},
		{"ScopeBeforeBinding", unbound, chat("nope"), sluice.CodeModelNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := live.Load().admit(tt.key, tt.req, nil)
			got := sluice.Code("")
			if se, ok := errors.AsType[*sluice.Error](err); ok {
				got = se.Code
			} else if err != nil {
				t.Fatalf("admit = %v, want a *sluice.Error", err)
			}
			if got != tt.want {
				t.Errorf("admit = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestStoredKeysFollowTheCatalog checks that a key of the admin API is
// compiled against each new catalog, and that one never shadows a catalog
// key of the same ID.
func TestStoredKeysFollowTheCatalog(t *testing.T) {
	live, scoped := admissionLive(t)
	pool := &sluice.Key{ID: "pool", Hash: "h", Status: sluice.KeyActive, KeySettings: sluice.KeySettings{
		Policy: sluice.RoutePolicy{Mode: "pool", Pool: "p"}, Limits: sluice.Limits{MaxInflight: 1}, OnLimit: sluice.OnLimitRefuse}}
	shadow := &sluice.Key{ID: scoped.ID, Hash: "other", Status: sluice.KeyActive}
	live.SetStoredKeys([]*sluice.Key{pool, shadow})
	snap := live.Load()
	if kp := snap.keys["pool"]; kp.unbound || kp.route.pool != "p" {
		t.Errorf("stored pool key compiled to %+v, want pool p, bound", kp)
	}
	a, err := snap.admit(pool, &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "fast", Received: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := a.ownLimits; len(u) != 1 || u[0].ID != "key:pool" || u[0].Cap != 1 || !u[0].Refuse {
		t.Errorf("Limits(stored key) = %+v, want its own max_inflight 1, refusing at it", u)
	}
	if kp := snap.keys[scoped.ID]; kp.key != scoped {
		t.Errorf("a stored key shadowed the catalog key %s", scoped.ID)
	}

	env := func(string) (string, bool) { return "sk-secret-value", true }
	cat, err := config.Load([]byte(admissionCatalog), env)
	if err != nil {
		t.Fatal(err)
	}
	cat.Pools = nil
	next, err := Compile(cat, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	live.Swap(next)
	if kp := live.Load().keys["pool"]; !kp.unbound {
		t.Error("after a reload without its pool, the stored key is still bound")
	}
	if v := live.Load().Version; v != 2 {
		t.Errorf("Version = %d after two catalogs, want 2 (stored keys do not count)", v)
	}
}
