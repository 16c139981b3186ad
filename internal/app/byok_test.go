package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/simulator"
)

// byokTemplate is catalogTemplate's layout (database path, state, simA,
// simB) with owned credentials: the platform's plat-a (account platform)
// on ep-a and plat-b on ep-b, tenant acme's own acme-own and its end user
// bob's own bob-own, both on ep-a. Keys web and acme route through pool
// shared, which holds every account; BUDGET is the pool's cost_budget_day;
// acme may assert its end users. Key acme-pref prefers the platform
// account and may fall back to any; it asserts nobody.
const byokTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 1s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat], breaker: {failures: 50, open: 1s}}
  - {id: ep-b, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: platform, cooldown: {base: 10s, max: 10s}}
credentials:
  - {id: plat-a, account: platform, secret_env: UP_A1, endpoints: [ep-a]}
  - {id: plat-b, secret_env: UP_B1, endpoints: [ep-b]}
  - {id: acme-own, owner: {tenant: acme}, secret_env: UP_A2, endpoints: [ep-a]}
  - {id: bob-own, owner: {tenant: acme, user: bob}, secret_file: BOB_FILE, endpoints: [ep-a]}
models:
  - alias: fast
    deployments:
      - {model: gpt-4o-mini, endpoints: [ep-a], priority: 0}
      - {model: gpt-4o-mini, endpoints: [ep-b], priority: 1}
pools:
  - {id: shared, accounts: [platform, plat-b, acme-own, bob-own]BUDGET}
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, policy: {mode: pool, pool: shared}}
  - {id: acme, tenant: acme, secret_env: KEY_SCOPED, policy: {mode: pool, pool: shared}, assert: [user]}
  - {id: acme-pref, tenant: acme, secret_file: PREF_FILE, policy: {mode: preferred, accounts: [platform], fallback: any}}
billing:
  costs:
    - {model: gpt-4o-mini, request: "0.25", effective_from: "2020-01-01T00:00:00Z"}
`

const (
	secretBob   = "sk-upstream-bob-SECRET-93e1c7a5d2b4f6"
	keyAcmePref = "sk-sluice-acme-pref-KEY-4d2b7f1e9a3c"
)

type byok struct {
	*harness
	keyWeb, keyAcme string
}

// newBYOK starts a gateway on byokTemplate with the pool's cost budget
// (", cost_budget_day: …" or "").
func newBYOK(t *testing.T, budget string) *byok {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"BOB_FILE": secretBob, "PREF_FILE": keyAcmePref}
	var pairs []string
	for name, secret := range files {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, name, file)
	}
	doc := strings.NewReplacer(append(pairs, "BUDGET", budget)...).Replace(byokTemplate)
	return &byok{harness: newHarnessWith(t, doc, "{backend: memory}", simulator.Options{}), keyWeb: keyWeb, keyAcme: keyScoped}
}

// ask sends one chat request of key for end user ("" = none named) and
// returns its status and body.
func (b *byok) ask(key, user string) (int, string) {
	b.t.Helper()
	body := `{"model":"fast","messages":[{"role":"user","content":"hi"}]`
	if user != "" {
		body += `,"user":"` + user + `"`
	}
	code, _, resp := b.post(context.Background(), "/v1/chat/completions", key, body+"}")
	return code, resp
}

func (b *byok) wantServed(key, user string, n int) {
	b.t.Helper()
	for range n {
		if code, body := b.ask(key, user); code != http.StatusOK {
			b.t.Fatalf("request of key %s, user %q = %d %s; want 200", key[:14], user, code, body)
		}
	}
}

// counts are the upstream requests each credential's secret made.
func (b *byok) counts() map[string]int {
	return map[string]int{"plat-a": b.simA.Count(secretA1), "acme-own": b.simA.Count(secretA2), "bob-own": b.simA.Count(secretBob),
		"plat-b": b.simB.Count(secretB1)}
}

func (b *byok) wantCounts(what string, want map[string]int) {
	b.t.Helper()
	if got := b.counts(); !mapsEqual(got, want) {
		b.t.Fatalf("%s: upstream requests by credential = %v, want %v", what, got, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func byokError(t *testing.T, body string) (code, msg string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.Code, e.Error.Message
}

// A tenant's own credential serves that tenant's requests only, and an end
// user's own credential that user's only: another tenant never reaches
// them — not normally, not when the platform's endpoint fails and it fails
// over, not while every platform account cools (it waits, then gets 429).
// The owner's requests run on their own credentials only: the platform's
// cooling does not touch them, and their own key cooling makes them wait,
// never move to the platform's.
func TestBYOKServesOnlyItsOwner(t *testing.T) {
	b := newBYOK(t, "")
	b.wantServed(b.keyWeb, "", 3)
	b.wantServed(b.keyWeb, "bob", 1) // an end user of another tenant with bob's name
	b.wantServed(b.keyAcme, "", 2)
	b.wantServed(b.keyAcme, "carol", 1) // an end user of acme without a key of their own: acme's
	b.wantServed(b.keyAcme, "bob", 2)
	b.wantCounts("served", map[string]int{"plat-a": 4, "acme-own": 3, "bob-own": 2, "plat-b": 0})

	// The platform's endpoint fails: web fails over to plat-b, never to
	// the owned keys on the same endpoint.
	b.simA.SetKey(secretA1, simulator.Behavior{FailStatus: http.StatusInternalServerError})
	b.wantServed(b.keyWeb, "", 3)
	b.wantCounts("failover", map[string]int{"plat-a": 7, "acme-own": 3, "bob-own": 2, "plat-b": 3})

	// Every platform account rate limited: they cool for 10s. Web waits
	// and is refused; the owned keys, idle on the same endpoint, stay
	// untouched, and the owners are served by them meanwhile.
	b.simA.SetKey(secretA1, simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: 10 * time.Second})
	b.simB.SetKey(secretB1, simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: 10 * time.Second})
	for range 3 {
		code, body := b.ask(b.keyWeb, "")
		if c, _ := byokError(t, body); code != http.StatusTooManyRequests || c != string(sluice.CodeCapacityWaitTimeout) {
			t.Fatalf("web while the platform cools = %d %s; want 429 capacity_wait_timeout", code, body)
		}
	}
	b.wantServed(b.keyAcme, "", 2)
	b.wantServed(b.keyAcme, "bob", 1)
	b.wantCounts("platform cooling", map[string]int{"plat-a": 8, "acme-own": 5, "bob-own": 3, "plat-b": 4})

	// The owner's own key rate limited: acme's request waits for it and is
	// refused, though the platform's keys would be free again (they are
	// healthy now, and web is served once they have cooled).
	b.simA.SetKey(secretA1, simulator.Behavior{})
	b.simB.SetKey(secretB1, simulator.Behavior{})
	b.simA.SetKey(secretA2, simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: 10 * time.Second})
	code, body := b.ask(b.keyAcme, "")
	if c, _ := byokError(t, body); code != http.StatusTooManyRequests || c != string(sluice.CodeCapacityWaitTimeout) {
		t.Fatalf("acme while its own key cools = %d %s; want 429 capacity_wait_timeout", code, body)
	}
	b.wantCounts("own key cooling", map[string]int{"plat-a": 8, "acme-own": 6, "bob-own": 3, "plat-b": 4})
	b.wantServed(b.keyAcme, "bob", 1) // bob's own key is not acme's
	b.wantCounts("bob's own key", map[string]int{"plat-a": 8, "acme-own": 6, "bob-own": 4, "plat-b": 4})

	// The usage records name the credential each request ran on, and its
	// owner; the owned keys' executions cost the platform nothing.
	owners := map[string]sluice.Owner{"acme-own": {Tenant: "acme"}, "bob-own": {Tenant: "acme", User: "bob"}}
	for _, rec := range b.usage(t, 20) {
		for _, x := range rec.Executions {
			owned := x.CredentialID == "acme-own" || x.CredentialID == "bob-own"
			if owned != (rec.Tenant == "acme") {
				t.Errorf("request %s of tenant %s ran on %s", rec.RequestID, rec.Tenant, x.CredentialID)
			}
			if x.Owner != owners[x.CredentialID] {
				t.Errorf("request %s: its execution on %s is recorded as owned by %+v", rec.RequestID, x.CredentialID, x.Owner)
			}
		}
		if rec.Tenant == "acme" && rec.Billing != nil && rec.Billing.Cost != 0 {
			t.Errorf("BYOK request %s costs the platform %d", rec.RequestID, rec.Billing.Cost)
		}
	}
}

// TestBYOKUserCredentialNeedsAnAssertingKey (issue 24 item 12): an end
// user's own credential serves only keys that may assert their end users.
// Another key of the same tenant naming the user runs on the tenant's
// credential, never the user's.
func TestBYOKUserCredentialNeedsAnAssertingKey(t *testing.T) {
	b := newBYOK(t, "")
	b.wantServed(b.keyAcme, "bob", 1)
	b.wantCounts("the asserting key", map[string]int{"plat-a": 0, "acme-own": 0, "bob-own": 1, "plat-b": 0})
	b.wantServed(keyAcmePref, "bob", 2)
	b.wantCounts("a key that asserts nobody", map[string]int{"plat-a": 0, "acme-own": 2, "bob-own": 1, "plat-b": 0})
}

// An end user's bad key disables that credential only, and the user is
// told at once, on the request that found it and on the next, with the
// credential and the reason; the admin view shows the owner and the
// reason. Other owners and the platform go on.
func TestBYOKBadOwnerKeyDisablesOnlyIt(t *testing.T) {
	b := newBYOK(t, "")
	b.simA.SetKey(secretBob, simulator.Behavior{Invalid: true})
	for i := range 2 {
		code, body := b.ask(b.keyAcme, "bob")
		c, msg := byokError(t, body)
		if code != http.StatusServiceUnavailable || c != string(sluice.CodeBindingUnavailable) ||
			!strings.Contains(msg, "only your own credentials") || !strings.Contains(msg, "credential bob-own is disabled (auth: upstream answered 401)") {
			t.Fatalf("bob's request %d with a bad own key = %d %s; want 503 upstream_binding_unavailable naming bob-own", i, code, body)
		}
		if strings.Contains(body, secretBob) {
			t.Fatalf("the answer quotes bob's secret: %s", body)
		}
	}
	b.wantServed(b.keyAcme, "", 1)
	b.wantServed(b.keyWeb, "", 1)
	b.wantCounts("bad key", map[string]int{"plat-a": 1, "acme-own": 1, "bob-own": 1, "plat-b": 0})

	creds := b.credentials(t)
	if c := creds["bob-own"]; c.Status != "disabled" || !strings.HasPrefix(c.Reason, "auth:") || c.Owner == nil ||
		*c.Owner != (admin.CredentialOwner{Tenant: "acme", User: "bob"}) {
		t.Errorf("bob-own in the admin view = %+v (owner %v); want disabled by auth, owned by acme/bob", c, c.Owner)
	}
	if c := creds["acme-own"]; c.Status != "active" || c.Owner == nil || *c.Owner != (admin.CredentialOwner{Tenant: "acme"}) {
		t.Errorf("acme-own in the admin view = %+v (owner %v); want active, owned by acme", c, c.Owner)
	}
	if c := creds["plat-a"]; c.Status != "active" || c.Owner != nil {
		t.Errorf("plat-a in the admin view = %+v; want active, the platform's", c)
	}
}

// The owners' requests cost the platform nothing, so they neither count
// in a platform cost budget (pools[].cost_budget_day) nor are held back by
// one that is spent: with 0.25 a request and a budget of 0.50, six owned
// requests leave room for two platform requests, the third is refused,
// and the owners go on.
func TestBYOKUsageIsNotInPlatformCostBudgets(t *testing.T) {
	b := newBYOK(t, `, cost_budget_day: "0.50"`)
	b.wantServed(b.keyAcme, "", 4)
	b.wantServed(b.keyAcme, "bob", 2)
	b.wantServed(b.keyWeb, "", 2)
	code, body := b.ask(b.keyWeb, "")
	if c, _ := byokError(t, body); code != http.StatusTooManyRequests || c != string(sluice.CodeBillingExhausted) {
		t.Fatalf("web past the pool's cost budget = %d %s; want 429 billing_quota_exhausted", code, body)
	}
	b.wantServed(b.keyAcme, "", 1)
	b.wantServed(b.keyAcme, "bob", 1)
	b.wantCounts("budget", map[string]int{"plat-a": 2, "acme-own": 5, "bob-own": 3, "plat-b": 0})
	var platform int64
	for _, rec := range b.usage(t, 11) {
		if rec.Billing != nil {
			platform += rec.Billing.Cost
		}
	}
	if platform != 500000 {
		t.Errorf("platform cost over every record = %d micros, want 500000 (the two platform requests)", platform)
	}
}

// A preferred key's policy orders the platform's accounts: its owner's
// requests, which run on their own key only, neither wait for the
// preferred account nor are recorded as its fallbacks.
func TestBYOKPreferredKeyIsNoFallback(t *testing.T) {
	b := newBYOK(t, "")
	b.wantServed(keyAcmePref, "", 2)
	b.wantCounts("preferred key", map[string]int{"plat-a": 0, "acme-own": 2, "bob-own": 0, "plat-b": 0})
	for _, rec := range b.usage(t, 2) {
		if x := rec.Executions[0]; len(x.Expected) != 0 || x.Fallback != "" {
			t.Errorf("request %s on %s: expected %v, fallback %q; want neither (its own key is no fallback)", rec.RequestID, x.CredentialID, x.Expected, x.Fallback)
		}
	}
}
