package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// newMessagesHarness serves three kinds of alias from the simulator (simA
// speaks both OpenAI chat and Anthropic Messages): claude-sim, Anthropic
// on an Anthropic endpoint (passthrough); claude-on-gpt, Anthropic on an
// OpenAI chat endpoint; gpt-on-claude, OpenAI chat on an Anthropic endpoint
// (both translated).
func newMessagesHarness(t *testing.T) *harness {
	t.Helper()
	return newProtocolHarness(t, "ep-claude", sluice.ProtocolAnthropic, `  - alias: claude-sim
    protocol: anthropic.messages
    deployments: [{model: claude-sonnet-4-6, endpoints: [ep-claude]}]
  - alias: claude-on-gpt
    protocol: anthropic.messages
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
  - alias: gpt-on-claude
    deployments: [{model: claude-sonnet-4-6, endpoints: [ep-claude]}]
`)
}

// newProtocolHarness is the test catalog plus an endpoint on simA that
// speaks protocol (its credential cred-… uses simA's first key) and the
// model aliases given as YAML list items.
func newProtocolHarness(t *testing.T, endpoint string, protocol sluice.Protocol, aliases string) *harness {
	t.Helper()
	return newHarnessWith(t, protocolTemplate(catalogTemplate, endpoint, protocol, aliases), "{backend: memory}", simulator.Options{})
}

// protocolTemplate is template (catalogTemplate or one of its variants)
// with what newProtocolHarness adds to it.
func protocolTemplate(template, endpoint string, protocol sluice.Protocol, aliases string) string {
	template = strings.Replace(template, "credentials:\n", fmt.Sprintf(`  - id: %[1]s
    base_url: %%[3]s
    protocols: [%[2]s]
credentials:
  - {id: cred-%[3]s, secret_env: UP_A1, endpoints: [%[1]s]}
`, endpoint, protocol, strings.TrimPrefix(endpoint, "ep-")), 1)
	return strings.Replace(template, "keys:\n", aliases+"keys:\n", 1)
}

// lastRequest is the simulator's record of the last request it received.
func lastRequest(t *testing.T, sim *simulator.Simulator) simulator.Recorded {
	t.Helper()
	reqs := sim.Requests()
	if len(reqs) == 0 {
		t.Fatal("the simulator received no request")
	}
	return reqs[len(reqs)-1]
}

func TestMessagesPassThroughSimulator(t *testing.T) {
	h := newMessagesHarness(t)
	body := `{"model":"claude-sim","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	status, _, got := postAnthropic(t, h, "/v1/messages?beta=true", keyWeb, body)
	var msg struct {
		Type    string `json:"type"`
		Model   string `json:"model"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(got), &msg); status != 200 || err != nil || msg.Type != "message" || len(msg.Content) == 0 {
		t.Fatalf("POST /v1/messages = %d %s, want a message", status, got)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/messages" || rec.Model != "claude-sonnet-4-6" || rec.Key != secretA1 ||
		rec.Header.Get("Anthropic-Beta") != "context-management-2025-06-27" {
		t.Errorf("simulator got %s model %q key %q beta %q; want /v1/messages, the deployment's model, the credential, the caller's beta",
			rec.Path, rec.Model, rec.Key, rec.Header.Get("Anthropic-Beta"))
	}

	status, _, got = postAnthropic(t, h, "/v1/messages", keyWeb, strings.Replace(body, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1))
	if status != 200 || !strings.HasPrefix(got, "event: message_start") || !strings.HasSuffix(strings.TrimSpace(got), `{"type":"message_stop"}`) {
		t.Errorf("stream = %d %q, want Anthropic events from message_start to message_stop", status, got)
	}

	status, _, got = postAnthropic(t, h, "/v1/messages/count_tokens", keyWeb, `{"model":"claude-sim","messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 || !strings.HasPrefix(got, `{"input_tokens":`) || lastRequest(t, h.simA).Path != "/v1/messages/count_tokens" {
		t.Errorf("count_tokens = %d %s, want the simulator's count", status, got)
	}
}

func TestMessagesCallerOnChatDeployment(t *testing.T) {
	h := newMessagesHarness(t)
	body := `{"model":"claude-on-gpt","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	status, _, got := postAnthropic(t, h, "/v1/messages", keyWeb, body)
	if status != 200 || !strings.Contains(got, `"type":"message"`) || !strings.Contains(got, `"usage"`) {
		t.Fatalf("POST /v1/messages on a chat model = %d %s, want an Anthropic message", status, got)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/chat/completions" || rec.Model != "gpt-4o-mini" {
		t.Errorf("simulator got %s model %q; want a chat completion of gpt-4o-mini", rec.Path, rec.Model)
	}

	status, _, got = postAnthropic(t, h, "/v1/messages", keyWeb, strings.Replace(body, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1))
	if status != 200 || !strings.HasPrefix(got, "event: message_start") || !strings.Contains(got, "event: message_stop") || strings.Contains(got, "[DONE]") {
		t.Errorf("stream on a chat model = %d %q, want Anthropic events", status, got)
	}
	// The chat stream's usage comes in its last chunk, which Sluice asked
	// for: the translator must see it even though the caller did not ask.
	if i := strings.Index(got, "event: message_delta"); i < 0 || !strings.Contains(got[i:], `"output_tokens":`) || strings.Contains(got[i:], `"output_tokens":0`) {
		t.Errorf("stream on a chat model = %q, want a message_delta with the output tokens", got)
	}

	// What chat cannot express is the caller's 400, and nothing is sent.
	before := len(h.simA.Requests())
	status, _, got = postAnthropic(t, h, "/v1/messages", keyWeb,
		`{"model":"claude-on-gpt","max_tokens":64,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`)
	var e anthropicError
	if err := json.Unmarshal([]byte(got), &e); err != nil || status != 400 || e.Error.Type != "invalid_request_error" ||
		e.Error.Code != "invalid_request" || len(h.simA.Requests()) != before {
		t.Errorf("server tool on a chat model = %d %s, want Anthropic's 400 invalid_request_error, nothing sent upstream", status, got)
	}

	status, _, got = postAnthropic(t, h, "/v1/messages/count_tokens", keyWeb, `{"model":"claude-on-gpt","messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 || !strings.HasPrefix(got, `{"input_tokens":`) || len(h.simA.Requests()) != before {
		t.Errorf("count_tokens on a chat model = %d %s, want Sluice's estimate without calling the upstream", status, got)
	}
}

func TestChatCallerOnMessagesDeployment(t *testing.T) {
	h := newMessagesHarness(t)
	sdk := h.sdk(keyWeb)
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-on-claude",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
	c, err := sdk.Chat.Completions.New(t.Context(), params)
	if err != nil || len(c.Choices) == 0 || c.Choices[0].Message.Content == "" || c.Usage.TotalTokens == 0 {
		t.Fatalf("chat completion on an Anthropic model = %+v, %v; want content and usage", c, err)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/messages" || rec.Model != "claude-sonnet-4-6" || rec.Key != secretA1 {
		t.Errorf("simulator got %s model %q key %q; want a Messages request of the deployment's model with the credential", rec.Path, rec.Model, rec.Key)
	}

	// A tool call and its result, translated both ways.
	tools := params
	tools.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	})}
	tools.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo? " + simulator.ToolWord)}
	c, err = sdk.Chat.Completions.New(t.Context(), tools)
	if err != nil || len(c.Choices) == 0 || len(c.Choices[0].Message.ToolCalls) != 1 || c.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("tool call on an Anthropic model = %+v, %v; want one tool call", c, err)
	}
	call := c.Choices[0].Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || !strings.Contains(call.Function.Arguments, `"city"`) || call.ID == "" {
		t.Errorf("tool call = %+v, want get_weather with a city", call)
	}
	tools.Messages = append(tools.Messages, c.Choices[0].Message.ToParam(), openai.ToolMessage("4 C", call.ID))
	if c, err = sdk.Chat.Completions.New(t.Context(), tools); err != nil || c.Choices[0].Message.Content == "" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("answer to the tool result = %+v, %v; want text", c, err)
	}

	stream := sdk.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" {
		t.Errorf("streamed chat completion on an Anthropic model = %+v, %v; want content", acc.ChatCompletion, err)
	}
}
