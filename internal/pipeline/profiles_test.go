package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

// profileCatalog has two profiles (paid routes through pool p1), a
// tenant whose default is free, and
// three keys of it: one trusted with users and profiles, one with users
// only, one with neither (and user_limits of its own).
const profileCatalog = `version: 1
endpoints: [{id: ep, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep]}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
task_types: [{id: chat}, {id: parse}]
pools: [{id: p1, accounts: [c1]}, {id: p2, accounts: [c1]}]
profiles:
  - {id: free, user_limits: {max_inflight: 1, rpm: 10}, task_limits: {parse: {max_inflight: 1}}}
  - {id: paid, user_limits: {max_inflight: 4}, pool: p1}
tenants: [{id: acme, default_profile: free}, {id: other}]
keys:
  - {id: backend, tenant: acme, secret_env: K1, task: chat, tasks: [parse], assert: [user, profile]}
  - {id: users, tenant: acme, secret_env: K2, assert: [user]}
  - {id: plain, tenant: acme, secret_env: K3, user_limits: {max_inflight: 7}}
  - {id: elsewhere, tenant: other, secret_env: K4, assert: [user], user_limits: {max_inflight: 3}}
`

func profileSnapshot(t *testing.T) *Snapshot {
	t.Helper()
	secrets := map[string]string{"UP": "sk-up", "K1": "sk-k1", "K2": "sk-k2", "K3": "sk-k3", "K4": "sk-k4"}
	env := func(name string) (string, bool) { v, ok := secrets[name]; return v, ok }
	cat, err := config.Load([]byte(profileCatalog), env)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Compile(cat, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestResolveProfile checks the order: asserted, else the end user's
// entitlement valid now (for keys that assert users), else the tenant's
// default; and who may assert what.
func TestResolveProfile(t *testing.T) {
	snap := profileSnapshot(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ents := &Entitlements{}
	ents.Set([]store.Entitlement{
		{EndUser: store.EndUser{Tenant: "acme", User: "bob"}, Profile: "paid"},
		{EndUser: store.EndUser{Tenant: "acme", User: "eve"}, Profile: "paid", ValidUntil: now}, // expired just now
		{EndUser: store.EndUser{Tenant: "acme", User: "zed"}, Profile: "paid", ValidFrom: now.Add(time.Hour)},
		{EndUser: store.EndUser{Tenant: "acme", User: "gone"}, Profile: "deleted-since"},
	})
	tests := []struct {
		name, key, user, asserted string
		want                      string
		wantCode                  sluice.Code
	}{
		{name: "entitlement", key: "backend", user: "bob", want: "paid"},
		{name: "entitlement from a key asserting users only", key: "users", user: "bob", want: "paid"},
		{name: "expired entitlement falls back to the tenant's default", key: "backend", user: "eve", want: "free"},
		{name: "entitlement not yet valid", key: "backend", user: "zed", want: "free"},
		{name: "entitlement to a profile the catalog lost", key: "backend", user: "gone", want: "free"},
		{name: "no entitlement", key: "backend", user: "ann", want: "free"},
		{name: "no end user", key: "backend", want: "free"},
		{name: "a key that may not assert users gets the default", key: "plain", user: "bob", want: "free"},
		{name: "a tenant without a default", key: "elsewhere", user: "bob", want: ""},
		{name: "asserted wins over the entitlement", key: "backend", user: "bob", asserted: "free", want: "free"},
		{name: "asserted without a user", key: "backend", asserted: "paid", want: "paid"},
		{name: "asserted by a key that may not", key: "users", user: "bob", asserted: "paid", wantCode: sluice.CodeProfileDenied},
		{name: "asserted unknown profile", key: "backend", asserted: "gold", wantCode: sluice.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &admission{snap: snap, kp: snap.keys[tt.key], user: tt.user, profile: tt.asserted}
			err := a.resolveProfile(ents, now)
			if tt.wantCode != "" {
				if se, ok := errors.AsType[*sluice.Error](err); !ok || se.Code != tt.wantCode {
					t.Fatalf("resolveProfile = %v, want code %s", err, tt.wantCode)
				}
				if status := tt.wantCode.Status(); tt.wantCode == sluice.CodeProfileDenied && status != 403 {
					t.Errorf("%s status = %d, want 403", tt.wantCode, status)
				}
				return
			}
			if err != nil || a.profile != tt.want {
				t.Errorf("resolveProfile: profile = %q, %v; want %q, nil", a.profile, err, tt.want)
			}
		})
	}
}

// TestProfileLimitsReplaceKeyUserLimits checks the limits a request claims
// on its end user: its profile's (per user across the tenant, and per user
// and task type) instead of its key's user_limits; the key's when no
// profile applies.
func TestProfileLimitsReplaceKeyUserLimits(t *testing.T) {
	snap := profileSnapshot(t)
	tests := []struct {
		name, key, profile, user, task string
		want                           []store.Unit
	}{
		{name: "free user, parse", key: "backend", profile: "free", user: "a:b", task: "parse", want: []store.Unit{
			{ID: "enduser:acme:a:b", Cap: 1, RPM: 10}, {ID: "usertask:acme:parse:a:b", Cap: 1}}},
		{name: "free user, chat has no task limit", key: "backend", profile: "free", user: "bob", task: "chat", want: []store.Unit{
			{ID: "enduser:acme:bob", Cap: 1, RPM: 10}}},
		{name: "paid user on another key of the tenant: the same unit", key: "plain", profile: "paid", user: "bob", task: "parse", want: []store.Unit{
			{ID: "enduser:acme:bob", Cap: 4}}},
		{name: "no profile: the key's user_limits", key: "elsewhere", user: "bob", want: []store.Unit{
			{ID: "user:elsewhere:bob", Cap: 3}}},
		{name: "a profile but no end user", key: "backend", profile: "free", task: "parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &admission{snap: snap, kp: snap.keys[tt.key], model: "fast", user: tt.user, profile: tt.profile, task: tt.task}
			a.policy = snap.policy(&a.kp, a.task, a.profile, "")
			got := snap.limitsOf(a)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Limits (-want +got):\n%s", d)
			}
		})
	}
}

// TestEntitlementPoolOverridesTheProfiles: an entitlement's pool routes
// its end user's requests, over the profile's pool; without one the
// profile's pool; a key whose policy fixes its accounts keeps them.
func TestEntitlementPoolOverridesTheProfiles(t *testing.T) {
	snap := profileSnapshot(t)
	ents := &Entitlements{}
	ents.Set([]store.Entitlement{
		{EndUser: store.EndUser{Tenant: "acme", User: "bob"}, Profile: "paid", Pool: "p2"},
		{EndUser: store.EndUser{Tenant: "acme", User: "ann"}, Profile: "paid"},
	})
	tests := []struct{ user, want string }{{"bob", "p2"}, {"ann", "p1"}, {"eve", ""}}
	for _, tt := range tests {
		a := &admission{snap: snap, kp: snap.keys["users"], user: tt.user}
		if err := a.resolveProfile(ents, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := snap.policy(&a.kp, a.kp.task, a.profile, a.entitled).pool; got != tt.want {
			t.Errorf("pool of %s = %q, want %q", tt.user, got, tt.want)
		}
	}
}

// TestResolveProfileWithoutProfilesAllocatesNothing: a catalog without
// profiles pays one comparison per request.
func TestResolveProfileWithoutProfilesAllocatesNothing(t *testing.T) {
	live, key := admissionLive(t)
	snap := live.Load()
	a := &admission{snap: snap, kp: snap.keys[key.ID], user: "bob"}
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { _ = a.resolveProfile(nil, now) }); n != 0 {
		t.Errorf("resolveProfile allocates %v times per request, want 0", n)
	}
	if a.profile != "" {
		t.Errorf("profile = %q, want none", a.profile)
	}
}
