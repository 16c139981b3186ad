package pipeline

import (
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

// domainCatalog has accounts a and b sharing alias x (one domain, named
// after a), account c alone under alias y, and a credential without an
// account under alias z; pool p1 stays within x's domain, p2 spans two.
const domainCatalog = `version: 1
endpoints:
  - {id: e1, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}
  - {id: e2, base_url: "http://127.0.0.1:2", protocols: [openai.chat]}
  - {id: e3, base_url: "http://127.0.0.1:3", protocols: [openai.chat]}
accounts: [{id: b, max_inflight: 2}, {id: a, max_inflight: 2}, {id: c, max_inflight: 2}]
credentials:
  - {id: cb, account: b, secret_env: UP, endpoints: [e1]}
  - {id: ca, account: a, secret_env: UP, endpoints: [e1]}
  - {id: cc, account: c, secret_env: UP, endpoints: [e2]}
  - {id: solo, secret_env: UP, endpoints: [e3]}
models:
  - {alias: x, limits: {max_inflight: 3}, deployments: [{model: m, endpoints: [e1]}]}
  - {alias: y, deployments: [{model: m, endpoints: [e2]}]}
  - {alias: z, deployments: [{model: m, endpoints: [e3]}]}
pools: [{id: p1, accounts: [a, b], max_inflight: 3}, {id: p2, accounts: [a, c], max_inflight: 3}]
tenants: [{id: t, limits: {max_inflight: 2}}]
`

func compileDomainCatalog(t *testing.T, yaml string) *Snapshot {
	t.Helper()
	env := func(string) (string, bool) { return "sk-secret-value", true }
	cat, err := config.Load([]byte(yaml), env)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Compile(cat, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestDomainsAreConnectedAccounts: accounts an alias shares are one
// domain, named after the smallest account ID; others are their own.
func TestDomainsAreConnectedAccounts(t *testing.T) {
	s := compileDomainCatalog(t, domainCatalog)
	tests := []struct{ name, got, want string }{
		{"alias x", s.AliasDomain("x"), "a:a"},
		{"alias y", s.AliasDomain("y"), "a:c"},
		{"alias z", s.AliasDomain("z"), "a:solo"},
		{"account b", s.UnitDomain("account:b"), "a:a"},
		{"account c", s.UnitDomain("account:c"), "a:c"},
		{"credential unit", s.UnitDomain("credential:solo"), "a:solo"},
		{"unknown alias", s.AliasDomain("nope"), noDomain},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: domain %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestLimitsSpanningDomainsGetTheirOwn: with several domains, a limit
// every account of which is in one domain stays in the claim's; the
// others are held in domains of their own (an end user's in its key's).
func TestLimitsSpanningDomainsGetTheirOwn(t *testing.T) {
	s := compileDomainCatalog(t, domainCatalog)
	tests := []struct{ id, want string }{
		{"model:x", ""},
		{"account:a/model:m", ""},
		{"pool:p1", ""},
		{"pool:p2", "l:pool:p2"},
		{"tenant:t", "l:tenant:t"},
		{"key:k", "l:key:k"},
		{"user:k:u1", "l:user:k"},
		{"billing:acme", "l:billing:acme"},
	}
	for _, tt := range tests {
		if got := s.limitDomain(tt.id); got != tt.want {
			t.Errorf("limitDomain(%s) = %q, want %q", tt.id, got, tt.want)
		}
	}
	if got := s.limits["tenant:t"].Domain; got != "l:tenant:t" {
		t.Errorf("compiled tenant limit's Domain = %q, want l:tenant:t", got)
	}
	in := []store.Unit{{ID: "model:x"}, {ID: "user:k:u1"}}
	out := s.placeLimits(in)
	if out[0].Domain != "" || out[1].Domain != "l:user:k" || in[1].Domain != "" {
		t.Errorf("placeLimits = %+v (from %+v), want only the user's placed, on a copy", out, in)
	}
}

// TestOneDomainKeepsLimitsInIt: a catalog of one domain holds every limit
// in it (one atomic claim, as before domains), and placing limits costs
// nothing.
func TestOneDomainKeepsLimitsInIt(t *testing.T) {
	s := compileDomainCatalog(t, `version: 1
endpoints: [{id: e1, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}]
accounts: [{id: b, max_inflight: 2}, {id: a, max_inflight: 2}]
credentials:
  - {id: cb, account: b, secret_env: UP, endpoints: [e1]}
  - {id: ca, account: a, secret_env: UP, endpoints: [e1]}
models: [{alias: x, deployments: [{model: m, endpoints: [e1]}]}]
tenants: [{id: t, limits: {max_inflight: 2}}]
`)
	if s.domains.split || s.AliasDomain("x") != "a:a" || s.limits["tenant:t"].Domain != "" {
		t.Errorf("split %v, alias domain %q, tenant limit domain %q; want one domain a:a holding the limit",
			s.domains.split, s.AliasDomain("x"), s.limits["tenant:t"].Domain)
	}
	limits := []store.Unit{{ID: "tenant:t"}, {ID: "user:k:u"}}
	if n := testing.AllocsPerRun(100, func() { limits = s.placeLimits(limits) }); n != 0 {
		t.Errorf("placeLimits allocates %v times, want 0", n)
	}
}

// TestDomainNamesSurviveEdits: merging components keeps the name of the
// one with the smallest account; splitting one keeps it for the part
// holding that account, and the other part is named after its own.
func TestDomainNamesSurviveEdits(t *testing.T) {
	tests := []struct {
		name, edit string
		want       map[string]string // unit → domain
	}{
		{"merge: y also on e1", `models:
  - {alias: x, deployments: [{model: m, endpoints: [e1]}]}
  - {alias: y, deployments: [{model: m, endpoints: [e1, e2]}]}
`, map[string]string{"account:a": "a:a", "account:b": "a:a", "account:c": "a:a"}},
		{"split: no alias shares e1's accounts", `models:
  - {alias: x, deployments: [{model: m, endpoints: [e2]}]}
`, map[string]string{"account:a": "a:a", "account:b": "a:b", "account:c": "a:c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compileDomainCatalog(t, `version: 1
endpoints:
  - {id: e1, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}
  - {id: e2, base_url: "http://127.0.0.1:2", protocols: [openai.chat]}
accounts: [{id: b, max_inflight: 2}, {id: a, max_inflight: 2}, {id: c, max_inflight: 2}]
credentials:
  - {id: cb, account: b, secret_env: UP, endpoints: [e1]}
  - {id: ca, account: a, secret_env: UP, endpoints: [e1]}
  - {id: cc, account: c, secret_env: UP, endpoints: [e2]}
`+tt.edit)
			for unit, want := range tt.want {
				if got := s.UnitDomain(unit); got != want {
					t.Errorf("UnitDomain(%s) = %q, want %q", unit, got, want)
				}
			}
		})
	}
}
