package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// responsesBindingTemplate serves conv, a Responses alias whose one
// deployment rotates over two credentials on two accounts: cred-small
// (org-small, one slot, on simA) and cred-big (org-big, fifty slots, on
// simB). Each simulator keeps the responses it stored, so a turn that
// reaches the other account gets its 404.
const responsesBindingTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 2s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-ra, base_url: %s, protocols: [openai.responses]}
  - {id: ep-rb, base_url: %s, protocols: [openai.responses]}
accounts:
  - {id: org-small, max_inflight: 1}
  - {id: org-big, max_inflight: 50}
credentials:
  - {id: cred-small, account: org-small, secret_env: UP_A1, endpoints: [ep-ra]}
  - {id: cred-big, account: org-big, secret_env: UP_B1, endpoints: [ep-rb]}
models:
  - alias: conv
    protocol: openai.responses
    deployments: [{model: gpt-4o-mini, endpoints: [ep-ra, ep-rb]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
  - {id: other, tenant: other, secret_env: KEY_BG}
`

// responseTurn posts one Responses turn to the gateway at addr, continuing
// previous ("" for none), and returns the status, the new response's id
// and the body.
func responseTurn(t *testing.T, addr, key, previous string, stream bool) (int, string, string) {
	t.Helper()
	body := `{"model":"conv","input":"next turn","max_output_tokens":32`
	if previous != "" {
		body += `,"previous_response_id":"` + previous + `"`
	}
	if stream {
		body += `,"stream":true`
	}
	code, got := call(t, http.MethodPost, "http://"+addr+"/v1/responses", "Bearer "+key, body+"}", nil)
	if code != http.StatusOK {
		return code, "", got
	}
	if stream {
		// The stream opens with response.created, whose response has the id.
		got = got[strings.Index(got, "data: ")+len("data: "):]
		got = got[:strings.Index(got, "\n")]
	}
	var resp struct {
		ID       string `json:"id"`
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(got), &resp); err != nil {
		t.Fatalf("a turn's answer %s: %v", got, err)
	}
	return code, resp.ID + resp.Response.ID, got
}

// TestResponsesChainStaysOnItsAccount: a chain of turns linked by
// previous_response_id stays on the credential that stored the first
// response, though the alias rotates over two accounts and the other has
// far more room; another key naming the id gets a 404. With Redis, the
// turns alternate between two gateways on the same state.
func TestResponsesChainStaysOnItsAccount(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newHarnessWith(t, responsesBindingTemplate, state, simulator.Options{})
		gateways := []string{h.gw.Addr()}
		if strings.Contains(state, "redis") {
			gateways = append(gateways, h.another(t).Addr())
		}
		previous := ""
		for turn := range 5 {
			code, id, body := responseTurn(t, gateways[turn%len(gateways)], keyWeb, previous, turn%2 == 1)
			if code != http.StatusOK || id == "" {
				t.Fatalf("turn %d = %d %s, want 200 with a response id", turn+1, code, body)
			}
			previous = id
		}
		a, b := len(h.simA.Requests()), len(h.simB.Requests())
		if a*b != 0 || a+b != 5 {
			t.Errorf("turns on org-small %d, on org-big %d; want all five on one account", a, b)
		}
		code, _, body := responseTurn(t, gateways[0], testEnv["KEY_BG"], previous, false)
		if code != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
			t.Errorf("another key continuing the chain = %d %s, want 404 in OpenAI's envelope", code, body)
		}
		if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 5 {
			t.Errorf("the upstreams got %d requests, want 5: another key's turn is refused by Sluice", n)
		}
	})
}

// TestResponsesChainOnADisabledCredential: a turn continuing a response
// whose credential is disabled since is 503 upstream_binding_unavailable,
// not sent to the other account (whose upstream does not have it).
func TestResponsesChainOnADisabledCredential(t *testing.T) {
	h := newHarnessWith(t, responsesBindingTemplate, "{backend: memory}", simulator.Options{})
	code, id, body := responseTurn(t, h.gw.Addr(), keyWeb, "", false)
	if code != http.StatusOK {
		t.Fatalf("first turn = %d %s", code, body)
	}
	cred := "cred-small"
	if len(h.simB.Requests()) == 1 {
		cred = "cred-big"
	}
	h.adminPost(t, "/admin/credentials/"+cred+"/disable")
	code, _, body = responseTurn(t, h.gw.Addr(), keyWeb, id, false)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream_binding_unavailable") {
		t.Errorf("a turn on the disabled credential's response = %d %s, want 503 upstream_binding_unavailable", code, body)
	}
	// An id Sluice holds no binding for (created before it was in front,
	// or by a key of another tenant) is not found, and sent nowhere.
	before := len(h.simA.Requests()) + len(h.simB.Requests())
	code, _, body = responseTurn(t, h.gw.Addr(), keyWeb, "resp_"+fmt.Sprint(12345), false)
	if code != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("an unbound previous_response_id = %d %s, want Sluice's 404", code, body)
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != before {
		t.Errorf("an unbound previous_response_id reached the upstream %d times, want 0", n-before)
	}
}

// TestResponsesTurnWaitsForItsAccount: two turns continuing the same
// response at once, on an alias that fills org-small (one slot, answers
// slowly) before org-big: the second waits for org-small's slot rather
// than spill to org-big, whose upstream does not have the response.
func TestResponsesTurnWaitsForItsAccount(t *testing.T) {
	template := strings.Replace(responsesBindingTemplate, "deployments: [{model: gpt-4o-mini, endpoints: [ep-ra, ep-rb]}]",
		"strategy: fill-first\n    deployments: [{model: gpt-4o-mini, endpoints: [ep-ra, ep-rb]}]", 1)
	slow := simulator.Options{Keys: map[string]simulator.Behavior{secretA1: {Latency: 300 * time.Millisecond}}}
	h := newHarnessWith(t, template, "{backend: memory}", slow)
	code, id, body := responseTurn(t, h.gw.Addr(), keyWeb, "", false)
	if code != http.StatusOK || len(h.simA.Requests()) != 1 {
		t.Fatalf("first turn = %d %s, want 200 from org-small (filled first)", code, body)
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() { codes[i], _, _ = responseTurn(t, h.gw.Addr(), keyWeb, id, false) })
	}
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK || len(h.simA.Requests()) != 3 || len(h.simB.Requests()) != 0 {
		t.Errorf("two turns at once = %v, org-small got %d requests, org-big %d; want both 200 on org-small",
			codes, len(h.simA.Requests()), len(h.simB.Requests()))
	}
}

// TestStoredResponseFollowsItsBinding: GET and DELETE /v1/responses/{id}
// go to the credential that stored the response (the alias rotates over
// two); another key, an unknown id and a deleted response are 404.
func TestStoredResponseFollowsItsBinding(t *testing.T) {
	h := newHarnessWith(t, responsesBindingTemplate, "{backend: memory}", simulator.Options{})
	code, id, body := responseTurn(t, h.gw.Addr(), keyWeb, "", false)
	if code != http.StatusOK {
		t.Fatalf("turn = %d %s", code, body)
	}
	url := h.url("/v1/responses/" + id)
	for range 2 { // the second would reach the other account if it were routed
		var got struct{ ID, Object string }
		if code, body := call(t, http.MethodGet, url, "Bearer "+keyWeb, "", &got); code != http.StatusOK || got.ID != id || got.Object != "response" {
			t.Fatalf("GET the stored response = %d %s", code, body)
		}
	}
	if code, body := call(t, http.MethodGet, url, "Bearer "+testEnv["KEY_BG"], "", nil); code != http.StatusNotFound {
		t.Errorf("GET with another key = %d %s, want 404", code, body)
	}
	if code, body := call(t, http.MethodGet, h.url("/v1/responses/resp_unknown"), "Bearer "+keyWeb, "", nil); code != http.StatusNotFound {
		t.Errorf("GET an unknown id = %d %s, want 404", code, body)
	}
	if code, body := call(t, http.MethodDelete, url, "Bearer "+testEnv["KEY_BG"], "", nil); code != http.StatusNotFound {
		t.Errorf("DELETE with another key = %d %s, want 404", code, body)
	}
	if code, body := call(t, http.MethodDelete, url, "Bearer "+keyWeb, "", nil); code != http.StatusOK || !strings.Contains(body, `"deleted":true`) {
		t.Errorf("DELETE = %d %s, want the upstream's deletion", code, body)
	}
	if code, body := call(t, http.MethodGet, url, "Bearer "+keyWeb, "", nil); code != http.StatusNotFound {
		t.Errorf("GET after DELETE = %d %s, want 404", code, body)
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 4 || len(h.simA.Requests())*len(h.simB.Requests()) != 0 {
		t.Errorf("upstream calls: %d on org-small, %d on org-big; want the turn, two GETs and the DELETE on one",
			len(h.simA.Requests()), len(h.simB.Requests()))
	}
}
