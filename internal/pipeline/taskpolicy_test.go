package pipeline

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

const taskPoolCatalog = `version: 1
endpoints: [{id: ep, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}]
accounts: [{id: a1, max_inflight: 2}, {id: a2, max_inflight: 2}]
credentials: [{id: c1, account: a1, secret_env: UP, endpoints: [ep]}, {id: c2, account: a2, secret_env: UP, endpoints: [ep]}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
pools: [{id: paid, accounts: [a1], max_inflight: 1}, {id: bg, accounts: [a2], max_inflight: 1}]
task_types: [{id: write, pool: paid}, {id: parse, pool: bg}, {id: chat}]
profiles: [{id: gold, pool: paid}]
keys:
  - {id: backend, tenant: t, secret_env: KEY, task: chat, tasks: [write, parse]}
  - {id: pinned, tenant: t, secret_env: KEY2, task: write, policy: {mode: pool, pool: bg}}
`

// TestTaskPool: a default key's request routes through its task type's
// pool (its accounts and limits), its default task's too, else through its
// profile's pool, else by the key's default policy; a key whose own policy
// fixes a pool keeps it whatever the task and profile.
func TestTaskPool(t *testing.T) {
	env := func(name string) (string, bool) { return "sk-secret-value-" + name, true }
	cat, err := config.Load([]byte(taskPoolCatalog), env)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Compile(cat, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	backend, pinned := &sluice.Key{ID: "backend", Tenant: "t"}, &sluice.Key{ID: "pinned", Tenant: "t"}
	tests := []struct {
		key      *sluice.Key
		task     string
		profile  string
		wantPool string
		allowed  string // an account the policy allows
		denied   string // one it does not; "" = none
	}{
		{backend, "write", "", "paid", "a1", "a2"},
		{backend, "parse", "", "bg", "a2", "a1"},
		{backend, "", "", "", "a1", ""}, // chat: no pool, every account
		{backend, "", "gold", "paid", "a1", "a2"},
		{backend, "parse", "gold", "bg", "a2", "a1"}, // the task's pool first
		{pinned, "write", "gold", "bg", "a2", "a1"},
	}
	for _, tt := range tests {
		kp := snap.keys[tt.key.ID]
		task, _ := snap.Task(tt.key, tt.task)
		rp := snap.policy(&kp, task, tt.profile, "")
		if rp.pool != tt.wantPool || !rp.allows(tt.allowed) || (tt.denied != "" && rp.allows(tt.denied)) {
			t.Errorf("policy(%s, task %q, profile %q) = %+v, want pool %q allowing %s and not %q", tt.key.ID, tt.task, tt.profile, rp, tt.wantPool, tt.allowed, tt.denied)
		}
		found := ""
		for _, u := range snap.limitsOf(&admission{snap: snap, kp: kp, model: "fast", task: task, profile: tt.profile, policy: rp}) {
			if u.ID == "pool:"+tt.wantPool {
				found = tt.wantPool
			}
		}
		if found != tt.wantPool {
			t.Errorf("Limits(%s, task %q, profile %q) holds pool %q, want %q", tt.key.ID, tt.task, tt.profile, found, tt.wantPool)
		}
	}
	kp := snap.keys[backend.ID]
	if n := testing.AllocsPerRun(100, func() { policySink = snap.policy(&kp, "parse", "", "") }); n != 0 {
		t.Errorf("policy with a task pool allocates %v times, want 0", n)
	}
}

// TestSubmitRateLimitsItsCredentialOnly: a credential's submit_rpm is a
// limit on every edge of that credential, and on no other.
func TestSubmitRateLimitsItsCredentialOnly(t *testing.T) {
	env := func(name string) (string, bool) { return "sk-secret-value-" + name, true }
	cat, err := config.Load([]byte(strings.Replace(taskPoolCatalog, "{id: c1, account: a1,", "{id: c1, account: a1, submit_rpm: 30,", 1)), env)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Compile(cat, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	edges, _ := snap.Routes.Candidates("fast", sluice.ProtocolOpenAIChat, nil)
	if len(edges) != 2 {
		t.Fatalf("Candidates(fast) = %d edges, want 2", len(edges))
	}
	for _, e := range edges {
		got := snap.edgeLimits(e, nil)
		want := []store.Unit(nil)
		if e.Credential.ID == "c1" {
			want = []store.Unit{{ID: "credential:c1/submit", RPM: 30}}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("edgeLimits(%s) (-want +got):\n%s", e.ID, diff)
		}
	}
}
