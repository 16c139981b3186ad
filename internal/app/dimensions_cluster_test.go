package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestLimitsHoldAcrossTwoGatewaysOnOneRedis: two gateways share one Redis;
// a key limited to one call in flight and an alias limited to two keep
// their limits whichever gateway the calls go through.
func TestLimitsHoldAcrossTwoGatewaysOnOneRedis(t *testing.T) {
	url := testenv.Redis(t)
	state := redisState(url, testenv.RedisPrefix(t, url))
	tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
	tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, limits: {max_inflight: 1}}\n", 1)
	tpl = strings.Replace(tpl, "  - alias: two\n", "  - alias: two\n    limits: {max_inflight: 2}\n", 1)
	h := newHarnessWith(t, tpl, state, simAccounts())
	second := h.another(t)
	gateways := []string{h.gw.Addr(), second.Addr()}

	burst := func(key, model string, n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+gateways[i%2]+"/v1/chat/completions",
					strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("request: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("request through %s = %d", gateways[i%2], resp.StatusCode)
				}
			})
		}
		wg.Wait()
	}
	burst(testEnv["KEY_BG"], "two", 6)
	if peak := h.simA.MaxInFlight(""); peak != 1 {
		t.Errorf("key limited to 1, through two gateways: upstream peak %d, want 1", peak)
	}
	h.simA.Reset()
	burst(keyWeb, "two", 8) // org-1 and org-2 would take 4 at once
	if peak := h.simA.MaxInFlight(""); peak != 2 {
		t.Errorf("alias limited to 2, through two gateways: upstream peak %d, want 2", peak)
	}
}

// TestHiddenCapIsLearned: the catalog allows org-1 four calls in flight but
// the provider refuses a third. After the first refusals Sluice keeps to
// two: the later calls see no 429.
func TestHiddenCapIsLearned(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
		tpl = strings.Replace(tpl, "{id: org-1, quota_scope: account, max_inflight: 2, cooldown: {base: 300ms, max: 2s}}",
			"{id: org-1, quota_scope: account, max_inflight: 4, cooldown: {base: 50ms, max: 500ms}}", 1)
		opts := simAccounts() // org-1's hidden cap stays 2
		for _, id := range []string{"k1", "k2", "k3"} {
			opts.Keys[upstreamKey(id)] = simulator.Behavior{Account: "org-1", Latency: 50 * time.Millisecond, RetryAfter: 50 * time.Millisecond}
		}
		h := newHarnessWith(t, tpl, state, opts)
		allOK(t, h.burst(t.Context(), 40, "one"))
		recs := h.simA.Requests()
		late := 0
		for _, r := range recs[len(recs)/2:] {
			if r.Status == http.StatusTooManyRequests {
				late++
			}
		}
		if total := h.upstream429s(); total > 6 || late != 0 {
			t.Errorf("upstream 429s: %d in all, %d in the second half of %d calls; want a few while learning, none after", total, late, len(recs))
		}
		// A claim is released just after its answer is written: the last
		// ones may still be on their way to the store as the burst returns.
		eventually(t, 2*time.Second, "org-1 with no claims left after the burst", func() bool { return h.accounts(t)["org-1"].InFlight == 0 })
	})
}

// TestPriorityOrderHoldsAcrossTwoGateways: background requests wait on one
// gateway, an interactive one arrives later on the other; when the account
// frees a slot, the interactive one is served first.
func TestPriorityOrderHoldsAcrossTwoGateways(t *testing.T) {
	url := testenv.Redis(t)
	state := redisState(url, testenv.RedisPrefix(t, url))
	tpl := strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)
	tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: bg, tenant: batch, secret_env: KEY_BG, priority: background}\n  - {id: ui, tenant: web, secret_env: KEY_UI, priority: interactive}\n", 1)
	h := newHarnessWith(t, tpl, state, simAccounts())
	for _, id := range []string{"k1", "k2", "k3"} {
		h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-1", Latency: 300 * time.Millisecond})
	}
	second := h.another(t)
	send := func(addr, key, tag string) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"one","messages":[{"role":"user","content":"`+tag+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %v %v", tag, resp, err)
			return
		}
		resp.Body.Close()
	}
	var wg sync.WaitGroup
	for _, tag := range []string{"fill-1", "fill-2"} {
		wg.Go(func() { send(h.gw.Addr(), keyWeb, tag) })
	}
	eventually(t, 2*time.Second, "org-1 full", func() bool { return h.simA.InFlight() == 2 })
	for _, tag := range []string{"bg-1", "bg-2", "bg-3"} {
		wg.Go(func() { send(second.Addr(), testEnv["KEY_BG"], tag) })
	}
	eventually(t, 2*time.Second, "background queued", func() bool { return h.accounts(t)["org-1"].WaitingByClass["background"] == 3 })
	wg.Go(func() { send(h.gw.Addr(), testEnv["KEY_UI"], "ui-1") })
	wg.Wait()
	var order []string
	for _, r := range h.simA.Requests() {
		order = append(order, tagOf(r.Body))
	}
	if i := slices.Index(order, "ui-1"); i < 2 || i > 3 {
		t.Errorf("upstream order = %v, want ui-1 right after the fill, ahead of the background waiting on the other gateway", order)
	}
}

// tagOf is the content of a request's single user message.
func tagOf(body []byte) string {
	var b struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Messages) == 0 {
		return ""
	}
	return b.Messages[0].Content
}
