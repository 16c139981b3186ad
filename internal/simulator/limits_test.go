package simulator_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// hold starts requests with key that stay in flight (the key's Latency must
// be long) until the returned function cancels them and waits for them.
func hold(t *testing.T, sim *simulator.Simulator, srv *httptest.Server, keys ...string) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	before := sim.InFlight()
	for _, key := range keys {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
			req.Header.Set("Authorization", "Bearer "+key)
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("held request with %s answered %d, want it to stay in flight", key, resp.StatusCode)
			}
		})
	}
	eventually(t, "held requests in flight", func() bool { return sim.InFlight() == before+len(keys) })
	return func() {
		cancel()
		wg.Wait()
	}
}

func TestKeyMaxInflight(t *testing.T) {
	sim, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{
		"capped": {MaxInflight: 2, Latency: time.Minute, RetryAfter: 1500 * time.Millisecond},
		"other":  {},
	}})
	release := hold(t, sim, srv, "capped", "capped")

	resp := post(t, srv, "capped", "/v1/chat/completions", chatBody)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status over the cap = %d, want 429 (body %s)", resp.StatusCode, body)
	}
	e := decodeError(t, body)
	if e.Error.Type != "requests" || deref(e.Error.Code) != "rate_limit_exceeded" || e.Error.Param != nil ||
		!strings.HasPrefix(e.Error.Message, "Rate limit reached for gpt-4o-mini") {
		t.Errorf("429 body = %s, want OpenAI's requests rate_limit_exceeded", body)
	}
	wantHdr := map[string]string{
		"Retry-After":                    "2",
		"Retry-After-Ms":                 "1500",
		"X-Ratelimit-Limit-Requests":     "2",
		"X-Ratelimit-Remaining-Requests": "0",
		"X-Ratelimit-Reset-Requests":     "1.5s",
	}
	for k, want := range wantHdr {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no x-request-id on the 429")
	}
	if got := sim.InFlight(); got != 2 {
		t.Errorf("InFlight() = %d, want 2: rejected requests don't count", got)
	}

	// The cap is per key: another key is unaffected.
	if resp := post(t, srv, "other", "/v1/chat/completions", chatBody); resp.StatusCode != 200 {
		t.Errorf("other key status = %d, want 200", resp.StatusCode)
	}

	release()
	eventually(t, "held requests to end", func() bool { return sim.InFlight() == 0 })
	if got := sim.MaxInFlight(""); got != 3 {
		t.Errorf("MaxInFlight(\"\") = %d, want 3: two held plus the other key's", got)
	}
	if got := sim.Cancelled(); got != 2 {
		t.Errorf("Cancelled() = %d, want 2", got)
	}
	if got := sim.Count("capped"); got != 3 {
		t.Errorf("Count(capped) = %d, want 3", got)
	}
}

func TestAccountMaxInflightIsShared(t *testing.T) {
	slow := func(acct string) simulator.Behavior {
		return simulator.Behavior{Account: acct, Latency: time.Minute}
	}
	sim, srv := start(t, simulator.Options{
		Keys:     map[string]simulator.Behavior{"a1": slow("acct"), "a2": slow("acct"), "b1": slow("solo")},
		Accounts: map[string]simulator.AccountLimits{"acct": {MaxInflight: 2, RetryAfter: 3 * time.Second}},
	})
	release := hold(t, sim, srv, "a1", "a2", "b1")

	for _, key := range []string{"a1", "a2"} {
		resp := post(t, srv, key, "/v1/chat/completions", chatBody)
		body := readAll(t, resp)
		if resp.StatusCode != 429 || deref(decodeError(t, body).Error.Code) != "rate_limit_exceeded" {
			t.Errorf("%s over the account cap = %d %s, want 429 rate_limit_exceeded", key, resp.StatusCode, body)
		}
		if got := resp.Header.Get("Retry-After"); got != "3" {
			t.Errorf("%s Retry-After = %q, want the account's 3", key, got)
		}
		if got := resp.Header.Get("X-Ratelimit-Limit-Requests"); got != "2" {
			t.Errorf("%s x-ratelimit-limit-requests = %q, want 2", key, got)
		}
	}
	release()
	eventually(t, "held requests to end", func() bool { return sim.InFlight() == 0 })

	for acct, want := range map[string]int{"acct": 2, "solo": 1, "": 3, "none": 0} {
		if got := sim.MaxInFlight(acct); got != want {
			t.Errorf("MaxInFlight(%q) = %d, want %d", acct, got, want)
		}
	}
}

func TestRateLimitHeadersOnSuccess(t *testing.T) {
	_, srv := start(t, simulator.Options{Default: simulator.Behavior{MaxInflight: 5}})
	resp := post(t, srv, "k", "/v1/chat/completions", chatBody)
	readAll(t, resp)
	if got := resp.Header.Get("X-Ratelimit-Limit-Requests"); got != "5" {
		t.Errorf("x-ratelimit-limit-requests = %q, want 5", got)
	}
	if got := resp.Header.Get("X-Ratelimit-Remaining-Requests"); got != "4" {
		t.Errorf("x-ratelimit-remaining-requests = %q, want 4 (this request holds one)", got)
	}
}
