package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The safety rules of the request path, each shown end to end on a real
// gateway: what is counted against an endpoint, what an operator may
// remove, what is never sent twice, what is always charged.

// A 429 proves the endpoint is up: however many ep-a answers, its breaker
// stays closed and ep-a is still tried, while `failures` (3) endpoint
// failures in a row of any kind — a server error, a Cloudflare 52x page,
// Anthropic's 529 overloaded — open it, and then ep-a is not called.
func TestBreakerCountsEndpointFailuresNotRateLimits(t *testing.T) {
	const breakerState = `sluice_endpoint_breaker_state{endpoint="ep-a"}`
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, 520, 529} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			h := newHarnessWith(t, strings.Replace(catalogTemplate, "open: 300ms", "open: 1m", 1), "{backend: memory}", simulator.Options{})
			setA := func(b simulator.Behavior) { h.simA.SetKey(secretA1, b); h.simA.SetKey(secretA2, b) }
			serve := func() {
				t.Helper()
				if code, body := h.chatAs(keyWeb); code != http.StatusOK {
					t.Fatalf("chat = %d %s, want ep-b to serve it", code, body)
				}
			}
			setA(simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: time.Millisecond})
			for i := 0; len(h.simA.Requests()) < 8; i++ {
				if i == 500 {
					t.Fatalf("ep-a was called %d times in %d requests, want it tried again once each cooldown ends", len(h.simA.Requests()), i)
				}
				serve()
				if s := h.metric(breakerState); s != "0" {
					t.Fatalf("ep-a's breaker = %s after %d rate limits, want 0 (closed): a 429 is not an endpoint failure", s, len(h.simA.Requests()))
				}
			}

			setA(simulator.Behavior{FailStatus: status})
			before := len(h.simA.Requests())
			eventually(t, 20*time.Second, "ep-a's breaker open", func() bool {
				serve()
				return h.metric(breakerState) == "1"
			})
			if n := len(h.simA.Requests()) - before; n != 3 {
				t.Errorf("ep-a answered %d %ds before its breaker opened, want 3 (failures: 3)", n, status)
			}
			open := len(h.simA.Requests())
			for range 3 {
				serve()
			}
			if n := len(h.simA.Requests()); n != open {
				t.Errorf("ep-a called %d times while its breaker is open, want 0", n-open)
			}
		})
	}
}

// slowTemplate is catalogTemplate with timeouts long enough for a request
// held by the simulator's latency.
var slowTemplate = strings.Replace(catalogTemplate,
	"timeouts: {connect: 2s, first_byte: 500ms, idle: 500ms, total: 30s}",
	"timeouts: {connect: 2s, first_byte: 20s, idle: 20s, total: 30s}", 1)

// A credential holding a claim cannot be removed: not while active, not
// forced while active, not while draining unless forced. A forced remove of
// the draining credential takes it out of service at once; the request
// already running on it ends as it would have (its claim is released when
// it does) and nothing new is sent to it.
func TestRemovingACredentialThatHoldsClaims(t *testing.T) {
	h := newHarnessWith(t, slowTemplate, "{backend: memory}", simulator.Options{})
	hold := simulator.Behavior{Latency: 2 * time.Second}
	h.simA.SetKey(secretA1, hold)
	h.simA.SetKey(secretA2, hold)
	secrets := map[string]string{"cred-a1": secretA1, "cred-a2": secretA2}

	running := make(chan int, 1)
	go func() {
		code, _, _ := h.post(t.Context(), "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "only-a", 1))
		running <- code
	}()
	var held string
	eventually(t, 5*time.Second, "a credential of ep-a holds the request's claim", func() bool {
		for id, c := range h.credentials(t) {
			if c.InFlight == 1 {
				held = id
				return true
			}
		}
		return false
	})
	other := map[string]string{"cred-a1": "cred-a2", "cred-a2": "cred-a1"}[held]

	for _, step := range []struct {
		path string
		want int
	}{
		{"/remove", http.StatusConflict},
		{"/remove?force=true", http.StatusConflict}, // forced, but not draining
		{"/drain", http.StatusOK},
		{"/remove", http.StatusConflict}, // draining, but not forced
		{"/remove?force=true", http.StatusOK},
	} {
		code, body := h.adminWrite("/admin/credentials/"+held+step.path, "")
		if code != step.want {
			t.Fatalf("POST %s%s = %d %s, want %d", held, step.path, code, body, step.want)
		}
		if code == http.StatusConflict && !strings.Contains(body, "credential_claims_held") {
			t.Errorf("POST %s%s refused with %s, want credential_claims_held", held, step.path, body)
		}
	}
	if c := h.credentials(t)[held]; c.Status != "removed" || c.InFlight != 1 {
		t.Errorf("after the forced remove %s = %s with %d in flight, want removed with the running request's claim", held, c.Status, c.InFlight)
	}

	if code := <-running; code != http.StatusOK {
		t.Errorf("the request running on %s when it was removed = %d, want 200 (it runs to its end)", held, code)
	}
	h.wantNoClaims(t)

	h.simA.SetKey(secretA1, simulator.Behavior{})
	h.simA.SetKey(secretA2, simulator.Behavior{})
	calls := h.simA.Count(secrets[held])
	for range 4 {
		if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "only-a", 1)); code != http.StatusOK {
			t.Fatalf("chat after the remove = %d %s, want %s to serve it", code, body, other)
		}
	}
	if n := h.simA.Count(secrets[held]) - calls; n != 0 {
		t.Errorf("removed %s was sent %d requests, want 0", held, n)
	}
}

// A breaker opened on one replica is seen by the others: two gateways on
// one Redis, the first meets ep-a's failures and opens its breaker; the
// second, whose own ep-a is healthy and which served through it before,
// sends nothing more to ep-a for the open period.
func TestBreakerOpenedOnOneReplicaIsSeenByTheOthers(t *testing.T) {
	url := testenv.Redis(t)
	state := redisState(url, testenv.RedisPrefix(t, url))
	template := strings.Replace(catalogTemplate, "open: 300ms", "open: 1m", 1)
	one := newHarnessWith(t, template, state, simulator.Options{})
	two := newHarnessWith(t, template, state, simulator.Options{})
	serve := func(h *harness) {
		t.Helper()
		if code, body := h.chatAs(keyWeb); code != http.StatusOK {
			t.Fatalf("chat = %d %s, want 200", code, body)
		}
	}
	serve(two)
	if n := len(two.simA.Requests()); n != 1 {
		t.Fatalf("the second gateway sent %d requests to its ep-a, want 1 (ep-a is tier 0)", n)
	}

	failing := simulator.Behavior{FailStatus: http.StatusBadGateway}
	one.simA.SetKey(secretA1, failing)
	one.simA.SetKey(secretA2, failing)
	eventually(t, 10*time.Second, "the first gateway's breaker open", func() bool {
		serve(one)
		return one.metric(`sluice_endpoint_breaker_state{endpoint="ep-a"}`) == "1"
	})
	// The second learns it through the store; until then it may still use
	// ep-a. Once a request of its goes to ep-b, none may reach ep-a.
	eventually(t, 10*time.Second, "the second gateway serving from ep-b", func() bool {
		before := two.simB.Count(secretB1)
		serve(two)
		return two.simB.Count(secretB1) > before
	})
	seen := len(two.simA.Requests())
	for range 5 {
		serve(two)
	}
	if n := len(two.simA.Requests()) - seen; n != 0 {
		t.Errorf("the second gateway sent %d requests to ep-a while the first's breaker is open, want 0", n)
	}
	if s := two.metric(`sluice_endpoint_breaker_state{endpoint="ep-a"}`); s != "0" {
		t.Errorf("the second gateway's own breaker = %s, want 0: it skipped ep-a for the first's, not its own", s)
	}
}

// A job submit that may have created a job upstream — a 5xx answer, or no
// answer before the first-byte timeout — is never sent again, on this
// credential or another: the caller gets the error, the upstream saw one
// submit. (Every credential of the account behaves so: a second try, on
// whichever credential, would be a second submit.)
func TestAmbiguousJobSubmitIsNeverResubmitted(t *testing.T) {
	for _, tt := range []struct {
		name     string
		behavior simulator.Behavior
	}{
		{"server error", simulator.Behavior{Account: "org-v", FailStatus: http.StatusInternalServerError}},
		{"first-byte timeout", simulator.Behavior{Account: "org-v", Latency: 3 * time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newJobsHarness(t, strings.Replace(jobsTemplate, "first_byte: 5s", "first_byte: 1s", 1), "{backend: memory}")
			for _, id := range []string{"v1", "v2", "v3"} {
				h.simA.SetKey(upstreamKey(id), tt.behavior)
			}
			if code, body := call(t, "POST", h.url("/v1/videos"), "Bearer "+keyWeb, videoBody, nil); code < 500 {
				t.Errorf("submit = %d %s, want a 5xx error", code, body)
			}
			if n := len(submits(h.simA)); n != 1 {
				t.Errorf("the upstream saw %d submits, want 1: a submit that may have created a job is never resent", n)
			}
		})
	}
}

// A key rebound to another billing account while its request runs: that
// request is charged to the account and plan it was admitted under, the
// next one to the new account at its plan's price.
func TestKeyReboundMidRequestKeepsItsAdmittedAccount(t *testing.T) {
	premium := "    - id: premium\n      prices:\n        - {alias: fast, request: \"3.00\", effective_from: \"2020-01-01T00:00:00Z\"}\n"
	doc := billingDoc("max_inflight: 2}\n    - {id: beta, plan: premium", "", premium)
	h := newHarnessWith(t, doc, "{backend: memory}", simulator.Options{Default: simulator.Behavior{ChunkDelay: 100 * time.Millisecond}})
	l := ledgerOf(t, h)
	topUp(t, h, l, "acme", "100.00")
	topUp(t, h, l, "beta", "50.00") // another amount: a top-up's request ID is made of it

	stream := startStream(t, h, keyWeb)
	version := h.gw.Live().Load().Version
	h.template = strings.Replace(doc, "billing_account: acme", "billing_account: beta", 1)
	h.writeCatalog(h.catalog())
	eventually(t, 3*time.Second, "the key rebound to beta", func() bool { return h.gw.Live().Load().Version > version })
	if err := <-stream; err != nil {
		t.Fatalf("stream: %v", err)
	}
	if e := sdkErr(t, h, keyWeb, "fast"); e != nil {
		t.Fatal(e)
	}
	var charges []string
	eventually(t, 5*time.Second, "both records", func() bool {
		recs, err := l.ListUsage(t.Context(), ledger.UsageFilter{})
		charges = charges[:0]
		for _, r := range recs {
			if b := r.Billing; b != nil {
				charges = append(charges, fmt.Sprintf("%s/%s %s", b.Account, b.Plan, billing.Micros(b.Price)))
			}
		}
		return err == nil && len(charges) == 2
	})
	if want := []string{"acme/standard 1.00", "beta/premium 3.00"}; !slices.Equal(charges, want) {
		t.Errorf("charged %q, want %q: the running request keeps the account it was admitted under", charges, want)
	}
}

// A request that fails or is cancelled after its upstream reported usage
// is charged for it: an Anthropic stream reports its input tokens in
// message_start, so one that then ends with an error event, or whose
// caller leaves, is charged (the request price here), never recorded as
// unmeasured.
func TestStreamEndedEarlyAfterReportingUsageIsCharged(t *testing.T) {
	w := wire{"anthropic.messages", messagesCaller, messagesUpstream}
	for _, tt := range []struct {
		name     string
		behavior simulator.Behavior
		leave    bool // the caller leaves after the first events
		want     sluice.ExecutionStatus
	}{
		{"failed mid-stream", simulator.Behavior{ErrorAfter: 2}, false, sluice.ExecutionEndpoint},
		{"caller left", simulator.Behavior{ChunkDelay: 200 * time.Millisecond}, true, sluice.ExecutionCancelled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := w.harness(t, billingDoc("max_inflight: 2", "", ""), "{backend: memory}", simulator.Options{Default: tt.behavior})
			l := ledgerOf(t, h)
			topUp(t, h, l, "acme", "100.00")
			ctx, leave := context.WithCancel(t.Context())
			defer leave()
			resp := h.streamAs(ctx, w.caller, "fast")
			if tt.leave {
				rd := bufio.NewReader(resp.Body)
				for range 4 { // message_start and the first content events
					if _, err := rd.ReadString('\n'); err != nil {
						t.Fatal(err)
					}
				}
				leave()
			} else {
				readEvents(resp)
			}
			resp.Body.Close()
			var rec usageRecord
			eventually(t, 5*time.Second, "the stream's charge", func() bool {
				recs, err := l.ListUsage(t.Context(), ledger.UsageFilter{})
				if err != nil || len(recs) != 1 {
					return false
				}
				rec = recs[0]
				return true
			})
			if len(rec.Executions) != 1 || rec.Executions[0].Status != tt.want {
				t.Fatalf("executions %+v, want one that ended %s", rec.Executions, tt.want)
			}
			if rec.Usage.PromptTokens == 0 || rec.Billing == nil || rec.Billing.Unmeasured || rec.Billing.Price != int64(billing.Unit) {
				t.Errorf("record: status %d, usage %+v, charge %+v; want the input tokens message_start reported, charged 1.00", rec.Status, rec.Usage, rec.Billing)
			}
		})
	}
}
