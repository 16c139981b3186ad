package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// validationTemplate is accountsTemplate with one credential, k1, on
// account org-1, which takes one request at a time: alias one (chat,
// max_output_tokens 1000) and alias vectors (embeddings) run on it alone.
func validationTemplate() string {
	tpl := strings.Replace(accountsTemplate, "%smodels:", "  - {id: k1, account: org-1, secret_env: K1, endpoints: [ep-a], models: [m-one]}\nmodels:", 1)
	tpl = strings.Replace(tpl, "org-1, quota_scope: account, max_inflight: 2", "org-1, quota_scope: account, max_inflight: 1", 1)
	tpl = strings.Replace(tpl, "{id: ep-a, base_url: %s, protocols: [openai.chat]}", "{id: ep-a, base_url: %s, protocols: [openai.chat, openai.embeddings]}", 1)
	tpl = strings.Replace(tpl, "  - alias: one\n", "  - alias: one\n    max_output_tokens: 1000\n", 1)
	return strings.Replace(tpl, "keys:\n", "  - alias: vectors\n    protocol: openai.embeddings\n    deployments: [{model: m-one, endpoints: [ep-a]}]\nkeys:\n", 1)
}

// malformed is a request its upstream would refuse, and the field its
// refusal must name.
type malformed struct{ body, field string }

// malformedRequests are ten kinds of malformed request per caller
// protocol (embeddings: the kinds of empty input), for alias one.
var malformedRequests = map[*callerSide][]malformed{
	chatCaller: {
		{`{"model":"one"}`, "messages"},
		{`{"model":"one","messages":[]}`, "messages"},
		{`{"model":"one","messages":["hi"]}`, "messages[0]"},
		{`{"model":"one","messages":[{"role":"robot","content":"hi"}]}`, "messages[0].role"},
		{`{"model":"one","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_9","content":"ok"}]}`, "messages[1].tool_call_id"},
		{`{"model":"one","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"ok"}]}`, "messages[2].tool_call_id"},
		{`{"model":"one","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":"object"}}]}`, "tools[0].function.parameters"},
		{`{"model":"one","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"array"}}}]}`, "tools[0].function.parameters.type"},
		{`{"model":"one","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"one","max_completion_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens (or max_completion_tokens)"},
	},
	messagesCaller: {
		{`{"model":"one","max_tokens":64}`, "messages"},
		{`{"model":"one","max_tokens":64,"messages":[]}`, "messages"},
		{`{"model":"one","max_tokens":64,"messages":[7]}`, "messages[0]"},
		{`{"model":"one","max_tokens":64,"messages":[{"role":"system","content":"hi"}]}`, "messages[0].role"},
		{`{"model":"one","max_tokens":64,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]}`, "messages[0].content[0].tool_use_id"},
		{`{"model":"one","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2"}]}]}`, "messages[2].content[0].tool_use_id"},
		{`{"model":"one","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"properties":{}}}]}`, "tools[0].input_schema.type"},
		{`{"model":"one","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":[]}]}`, "tools[0].input_schema"},
		{`{"model":"one","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"one","max_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
	},
	responsesCaller: {
		{`{"model":"one","input":""}`, "input"},
		{`{"model":"one","input":[]}`, "input"},
		{`{"model":"one","input":["hi"]}`, "input[0]"},
		{`{"model":"one","input":[{"role":"tool","content":"hi"}]}`, "input[0].role"},
		{`{"model":"one","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`, "input[1].call_id"},
		{`{"model":"one","input":[{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]}`, "input[0].call_id"},
		{`{"model":"one","input":"hi","tools":[{"type":"function","name":"f","parameters":true}]}`, "tools[0].parameters"},
		{`{"model":"one","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"string"}}]}`, "tools[0].parameters.type"},
		{`{"model":"one","input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{`{"model":"one","input":"hi","max_output_tokens":4000}`, "max_output_tokens"},
	},
	geminiCaller: {
		{`{"generationConfig":{"temperature":0}}`, "contents"},
		{`{"contents":[]}`, "contents"},
		{`{"contents":{"parts":[{"text":"hi"}]}}`, "contents"},
		{`{"contents":["hi"]}`, "contents[0]"},
		{`{"contents":[{"role":"assistant","parts":[{"text":"hi"}]}]}`, "contents[0].role"},
		{`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`, "contents[0].parts[0].functionResponse"},
		{`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]},{"role":"model","parts":[{"functionCall":{"name":"f"}}]}]}`, "contents[0].parts[0].functionResponse"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":"OBJECT"}]}]}`, "tools[0].functionDeclarations[0].parameters"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"function_declarations":[{"name":"f","parametersJsonSchema":[]}]}]}`, "tools[0].functionDeclarations[0].parametersJsonSchema"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":4000}}`, "generationConfig.maxOutputTokens"},
	},
}

// withAccountFull is a harness on catalog whose only account, org-1 (of
// credential k1, cap 1), is held by a chat request to alias for the rest
// of the test: a request refused before it asks for a claim is answered
// at once, one that asks would wait.
func withAccountFull(t *testing.T, catalog, alias string) *harness {
	t.Helper()
	sim := simAccounts()
	sim.Keys[upstreamKey("k1")] = simulator.Behavior{Account: "org-1", Latency: 3 * time.Second}
	h := newHarnessWith(t, catalog, "{backend: memory}", sim)
	ctx, cancel := context.WithCancel(t.Context())
	held := make(chan int, 1)
	go func() {
		status, _, _ := h.post(ctx, "/v1/chat/completions", keyWeb, chatCaller.body(alias, "hold the account", false))
		held <- status
	}()
	eventually(t, 2*time.Second, "the held request upstream", func() bool { return h.simA.InFlight() == 1 })
	t.Cleanup(func() { cancel(); <-held })
	return h
}

// TestMalformedRequestsRefusedBeforeAnyClaim: with the only account of
// alias one full (a request held upstream, so a valid request would
// wait), each malformed request of each protocol is answered at once with
// 400 invalid_request in the caller's envelope naming the field, the
// simulator sees none of them, and each is counted by reason.
func TestMalformedRequestsRefusedBeforeAnyClaim(t *testing.T) {
	h := withAccountFull(t, validationTemplate(), "one")

	// The account is full: a valid request that will not wait is refused.
	if resp := h.send(t.Context(), chatCaller, keyWeb, "one", false, chatCaller.body("one", "hi", false), map[string]string{"X-Sluice-Max-Wait": "0"}); resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a valid request with X-Sluice-Max-Wait: 0 on the full account = %v, want 429", resp)
	} else {
		resp.Body.Close()
	}
	seen := len(h.simA.Requests())
	count := 0
	for _, c := range []*callerSide{chatCaller, messagesCaller, responsesCaller, geminiCaller} {
		for i, m := range malformedRequests[c] {
			t.Run(fmt.Sprintf("%s/%d", c.protocol, i), func(t *testing.T) {
				start := time.Now()
				resp := h.send(t.Context(), c, keyWeb, "one", false, m.body, nil)
				if resp == nil {
					t.FailNow()
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				code, ok := c.errorCode(string(raw))
				if resp.StatusCode != http.StatusBadRequest || !ok || code != "invalid_request" || !strings.Contains(string(raw), m.field+" ") {
					t.Errorf("%s = %d %s, want 400 invalid_request in the caller's envelope naming %s", m.body, resp.StatusCode, raw, m.field)
				}
				if took > time.Second {
					t.Errorf("%s answered after %v on a full account, want at once", m.body, took)
				}
			})
			count++
		}
	}
	for _, body := range []string{`{"model":"vectors"}`, `{"model":"vectors","input":""}`, `{"model":"vectors","input":[]}`, `{"model":"vectors","input":["a",""]}`, `{"model":"vectors","input":[[1],[]]}`} {
		if status, _, got := h.post(t.Context(), "/v1/embeddings", keyWeb, body); status != http.StatusBadRequest || !strings.Contains(got, `"invalid_request"`) || !strings.Contains(got, "input") {
			t.Errorf("%s = %d %s, want 400 invalid_request naming input", body, status, got)
		}
		count++
	}
	if n := len(h.simA.Requests()); n != seen {
		t.Errorf("the simulator received %d requests during the malformed ones, want none", n-seen)
	}
	_, metrics := h.adminGet("/metrics")
	total := 0
	for line := range strings.Lines(metrics) {
		var n int
		if strings.HasPrefix(line, "sluice_requests_invalid_total{") {
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n)
			total += n
		}
	}
	if total != count || !strings.Contains(metrics, `sluice_requests_invalid_total{protocol="anthropic.messages",reason="tool_result"} 2`) {
		t.Errorf("sluice_requests_invalid_total sums to %d, want %d, with 2 tool_result refusals of Messages:\n%s", total, count, metrics)
	}
}

// TestUntranslatableRefusedBeforeAnyClaim: a chat caller's request that
// the alias's only edge, an Anthropic Messages one, cannot express (more
// than one choice, log probabilities) is refused by its translator before
// a claim: 400 naming what cannot be carried, nothing upstream, counted as
// untranslatable; the same request without it is answered.
func TestUntranslatableRefusedBeforeAnyClaim(t *testing.T) {
	h := newMessagesHarness(t)
	for _, c := range []struct{ body, want string }{
		{`{"model":"gpt-on-claude","n":2,"messages":[{"role":"user","content":"hi"}]}`, "n \\u003e 1"},
		{`{"model":"gpt-on-claude","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`, "logprobs"},
	} {
		status, _, got := h.post(t.Context(), "/v1/chat/completions", keyWeb, c.body)
		if code, _ := openAIErrorCode(got); status != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(got, c.want) {
			t.Errorf("%s = %d %s, want 400 invalid_request saying %q", c.body, status, got, c.want)
		}
	}
	if n := len(h.simA.Requests()); n != 0 {
		t.Errorf("the simulator received %d requests, want none", n)
	}
	if _, metrics := h.adminGet("/metrics"); !strings.Contains(metrics, `sluice_requests_invalid_total{protocol="openai.chat",reason="untranslatable"} 2`) {
		t.Errorf("metrics lack 2 untranslatable chat requests:\n%s", metrics)
	}
	if status, _, got := h.post(t.Context(), "/v1/chat/completions", keyWeb, `{"model":"gpt-on-claude","n":1,"messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
		t.Errorf("n 1 = %d %s, want 200", status, got)
	}
}
