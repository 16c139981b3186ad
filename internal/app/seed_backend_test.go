package app_test

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// seedBackendTemplate is the seed configuration of a SaaS backend (issue
// #15): one upstream account of concurrency 2 with a 20s→180s cooldown
// that holds background back for a minute after a 429; a paid, a free and
// a background pool of one each; end users of one request at a time; task
// types that give the class by profile and send product parsing to the
// background pool; the profiles' pools for the rest. One trusted backend
// key asserts the end user and the profile of each request.
const seedBackendTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: dashscope, base_url: %s, protocols: [openai.chat]}
  - {id: unused, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: dashscope-main, max_inflight: 2, cooldown: {base: 20s, max: 180s}, background_pause: 60s}
credentials:
  - {id: ds-1, account: dashscope-main, secret_env: K1, endpoints: [dashscope]}
models:
  - alias: qwen
    deployments: [{model: qwen-plus, endpoints: [dashscope]}]
pools:
  - {id: paid, accounts: [dashscope-main], max_inflight: 1}
  - {id: free, accounts: [dashscope-main], max_inflight: 1}
  - {id: background, accounts: [dashscope-main], max_inflight: 1}
task_types:
  - {id: quick_parse, priority: {paid: interactive, free: standard}}
  - {id: heavy_parse, priority: {paid: interactive, free: standard}}
  - {id: section_generation, priority: {paid: interactive, default: standard}}
  - {id: product_parse, pool: background, priority: {default: background}}
profiles:
  - {id: free, pool: free, user_limits: {max_inflight: 1}, task_limits: {heavy_parse: {max_inflight: 1}}}
  - {id: paid, pool: paid, user_limits: {max_inflight: 1}}
keys:
  - id: backend
    tenant: app
    secret_env: KEY_BACKEND
    task: quick_parse
    tasks: [heavy_parse, section_generation, product_parse]
    assert: [user, profile]
`

func init() { testEnv["KEY_BACKEND"] = "sk-sluice-backend-KEY-3c5e7a9b1d2f" }

// TestSeedBackend runs the seed configuration end to end, on the memory
// and the Redis state: paid interactive work overtakes free and background
// work waiting for the account; a free user's second heavy parse waits
// while a paid user's runs; after a 429 the account serves standard work
// again once it has cooled, while background is refused for the pause.
func TestSeedBackend(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		// Work that holds the account while others queue answers after
		// hold (ample for a loaded machine to queue the rest), or stagger
		// later so that the slots free one at a time; the rest after 50ms.
		const hold, stagger, quick = 700 * time.Millisecond, 300 * time.Millisecond, 50 * time.Millisecond
		ds := upstreamKey("k1")
		h := newHarnessWith(t, seedBackendTemplate, state, simulator.Options{})
		answerAfter := func(d time.Duration) { h.simA.SetKey(ds, simulator.Behavior{Account: "dashscope-main", Latency: d}) }
		var wg sync.WaitGroup
		send := func(tag, task, profile, user string) {
			wg.Go(func() {
				hdr := map[string]string{"X-Sluice-Task": task, "X-Sluice-Profile": profile, "X-Sluice-User": user}
				if status, body := h.ask(t.Context(), chatCaller, testEnv["KEY_BACKEND"], "qwen", tag, hdr); status != http.StatusOK {
					t.Errorf("%s = %d %s, want 200", tag, status, body)
				}
			})
		}
		waiting := func(class string, n int) {
			eventually(t, 3*time.Second, class+" waiting", func() bool {
				return h.accounts(t)["dashscope-main"].WaitingByClass[class] == n
			})
		}

		// Paid interactive work overtakes: the account is full with a free
		// parse and a background one, a free and a background request wait;
		// a paid section generation arrives last and runs first.
		answerAfter(hold)
		send("free-1", "quick_parse", "free", "u1")
		eventually(t, 3*time.Second, "free-1 upstream", func() bool { return h.simA.InFlight() == 1 })
		answerAfter(hold + stagger)
		send("bg-1", "product_parse", "free", "u2")
		eventually(t, 3*time.Second, "account full", func() bool { return h.simA.InFlight() == 2 })
		answerAfter(quick)
		send("free-2", "quick_parse", "free", "u3")
		waiting("standard", 1)
		send("bg-2", "product_parse", "free", "u4")
		waiting("background", 1)
		send("paid-1", "section_generation", "paid", "u5")
		waiting("interactive", 1)
		if n := h.simA.InFlight(); n != 2 {
			t.Fatalf("the fill ended before the queue formed (%d in flight): the machine is too slow for this test", n)
		}
		wg.Wait()
		order := upstreamOrder(h.simA, "free-1", "bg-1", "free-2", "bg-2", "paid-1")
		if want := []string{"free-1", "bg-1", "paid-1", "free-2", "bg-2"}; !slices.Equal(order, want) {
			t.Errorf("upstream order = %v, want %v: the fill, then paid-1 (the first slot), then free-2 before bg-2 (the second)", order, want)
		}
		// Each usage record says the task type, the pool and the class
		// policy gave the request.
		ran := map[string]int{}
		for _, r := range h.usage(t, 5) {
			ran[r.TaskType+"/"+r.Pool+"/"+r.Priority]++
		}
		if want := map[string]int{"quick_parse/free/standard": 2, "product_parse/background/background": 2,
			"section_generation/paid/interactive": 1}; !maps.Equal(ran, want) {
			t.Errorf("usage records by task/pool/class = %v, want %v", ran, want)
		}

		// A free user's second heavy parse waits (one per user, one free
		// slot) while a paid user's runs beside the first.
		answerAfter(hold)
		send("heavy-free-1", "heavy_parse", "free", "u6")
		eventually(t, 3*time.Second, "heavy-free-1 upstream", func() bool { return h.simA.InFlight() == 1 })
		send("heavy-free-2", "heavy_parse", "free", "u6")
		waiting("standard", 1)
		send("heavy-paid", "heavy_parse", "paid", "u7")
		eventually(t, 3*time.Second, "heavy-paid beside heavy-free-1", func() bool { return h.simA.InFlight() == 2 })
		if got := upstreamOrder(h.simA, "heavy-free-2"); len(got) != 0 {
			t.Errorf("heavy-free-2 reached the upstream while heavy-free-1 ran")
		}
		answerAfter(quick)
		wg.Wait()
		if order := upstreamOrder(h.simA, "heavy-free-1", "heavy-free-2", "heavy-paid"); !slices.Equal(order, []string{"heavy-free-1", "heavy-paid", "heavy-free-2"}) {
			t.Errorf("upstream order = %v, want heavy-free-1, heavy-paid, then heavy-free-2", order)
		}

		// A 429 (retry-after 200ms): standard work runs again once the
		// account has cooled; background is refused for the pause.
		h.simA.SetKey(ds, simulator.Behavior{Account: "dashscope-main", FailStatus: http.StatusTooManyRequests, RetryAfter: 200 * time.Millisecond})
		send("limited", "quick_parse", "free", "u8")
		eventually(t, 3*time.Second, "the 429", func() bool { return upstreamStatus(h.simA, "limited") == http.StatusTooManyRequests })
		answerAfter(quick)
		wg.Wait() // limited waited for the cooldown, then ran as the probe
		dontWait := map[string]string{"X-Sluice-Max-Wait": "0", "X-Sluice-Task": "product_parse", "X-Sluice-Profile": "free", "X-Sluice-User": "u9"}
		resp := h.send(t.Context(), chatCaller, testEnv["KEY_BACKEND"], "qwen", false, chatCaller.body("qwen", "bg-paused", false), dontWait)
		if resp == nil {
			t.FailNow() // send reported why
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Told to come back when the pause ends, about a minute from now.
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "capacity_wait_timeout") || retry < 50 || retry > 60 {
			t.Errorf("background after a 429 = %d (Retry-After %q) %s, want 429 capacity_wait_timeout, Retry-After 50-60 s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		dontWait["X-Sluice-Task"] = "quick_parse"
		if status, body := h.ask(t.Context(), chatCaller, testEnv["KEY_BACKEND"], "qwen", "std-open", dontWait); status != http.StatusOK {
			t.Errorf("standard after the cooldown = %d %s, want 200", status, body)
		}
	})
}

// upstreamOrder returns the tags among tags in the order their requests
// reached sim.
func upstreamOrder(sim *simulator.Simulator, tags ...string) []string {
	var order []string
	for _, r := range sim.Requests() {
		for _, tag := range tags {
			if strings.Contains(string(r.Body), `"`+tag+`"`) {
				order = append(order, tag)
			}
		}
	}
	return order
}

// upstreamStatus is the status sim answered the last request tagged tag
// with (0 while pending or when none).
func upstreamStatus(sim *simulator.Simulator, tag string) int {
	status := 0
	for _, r := range sim.Requests() {
		if strings.Contains(string(r.Body), `"`+tag+`"`) {
			status = r.Status
		}
	}
	return status
}
