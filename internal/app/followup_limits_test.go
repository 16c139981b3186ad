package app_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// followUpTemplate is responsesBindingTemplate filling org-small first,
// with key limited (tenant lim): five requests a minute, Responses only.
var followUpTemplate = strings.NewReplacer(
	"deployments: [{model: gpt-4o-mini, endpoints: [ep-ra, ep-rb]}]",
	"strategy: fill-first\n    deployments: [{model: gpt-4o-mini, endpoints: [ep-ra, ep-rb]}]",
	"keys:\n", "keys:\n  - {id: limited, tenant: lim, secret_env: KEY_UI, paths: [responses], limits: {rpm: 5}}\n",
).Replace(responsesBindingTemplate)

// TestFollowUpsCountAgainstTheKeysLimits (issue 24 item 10): GETs of a
// stored response are the key's requests: a key of five requests a minute
// that sends hundreds at once gets a handful through, the rest 429, and
// the upstream sees only those let through.
func TestFollowUpsCountAgainstTheKeysLimits(t *testing.T) {
	h := newHarnessWith(t, followUpTemplate, "{backend: memory}", simulator.Options{})
	code, id, body := responseTurn(t, h.gw.Addr(), testEnv["KEY_UI"], "", false)
	if code != http.StatusOK {
		t.Fatalf("creating a response = %d %s", code, body)
	}
	const gets = 600
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range gets {
		wg.Go(func() {
			switch code, _ := call(t, http.MethodGet, h.url("/v1/responses/"+id), "Bearer "+testEnv["KEY_UI"], "", nil); code {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d GETs in %v: %d answered, %d refused with 429", gets, took.Round(time.Millisecond), ok.Load(), limited.Load())
	// Five a minute: the burst (less the creation), and one more every
	// 12s should the GETs take that long (a loaded machine).
	allowed := 4 + int64(took/(12*time.Second))
	if ok.Load() > allowed || ok.Load()+limited.Load() != gets {
		t.Errorf("%d GETs of a key of 5 rpm (one used to create) = %d 200, %d 429; want at most %d answered, the rest 429",
			gets, ok.Load(), limited.Load(), allowed)
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); int64(n) != 1+ok.Load() {
		t.Errorf("the upstream got %d requests, want the creation and the %d GETs let through", n, ok.Load())
	}
}

// TestFollowUpHoldsAnAccountSlot (issue 24 item 10): a follow-up takes a
// slot of its account's max_inflight: GETs of a response stored on
// org-small (one slot; every call there takes 300ms) wait while a turn
// continuing it runs there, and for each other, so the upstream never has
// two of them at once.
func TestFollowUpHoldsAnAccountSlot(t *testing.T) {
	const latency = 300 * time.Millisecond
	slow := simulator.Options{Keys: map[string]simulator.Behavior{secretA1: {Latency: latency}}}
	h := newHarnessWith(t, followUpTemplate, "{backend: memory}", slow)
	code, id, body := responseTurn(t, h.gw.Addr(), keyWeb, "", false)
	if code != http.StatusOK || len(h.simA.Requests()) != 1 {
		t.Fatalf("creating a response = %d %s, want 200 from org-small", code, body)
	}
	var wg sync.WaitGroup
	wg.Go(func() { responseTurn(t, h.gw.Addr(), keyWeb, id, false) })
	time.Sleep(50 * time.Millisecond) // the turn holds org-small's slot
	for range 2 {
		wg.Go(func() {
			if code, body := call(t, http.MethodGet, h.url("/v1/responses/"+id), "Bearer "+keyWeb, "", nil); code != http.StatusOK {
				t.Errorf("GET = %d %s, want 200 once the slot is free", code, body)
			}
		})
	}
	wg.Wait()
	reqs := h.simA.Requests()[1:] // the turn and the two GETs, by arrival
	if len(reqs) != 3 {
		t.Fatalf("org-small got %d more requests, want the turn and two GETs", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		if gap := reqs[i].At.Sub(reqs[i-1].At); gap < latency-50*time.Millisecond {
			t.Errorf("%s %s reached org-small %v after the call before it, want once that one ended (%v): one slot",
				reqs[i].Path, reqs[i].Model, gap.Round(time.Millisecond), latency)
		}
	}
}

// TestFollowUpsRespectTheKeysPaths (issue 24 item 10): a key no longer
// scoped to Responses may not follow up the responses it created.
func TestFollowUpsRespectTheKeysPaths(t *testing.T) {
	h := newHarnessWith(t, followUpTemplate, "{backend: memory}", simulator.Options{})
	code, id, body := responseTurn(t, h.gw.Addr(), testEnv["KEY_UI"], "", false)
	if code != http.StatusOK {
		t.Fatalf("creating a response = %d %s", code, body)
	}
	h.template = strings.Replace(h.template, "paths: [responses]", "paths: [chat]", 1)
	h.writeCatalog(h.catalog())
	var got string
	eventually(t, 5*time.Second, "the key's paths reloaded", func() bool {
		code, got = call(t, http.MethodGet, h.url("/v1/responses/"+id), "Bearer "+testEnv["KEY_UI"], "", nil)
		return code == http.StatusForbidden
	})
	if !strings.Contains(got, "access_scope_denied") {
		t.Errorf("GET by a key scoped to chat = %s, want access_scope_denied", got)
	}
	before := len(h.simA.Requests()) + len(h.simB.Requests())
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if code, body := call(t, method, h.url("/v1/responses/"+id), "Bearer "+testEnv["KEY_UI"], "", nil); code != http.StatusForbidden {
			t.Errorf("%s by a key scoped to chat = %d %s, want 403", method, code, body)
		}
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()) - before; n != 0 {
		t.Errorf("the upstream got %d follow-ups of a key scoped to chat, want 0", n)
	}
}
