package app_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// cacheTemplate is catalogTemplate with a response cache of ttl on alias
// fast (backend and charge as cacheSettings adds).
func cacheTemplate(settings string) string {
	return strings.Replace(catalogTemplate, "  - alias: fast\n", "  - alias: fast\n    cache: "+settings+"\n", 1)
}

// deterministic is c's request for model with text at temperature 0.
func deterministic(c *callerSide, model, text string, stream bool) string {
	body := c.body(model, text, stream)
	if c.protocol == sluice.ProtocolGemini {
		return `{"generationConfig":{"temperature":0},` + body[1:]
	}
	return `{"temperature":0,` + body[1:]
}

// cacheAnswer is what one request got: status, X-Sluice-Cache, body.
type cacheAnswer struct {
	status int
	cache  string
	body   string
}

func (h *harness) cached(t *testing.T, c *callerSide, stream bool, body string, hdr map[string]string) cacheAnswer {
	t.Helper()
	resp := h.send(t.Context(), c, keyWeb, "fast", stream, body, hdr)
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return cacheAnswer{resp.StatusCode, resp.Header.Get("X-Sluice-Cache"), string(raw)}
}

// TestCacheReplaysAnswers: for a caller of each protocol, whole and
// streamed, a repeated deterministic request is answered from the cache
// with the first answer's exact bytes (a stream's events included), the
// upstream asked once; its record is a cache hit with no execution and no
// upstream tokens.
func TestCacheReplaysAnswers(t *testing.T) {
	h := newHarnessWith(t, cacheTemplate("{ttl: 1m}"), "{backend: memory}", simulator.Options{Default: simulator.Behavior{ChunkDelay: time.Millisecond}})
	records := 0
	for _, c := range []*callerSide{chatCaller, messagesCaller, responsesCaller, geminiCaller} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", c.protocol, stream), func(t *testing.T) {
				body := deterministic(c, "fast", fmt.Sprintf("cache me %s %v", c.protocol, stream), stream)
				asked := len(h.simA.Requests())
				first := h.cached(t, c, stream, body, nil)
				second := h.cached(t, c, stream, body, nil)
				if first.status != http.StatusOK || first.cache != "miss" {
					t.Fatalf("first: %d X-Sluice-Cache %q: %s; want 200 miss", first.status, first.cache, first.body)
				}
				if second.status != http.StatusOK || second.cache != "hit" || second.body != first.body {
					t.Errorf("second: %d X-Sluice-Cache %q\n%s\nwant 200 hit and the first answer's bytes\n%s", second.status, second.cache, second.body, first.body)
				}
				if stream && !strings.Contains(first.body, "data:") {
					t.Errorf("a streamed answer without events: %s", first.body)
				}
				if n := len(h.simA.Requests()) - asked; n != 1 {
					t.Errorf("the upstream was asked %d times, want 1", n)
				}
				records += 2
				recs := h.usage(t, records)
				hit := recs[len(recs)-1]
				if !hit.CacheHit || len(hit.Executions) != 0 || hit.Usage != (sluice.Usage{}) || hit.Status != http.StatusOK || hit.Stream != stream {
					t.Errorf("the hit's record: %+v; want a cache hit, no execution, no usage", hit)
				}
				if miss := recs[len(recs)-2]; miss.CacheHit || len(miss.Executions) != 1 {
					t.Errorf("the miss's record: %+v; want one execution, not a hit", miss)
				}
			})
		}
	}
	_, metrics := h.adminGet("/metrics")
	if !strings.Contains(metrics, `sluice_cache_requests_total{result="hit"} 8`) || !strings.Contains(metrics, `sluice_cache_requests_total{result="miss"} 8`) ||
		strings.Contains(metrics, "sluice_cache_stored_bytes_total 0\n") {
		t.Errorf("metrics: want 8 hits, 8 misses and bytes stored:\n%s", grepLines(metrics, "sluice_cache"))
	}
}

// TestCacheBypasses: a request that is not deterministic, or says
// Cache-Control: no-store, is neither answered from the cache nor stored;
// no-cache is not answered from it, but stores its answer; a stream and a
// whole answer are kept apart.
func TestCacheBypasses(t *testing.T) {
	h := newHarnessWith(t, cacheTemplate("{ttl: 1m}"), "{backend: memory}", simulator.Options{})
	c := chatCaller
	steps := []struct {
		name, body string
		stream     bool
		hdr        map[string]string
		want       string // X-Sluice-Cache
		upstream   bool
	}{
		{"not deterministic", c.body("fast", "warm", false), false, nil, "", true},
		{"not deterministic again", c.body("fast", "warm", false), false, nil, "", true},
		{"no-store", deterministic(c, "fast", "a", false), false, map[string]string{"Cache-Control": "no-store"}, "", true},
		{"after no-store: not stored", deterministic(c, "fast", "a", false), false, nil, "miss", true},
		{"no-cache: not read", deterministic(c, "fast", "a", false), false, map[string]string{"Cache-Control": "no-cache"}, "miss", true},
		{"the stream is apart", deterministic(c, "fast", "a", true), true, nil, "miss", true},
		{"no-cache stores", deterministic(c, "fast", "b", false), false, map[string]string{"Cache-Control": "max-age=0, No-Cache"}, "miss", true},
		{"what no-cache stored", deterministic(c, "fast", "b", false), false, nil, "hit", false},
		{"another user, same answer", `{"user":"someone","temperature":0,` + c.body("fast", "b", false)[1:], false, nil, "hit", false},
		{"another temperature", `{"temperature":0.5,` + c.body("fast", "b", false)[1:], false, nil, "", true},
	}
	for _, s := range steps {
		asked := len(h.simA.Requests())
		got := h.cached(t, c, s.stream, s.body, s.hdr)
		if got.status != http.StatusOK || got.cache != s.want || (len(h.simA.Requests()) > asked) != s.upstream {
			t.Errorf("%s: %d X-Sluice-Cache %q, upstream asked %d; want %q, upstream %v", s.name, got.status, got.cache,
				len(h.simA.Requests())-asked, s.want, s.upstream)
		}
	}
}

// TestCacheExpires: past its ttl an answer is not served.
func TestCacheExpires(t *testing.T) {
	h := newHarnessWith(t, cacheTemplate("{ttl: 1s}"), "{backend: memory}", simulator.Options{})
	body := deterministic(chatCaller, "fast", "expiring", false)
	for i, want := range []string{"miss", "hit"} {
		if got := h.cached(t, chatCaller, false, body, nil); got.cache != want {
			t.Fatalf("request %d: X-Sluice-Cache %q, want %q", i, got.cache, want)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	if got := h.cached(t, chatCaller, false, body, nil); got.cache != "miss" {
		t.Errorf("after the ttl: X-Sluice-Cache %q, want miss", got.cache)
	}
}

// TestCacheSingleFlight: 100 identical requests from 10 concurrent callers
// make one upstream call; the others wait for it and replay it.
func TestCacheSingleFlight(t *testing.T) {
	h := newHarnessWith(t, cacheTemplate("{ttl: 1m}"), "{backend: memory}",
		simulator.Options{Default: simulator.Behavior{Latency: 300 * time.Millisecond}})
	body := deterministic(chatCaller, "fast", "everyone asks this", false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	results := map[string]int{}
	for range 10 {
		wg.Go(func() {
			for range 10 {
				got := h.cached(t, chatCaller, false, body, nil)
				mu.Lock()
				answers[fmt.Sprint(got.status)+" "+got.body]++
				results[got.cache]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := len(h.simA.Requests()); n != 1 {
		t.Errorf("the upstream was asked %d times, want 1", n)
	}
	if len(answers) != 1 || results["miss"] != 1 || results["hit"] != 99 {
		t.Errorf("answers %d distinct, results %v; want one answer, 1 miss and 99 hits", len(answers), results)
	}
}

// TestCacheSharedOnRedis: two gateways on one Redis share the cache: an
// answer the first stored is the second's hit.
func TestCacheSharedOnRedis(t *testing.T) {
	url := testenv.Redis(t)
	state := redisState(url, testenv.RedisPrefix(t, url))
	h := newHarnessWith(t, cacheTemplate("{ttl: 1m, backend: redis}"), state, simulator.Options{Default: simulator.Behavior{ChunkDelay: time.Millisecond}})
	for _, stream := range []bool{false, true} {
		body := deterministic(messagesCaller, "fast", fmt.Sprintf("shared %v", stream), stream)
		first := h.cached(t, messagesCaller, stream, body, nil)
		h2 := &harness{t: t, gw: h.another(t), simA: h.simA}
		asked := len(h.simA.Requests())
		second := h2.cached(t, messagesCaller, stream, body, nil)
		if first.cache != "miss" || second.cache != "hit" || second.body != first.body || len(h.simA.Requests()) != asked {
			t.Errorf("stream=%v: first %q, second on another gateway %q (upstream asked %d more); want miss, then a hit with the same bytes\n%s\n%s",
				stream, first.cache, second.cache, len(h.simA.Requests())-asked, first.body, second.body)
		}
	}
}

// TestCacheHitCharges: a hit is billed as its cache's charge says, from the
// original answer's usage — full: what the miss was charged; none:
// nothing; cached_rate: every prompt token at the cache-read rate — and
// costs nothing upstream; what it saved is counted.
func TestCacheHitCharges(t *testing.T) {
	const (
		input, output, cacheRead = 1_000_000, 2_000_000, 100_000 // micro-units per million tokens
		costInput, costOutput    = 500_000, 1_000_000
	)
	for _, charge := range []string{"full", "none", "cached_rate"} {
		t.Run(charge, func(t *testing.T) {
			doc := strings.Replace(billingDoc("max_inflight: 4", "", ""), "  - alias: fast\n", "  - alias: fast\n    cache: {ttl: 1m, charge: "+charge+"}\n", 1)
			doc = strings.Replace(doc, `{alias: fast, request: "1.00",`, `{alias: fast, input: "1.00", output: "2.00", cache_read: "0.10",`, 1)
			doc = strings.Replace(doc, `{model: gpt-4o-mini, request: "0.25",`, `{model: gpt-4o-mini, input: "0.50", output: "1.00",`, 1)
			h := newHarnessWith(t, doc, "{backend: memory}", simulator.Options{})
			topUp(t, h, ledgerOf(t, h), "acme", "100.00")
			body := deterministic(chatCaller, "fast", "what does this cost", false)
			for _, want := range []string{"miss", "hit"} {
				if got := h.cached(t, chatCaller, false, body, nil); got.status != http.StatusOK || got.cache != want {
					t.Fatalf("%d X-Sluice-Cache %q: %s; want 200 %s", got.status, got.cache, got.body, want)
				}
			}
			recs := h.usage(t, 2)
			miss, hit := recs[0], recs[1]
			if miss.Billing == nil || hit.Billing == nil || !hit.CacheHit {
				t.Fatalf("records %+v, %+v: want both billed, the second a hit", miss, hit)
			}
			u := miss.Usage
			want := map[string]int64{
				"full":        miss.Billing.Price,
				"none":        0,
				"cached_rate": (u.PromptTokens*cacheRead + u.CompletionTokens*output) / 1_000_000,
			}[charge]
			if hit.Billing.Price != want || hit.Billing.Cost != 0 || hit.Billing.Account != "acme" {
				t.Errorf("hit charged %+v; want price %d (miss: %+v, usage %+v), cost 0", *hit.Billing, want, *miss.Billing, u)
			}
			if u.PromptTokens == 0 || miss.Billing.Price != (u.PromptTokens*input+u.CompletionTokens*output)/1_000_000 {
				t.Errorf("miss charged %+v for usage %+v", *miss.Billing, u)
			}
			saved := (u.PromptTokens*costInput + u.CompletionTokens*costOutput) / 1_000_000
			if _, metrics := h.adminGet("/metrics"); !strings.Contains(metrics, fmt.Sprintf(`sluice_cache_saved_micros_total{alias="fast"} %d`, saved)) {
				t.Errorf("want %d saved:\n%s", saved, grepLines(metrics, "sluice_cache"))
			}
		})
	}
}

// TestCacheFailedLeaderReleasesFollowers: when the call the followers wait
// for fails, they go upstream themselves rather than share its failure.
func TestCacheFailedLeaderReleasesFollowers(t *testing.T) {
	h := newHarnessWith(t, cacheTemplate("{ttl: 1m}"), "{backend: memory}", simulator.Options{})
	fail := simulator.Behavior{FailStatus: http.StatusBadRequest, Latency: 400 * time.Millisecond} // a request failure: no failover
	for _, s := range []string{secretA1, secretA2} {
		h.simA.SetKey(s, fail)
	}
	body := deterministic(chatCaller, "fast", "the leader fails", false)
	leader := make(chan cacheAnswer, 1)
	go func() { leader <- h.cached(t, chatCaller, false, body, nil) }()
	eventually(t, 2*time.Second, "the leader upstream", func() bool { return len(h.simA.Requests()) == 1 })
	for _, s := range []string{secretA1, secretA2} {
		h.simA.SetKey(s, simulator.Behavior{})
	}
	var wg sync.WaitGroup
	followers := make([]cacheAnswer, 4)
	for i := range followers {
		wg.Go(func() { followers[i] = h.cached(t, chatCaller, false, body, nil) })
	}
	if got := <-leader; got.status != http.StatusBadRequest {
		t.Errorf("leader: %d, want the upstream's 400", got.status)
	}
	wg.Wait()
	for i, f := range followers {
		if f.status != http.StatusOK || f.cache != "miss" {
			t.Errorf("follower %d: %d X-Sluice-Cache %q; want 200 miss (its own call)", i, f.status, f.cache)
		}
	}
	if n := len(h.simA.Requests()); n != 5 {
		t.Errorf("the upstream was asked %d times, want 5: the leader's and each follower's", n)
	}
}
