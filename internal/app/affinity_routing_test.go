package app_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// affinityTemplate: alias "fast" with strategy affinity over org-1..org-3
// (credentials k1..k3, all on simA), caps CAP1..CAP3. Catalog order puts
// org-2 first, so fallback_strategy fill-first (the order of requests
// without a seed) goes to org-2, while a new seed goes to the account
// with the most free room. Key "strict" is bound to org-2; key "pool"
// routes through pool p23 (org-2, org-3), itself with strategy affinity.
const affinityTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 5s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
  - {id: ep-b, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: org-2, max_inflight: CAP2, cooldown: {base: 3s, max: 5s}}
  - {id: org-1, max_inflight: CAP1, cooldown: {base: 3s, max: 5s}}
  - {id: org-3, max_inflight: CAP3, cooldown: {base: 3s, max: 5s}}
credentials:
  - {id: k2, account: org-2, secret_env: K2, endpoints: [ep-a]}
  - {id: k1, account: org-1, secret_env: K1, endpoints: [ep-a]}
  - {id: k3, account: org-3, secret_env: K3, endpoints: [ep-a]}
models:
  - alias: fast
    strategy: affinity
    affinity: {ttl: TTL, wait: {standard: 300ms}, fallback_strategy: fill-first}
    deployments:
      - {model: m, endpoints: [ep-a]}
pools:
  - {id: p23, accounts: [org-2, org-3], strategy: affinity, affinity: {ttl: TTL, wait: {standard: 300ms}}}
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
  - {id: strict, tenant: web, secret_env: KEY_BG, policy: {mode: strict, accounts: [org-2]}}
  - {id: pool, tenant: web, secret_env: KEY_UI, policy: {mode: pool, pool: p23}}
`

// newAffinityHarness starts a gateway on affinityTemplate with the caps of
// org-1, org-2 and org-3 and the bindings' ttl.
func newAffinityHarness(t *testing.T, state string, cap1, cap2, cap3 int, ttl string) *harness {
	t.Helper()
	tmpl := strings.NewReplacer("CAP1", fmt.Sprint(cap1), "CAP2", fmt.Sprint(cap2), "CAP3", fmt.Sprint(cap3), "TTL", ttl).Replace(affinityTemplate)
	return newHarnessWith(t, tmpl, state, simulator.Options{PromptCache: time.Minute})
}

// turn is one request of a conversation: its headers and body.
type turn struct {
	key    string
	header map[string]string
	body   string
}

// conversation builds the body of turn n (0 = the first) of a chat that
// starts with first: the history grows, the start stays.
func conversation(first string, n int) string {
	msgs := []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": first}}
	for i := range n {
		msgs = append(msgs, map[string]string{"role": "assistant", "content": fmt.Sprintf("answer %d", i)},
			map[string]string{"role": "user", "content": fmt.Sprintf("%s, turn %d", first, i+1)})
	}
	b, _ := json.Marshal(map[string]any{"model": "fast", "messages": msgs})
	return string(b)
}

// sendTurn posts tr and returns the status and the account that served it
// (from the credential simA saw with its body), "" when none did.
func (h *harness) sendTurn(tr turn) (int, string) {
	h.t.Helper()
	code, _, _ := h.postWith(h.t.Context(), "/v1/chat/completions", cmp.Or(tr.key, keyWeb), tr.body, tr.header)
	return code, h.servedBy(tr.body)
}

// servedBy is the account whose credential answered body (its alias
// rewritten to the deployment's model) with a 200 on simA ("" for none).
func (h *harness) servedBy(body string) string {
	body = strings.Replace(body, `"model":"fast"`, `"model":"m"`, 1)
	for _, r := range h.simA.Requests() {
		if r.Status == http.StatusOK && string(r.Body) == body {
			for _, id := range []string{"k1", "k2", "k3"} {
				if r.Key == upstreamKey(id) {
					return "org-" + id[1:]
				}
			}
		}
	}
	return ""
}

// metric returns the value of the metric line that starts with prefix
// (name and labels), "0" when there is none.
func (h *harness) metric(prefix string) string {
	_, m := h.adminGet("/metrics")
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			return line[len(prefix)+1:]
		}
	}
	return "0"
}

func session(id string) map[string]string { return map[string]string{"X-Session-Id": id} }

// A bound seed stays on its account, whichever way the conversation is
// named, and another account never sees a later turn.
func TestAffinityBoundSeedStays(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAffinityHarness(t, state, 4, 4, 4, "1h")
		conversations := map[string]func(n int) turn{
			"X-Session-Id": func(n int) turn { return turn{header: session("s-1"), body: conversation("hello from s-1", n)} },
			"Claude Code": func(n int) turn {
				return turn{header: map[string]string{"X-Claude-Code-Session-Id": "cc-1"}, body: conversation("hello cc", n)}
			},
			"Codex": func(n int) turn {
				return turn{header: map[string]string{"Session-Id": "codex-1"}, body: conversation("hello codex", n)}
			},
			"prompt_cache_key": func(n int) turn {
				return turn{body: strings.Replace(conversation("hello pck", n), `{"messages"`, `{"prompt_cache_key":"pck-1","messages"`, 1)}
			},
			"conversation content": func(n int) turn { return turn{body: conversation("no session named", n)} },
		}
		for name, next := range conversations {
			first := ""
			for n := range 6 {
				code, acct := h.sendTurn(next(n))
				if code != http.StatusOK || acct == "" {
					t.Fatalf("%s turn %d = %d on %q, want 200", name, n, code, acct)
				}
				if first == "" {
					first = acct
				} else if acct != first {
					t.Errorf("%s turn %d ran on %s, want %s where its first turn ran", name, n, acct, first)
				}
			}
		}
		if got := h.metric(`sluice_affinity_placements_total{alias="fast",outcome="hit"}`); got != "25" {
			t.Errorf("hits = %s, want 25 (5 conversations × 5 later turns)", got)
		}
	})
}

// Many sessions on one key spread over the accounts by free room: eight
// new sessions at once over three accounts with caps 2, 3, 3 all run at
// once, none waits, and each account gets as many as its cap.
func TestAffinitySessionsSpread(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAffinityHarness(t, state, 2, 3, 3, "1h")
		for _, id := range []string{"k1", "k2", "k3"} {
			h.simA.SetKey(upstreamKey(id), simulator.Behavior{Latency: 400 * time.Millisecond})
		}
		served := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 8 {
			wg.Go(func() {
				code, acct := h.sendTurn(turn{header: session(fmt.Sprint("spread-", i)), body: conversation(fmt.Sprint("spread ", i), 0)})
				if code != http.StatusOK {
					t.Errorf("session %d = %d", i, code)
				}
				mu.Lock()
				served[acct]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if d := time.Since(start); d > 750*time.Millisecond {
			t.Errorf("8 sessions over 8 free slots took %v: some waited", d)
		}
		if served["org-1"] != 2 || served["org-2"] != 3 || served["org-3"] != 3 {
			t.Errorf("sessions by account = %v, want org-1 2, org-2 3, org-3 3", served)
		}
	})
}

// A full sticky account is waited for up to the class's affinity wait
// (300ms), then the seed moves, and stays moved.
func TestAffinityFullAccountWaitedForThenMoves(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAffinityHarness(t, state, 2, 1, 1, "1h") // new seeds go to org-1: most room
		s := func(n int) turn { return turn{header: session("full"), body: conversation("full", n)} }
		if _, acct := h.sendTurn(s(0)); acct != "org-1" {
			t.Fatalf("first turn on %q, want org-1 (the most free room)", acct)
		}
		h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{Latency: 1500 * time.Millisecond})
		var wg sync.WaitGroup
		for n := 1; n <= 2; n++ { // fill org-1's two slots with the same session
			wg.Go(func() { h.sendTurn(s(n)) })
		}
		eventually(t, time.Second, "org-1 full", func() bool { return len(h.simA.Requests()) == 3 })
		start := time.Now()
		code, acct := h.sendTurn(s(3))
		waited := time.Since(start)
		if code != http.StatusOK || acct == "org-1" || acct == "" {
			t.Fatalf("turn 3 = %d on %q, want 200 elsewhere than the full org-1", code, acct)
		}
		if waited < 250*time.Millisecond || waited > 1100*time.Millisecond {
			t.Errorf("turn 3 answered after %v, want about the 300ms affinity wait", waited)
		}
		wg.Wait()
		h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{})
		for n := 4; n < 7; n++ {
			if _, again := h.sendTurn(s(n)); again != acct {
				t.Errorf("turn %d ran on %s, want %s: a moved seed never bounces back", n, again, acct)
			}
		}
		if got := h.metric(`sluice_affinity_moves_total{alias="fast",reason="no_room"}`); got != "1" {
			t.Errorf("moves for no_room = %s, want 1", got)
		}
	})
}

// A cooling sticky account is left at once, without waiting the affinity
// wait and without asking it.
func TestAffinityCoolingMovesAtOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAffinityHarness(t, state, 3, 1, 1, "1h")
		a := func(n int) turn { return turn{header: session("cool-a"), body: conversation("cool a", n)} }
		b := func(n int) turn { return turn{header: session("cool-b"), body: conversation("cool b", n)} }
		for _, first := range []turn{a(0), b(0)} {
			if _, acct := h.sendTurn(first); acct != "org-1" {
				t.Fatalf("first turn on %q, want org-1", acct)
			}
		}
		// b's next turn gets a 429 from org-1, which cools it for 3s; b moves.
		h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: 3 * time.Second})
		if code, acct := h.sendTurn(b(1)); code != http.StatusOK || acct == "org-1" || acct == "" {
			t.Fatalf("b's turn after the 429 = %d on %q, want 200 on another account", code, acct)
		}
		h.simA.SetKey(upstreamKey("k1"), simulator.Behavior{})
		asked := len(h.simA.Requests())
		start := time.Now()
		code, acct := h.sendTurn(a(1))
		if code != http.StatusOK || acct == "org-1" || acct == "" {
			t.Fatalf("a's turn while org-1 cools = %d on %q, want 200 on another account", code, acct)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("a's turn took %v: it waited for the cooling account", d)
		}
		if n := len(h.simA.Requests()) - asked; n != 1 {
			t.Errorf("simA got %d requests for a's turn, want 1 (the cooling account is not asked)", n)
		}
		if got := h.metric(`sluice_affinity_moves_total{alias="fast",reason="cooling"}`); got != "2" {
			t.Errorf("moves for cooling = %s, want 2 (b after its 429, a at once)", got)
		}
	})
}

// A binding lapses after its idle TTL: the seed is placed as new again,
// and the admin API no longer shows it; used within the TTL, it lives on.
func TestAffinityTTLExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAffinityHarness(t, state, 2, 1, 1, "500ms")
		s := func(n int) turn { return turn{header: session("ttl"), body: conversation("ttl", n)} }
		h.sendTurn(s(0))
		for n := 1; n <= 3; n++ {
			time.Sleep(300 * time.Millisecond) // 900ms in all: alive because used
			h.sendTurn(s(n))
		}
		code, body := h.adminGet("/admin/affinity?session=ttl&alias=fast&tenant=web")
		if code != http.StatusOK || !strings.Contains(body, `"account":"org-1"`) {
			t.Errorf("GET /admin/affinity = %d %s, want the binding to org-1", code, body)
		}
		time.Sleep(700 * time.Millisecond)
		if code, body := h.adminGet("/admin/affinity?session=ttl&alias=fast&tenant=web"); code != http.StatusNotFound {
			t.Errorf("GET /admin/affinity after the TTL = %d %s, want 404", code, body)
		}
		h.sendTurn(s(4))
		for outcome, want := range map[string]string{"new": "2", "hit": "3"} {
			if got := h.metric(`sluice_affinity_placements_total{alias="fast",outcome="` + outcome + `"}`); got != want {
				t.Errorf("placements %s = %s, want %s", outcome, got, want)
			}
		}
	})
}

// A strict or pool key binds only within its accounts: the seed of a
// strict key runs on its bound account, even when another has more room
// and holds the seed's binding; a pool key's seeds spread over the pool.
func TestAffinityWithinPolicy(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newAffinityHarness(t, state, 4, 1, 1, "1h")
		if _, acct := h.sendTurn(turn{header: session("shared"), body: conversation("shared", 0)}); acct != "org-1" {
			t.Fatalf("web key's first turn on %q, want org-1", acct)
		}
		for n := 1; n < 4; n++ {
			if code, acct := h.sendTurn(turn{key: keyStrict, header: session("shared"), body: conversation("shared", n)}); code != http.StatusOK || acct != "org-2" {
				t.Errorf("strict key's turn %d = %d on %q, want 200 on org-2 only", n, code, acct)
			}
		}
		for i := range 6 {
			code, acct := h.sendTurn(turn{key: keyPref, header: session(fmt.Sprint("pool-", i)), body: conversation(fmt.Sprint("pool ", i), 0)})
			if code != http.StatusOK || (acct != "org-2" && acct != "org-3") {
				t.Errorf("pool key's session %d = %d on %q, want org-2 or org-3", i, code, acct)
			}
			if _, again := h.sendTurn(turn{key: keyPref, header: session(fmt.Sprint("pool-", i)), body: conversation(fmt.Sprint("pool ", i), 1)}); again != acct {
				t.Errorf("pool key's session %d moved from %s to %s", i, acct, again)
			}
		}
	})
}

// A request that names no conversation (no session, no user turn) is
// ordered by the alias's fallback strategy (fill-first: org-2, catalog
// order), not placed by room (org-1), and counts no placement.
func TestAffinityNoSeedUsesFallbackStrategy(t *testing.T) {
	h := newAffinityHarness(t, "{backend: memory}", 4, 1, 1, "1h")
	for i := range 3 {
		body := fmt.Sprintf(`{"model":"fast","messages":[{"role":"assistant","content":"no user turn %d"}]}`, i)
		if code, acct := h.sendTurn(turn{body: body}); code != http.StatusOK || acct != "org-2" {
			t.Errorf("request %d without a seed = %d on %q, want 200 on org-2 (fill-first)", i, code, acct)
		}
	}
	if _, m := h.adminGet("/metrics"); strings.Contains(m, "sluice_affinity_placements_total{") {
		t.Errorf("placements counted for requests without a seed")
	}
}

// Two gateways on one Redis share bindings: a session bound on the first
// runs on the same account on the second, although the second, placing it
// anew, would choose another.
func TestAffinityReplicasShareBindings(t *testing.T) {
	url := testenv.Redis(t)
	state := redisState(url, testenv.RedisPrefix(t, url))
	one := newAffinityHarness(t, state, 3, 1, 1, "1h") // places new seeds on org-1
	two := newAffinityHarness(t, state, 1, 3, 1, "1h") // would place them on org-2
	if _, acct := one.sendTurn(turn{header: session("replicas"), body: conversation("replicas", 0)}); acct != "org-1" {
		t.Fatalf("first gateway placed the session on %q, want org-1", acct)
	}
	if _, acct := two.sendTurn(turn{header: session("replicas"), body: conversation("replicas", 1)}); acct != "org-1" {
		t.Errorf("second gateway ran the bound session on %q, want org-1 (the shared binding)", acct)
	}
	if _, acct := two.sendTurn(turn{header: session("fresh"), body: conversation("fresh", 0)}); acct != "org-2" {
		t.Errorf("second gateway placed a new session on %q, want org-2 (its most free room)", acct)
	}
}

// The input tokens read from the upstream's prompt cache are summed per
// account and alias: a conversation's second turn reads its first turn's
// prompt from the cache of the account that holds it.
func TestAffinityCachedTokensCounted(t *testing.T) {
	h := newAffinityHarness(t, "{backend: memory}", 4, 1, 1, "1h")
	for n := range 3 {
		if code, acct := h.sendTurn(turn{header: session("cached"), body: conversation("cached", n)}); code != http.StatusOK || acct != "org-1" {
			t.Fatalf("turn %d = %d on %q, want 200 on org-1", n, code, acct)
		}
	}
	if got := h.metric(`sluice_cached_input_tokens_total{account="org-1",alias="fast"}`); got == "0" {
		t.Errorf("no cached input tokens counted for org-1 after three turns of one conversation")
	}
	if _, m := h.adminGet("/metrics"); strings.Contains(m, `sluice_cached_input_tokens_total{account="org-2"`) {
		t.Errorf("cached tokens counted on an account that served nothing")
	}
}
