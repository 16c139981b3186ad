package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sluicehq/sluice/internal/simulator"
)

// newMatrixHarness serves, from simA, aliases whose caller and upstream
// protocols meet only through the hub (chained translators): an Anthropic
// caller on a Gemini and on a Responses endpoint, a Responses caller on an
// Anthropic one; and embeddings across OpenAI and Gemini both ways.
func newMatrixHarness(t *testing.T) *harness {
	t.Helper()
	template := strings.Replace(catalogTemplate, "credentials:\n", `  - id: ep-gem
    base_url: %[3]s
    protocols: [gemini.generate, gemini.embed]
  - id: ep-resp
    base_url: %[3]s
    protocols: [openai.responses]
  - id: ep-msg
    base_url: %[3]s
    protocols: [anthropic.messages]
credentials:
  - {id: cred-gem, secret_env: UP_A1, endpoints: [ep-gem]}
  - {id: cred-resp, secret_env: UP_A1, endpoints: [ep-resp]}
  - {id: cred-msg, secret_env: UP_A1, endpoints: [ep-msg]}
`, 1)
	template = strings.Replace(template, "keys:\n", `  - alias: claude-on-gem
    protocol: anthropic.messages
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-gem]}]
  - alias: claude-on-resp
    protocol: anthropic.messages
    deployments: [{model: gpt-5.4-mini, endpoints: [ep-resp]}]
  - alias: resp-on-claude
    protocol: openai.responses
    deployments: [{model: claude-sonnet-4-6, endpoints: [ep-msg]}]
  - alias: embed-on-gem
    protocol: openai.embeddings
    deployments: [{model: gemini-embedding-001, endpoints: [ep-gem]}]
  - alias: gem-embed-on-openai
    protocol: gemini.embed
    deployments: [{model: text-embedding-3-small, endpoints: [ep-a]}]
keys:
`, 1)
	return newHarnessWith(t, template, "{backend: memory}", simulator.Options{})
}

// The Anthropic SDK on a Gemini and on a Responses model, each reached
// through the hub: a message, a stream with the same text and usage, a
// count answered by Sluice's estimate with nothing sent, and a streamed
// tool call whose result goes back paired with it.
func TestAnthropicSDKOnChainedUpstreams(t *testing.T) {
	h := newMatrixHarness(t)
	client := anthropicSDK(h, keyWeb)
	upstreams := []struct {
		alias, path string
		// sentBack checks the upstream request that carried the tool result.
		sentBack func(t *testing.T, body []byte, callID string)
	}{
		{"claude-on-gem", "/v1beta/models/gemini-2.5-flash:", func(t *testing.T, body []byte, callID string) {
			var sent struct {
				Contents []struct {
					Parts []struct {
						ThoughtSignature string                     `json:"thoughtSignature"`
						FunctionCall     *struct{ ID, Name string } `json:"functionCall"`
						FunctionResponse *struct{ ID, Name string } `json:"functionResponse"`
						Text             string                     `json:"text"`
					} `json:"parts"`
				} `json:"contents"`
			}
			if err := json.Unmarshal(body, &sent); err != nil || len(sent.Contents) != 3 {
				t.Fatalf("Gemini got %s, %v; want the question, the call and its result", body, err)
			}
			fc, fr := sent.Contents[1].Parts[0], sent.Contents[2].Parts[0]
			if fc.FunctionCall == nil || fr.FunctionResponse == nil || fc.ThoughtSignature == "" || fc.FunctionCall.ID != fr.FunctionResponse.ID ||
				fr.FunctionResponse.Name != "get_weather" || !strings.HasPrefix(callID, fc.FunctionCall.ID+"__thought__") {
				t.Errorf("the call and its result reached Gemini as %+v and %+v; want one id, the name, and the call's thought signature back", fc, fr)
			}
		}},
		{"claude-on-resp", "/v1/responses", func(t *testing.T, body []byte, callID string) {
			var sent struct {
				Store *bool `json:"store"`
				Input []struct {
					Type   string `json:"type"`
					CallID string `json:"call_id"`
					Name   string `json:"name"`
				} `json:"input"`
			}
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatal(err)
			}
			var call, output bool
			for _, it := range sent.Input {
				call = call || it.Type == "function_call" && it.CallID == callID && it.Name == "get_weather"
				output = output || it.Type == "function_call_output" && it.CallID == callID
			}
			if !call || !output || sent.Store == nil || *sent.Store {
				t.Errorf("Responses got %s; want the call and its output under call id %s, store false", body, callID)
			}
		}},
	}
	for _, up := range upstreams {
		t.Run(up.alias, func(t *testing.T) {
			ctx := t.Context()
			params := anthropic.MessageNewParams{
				Model: anthropic.Model(up.alias), MaxTokens: 256,
				System:   []anthropic.TextBlockParam{{Text: "Be terse."}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
			}
			msg, err := client.Messages.New(ctx, params)
			if err != nil || len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens == 0 || msg.Usage.InputTokens == 0 {
				t.Fatalf("message = %+v, %v; want text, end_turn and usage", msg, err)
			}
			if rec := lastRequest(t, h.simA); !strings.HasPrefix(rec.Path, up.path) || rec.Key != secretA1 || !strings.Contains(string(rec.Body), "Be terse.") {
				t.Errorf("simulator got %s key %q body %s; want %s… with the credential and the system prompt", rec.Path, rec.Key, rec.Body, up.path)
			}

			acc, err := streamMessage(t, client, params)
			if err != nil || len(acc.Content) == 0 || acc.Content[0].Text != msg.Content[0].Text || acc.Usage.OutputTokens != msg.Usage.OutputTokens {
				t.Fatalf("stream = %+v, %v; want the message's text and usage", acc, err)
			}

			before := len(h.simA.Requests())
			count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: params.Model, Messages: params.Messages})
			if err != nil || count.InputTokens <= 0 || len(h.simA.Requests()) != before {
				t.Errorf("count_tokens = %+v, %v, %d upstream calls; want Sluice's estimate, nothing sent", count, err, len(h.simA.Requests())-before)
			}

			acc, use := askForTheWeather(t, client, &params)
			if acc.StopReason != anthropic.StopReasonToolUse || use.Name != "get_weather" || use.ID == "" || !strings.Contains(string(use.Input), `"city"`) {
				t.Fatalf("tool answer %s %+v, want tool_use get_weather with a city", acc.StopReason, use)
			}
			params.Messages = append(params.Messages, acc.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "4 C", false)))
			if msg, err = client.Messages.New(ctx, params); err != nil || msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) == 0 || msg.Content[0].Text == "" {
				t.Fatalf("answer to the tool result = %+v, %v; want text, end_turn", msg, err)
			}
			up.sentBack(t, lastRequest(t, h.simA).Body, use.ID)
		})
	}
}

// The OpenAI SDK's Responses client on an Anthropic model, reached through
// the hub: a response, a stream, and a function call whose output goes
// back (the whole conversation: nothing is stored) paired with it.
func TestResponsesSDKOnAnthropicUpstream(t *testing.T) {
	h := newMatrixHarness(t)
	sdk := h.sdk(keyWeb)
	ctx := t.Context()
	params := responses.ResponseNewParams{
		Model:        "resp-on-claude",
		Instructions: openai.String("Be terse."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")},
	}
	resp, err := sdk.Responses.New(ctx, params)
	if err != nil || resp.OutputText() == "" || resp.Status != responses.ResponseStatusCompleted || resp.Usage.OutputTokens == 0 {
		t.Fatalf("Responses.New on an Anthropic model = %+v, %v; want completed text and usage", resp, err)
	}
	rec := lastRequest(t, h.simA)
	if rec.Path != "/v1/messages" || rec.Model != "claude-sonnet-4-6" || rec.Key != secretA1 || !strings.Contains(string(rec.Body), `"system":[{"type":"text","text":"Be terse."`) {
		t.Errorf("simulator got %s model %q key %q body %s; want a Messages request of the deployment's model, the instructions as system", rec.Path, rec.Model, rec.Key, rec.Body)
	}

	text, completed, err := streamResponse(t, sdk, params)
	if err != nil || text != resp.OutputText() || completed == nil || completed.Usage.OutputTokens != resp.Usage.OutputTokens {
		t.Fatalf("stream = %q, completed %+v, %v; want %q and a completed response with usage", text, completed, err, resp.OutputText())
	}

	question := responses.ResponseInputItemParamOfMessage("Weather in Oslo? "+simulator.ToolWord, responses.EasyInputMessageRoleUser)
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question}}
	params.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name:       "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	}}}
	if _, completed, err = streamResponse(t, sdk, params); err != nil || completed == nil || len(completed.Output) == 0 {
		t.Fatalf("tool stream completed %+v, %v", completed, err)
	}
	call := completed.Output[len(completed.Output)-1].AsFunctionCall()
	if call.Name != "get_weather" || call.CallID == "" || !strings.Contains(call.Arguments, `"city"`) {
		t.Fatalf("tool answer %+v, want a get_weather call with a city", completed.Output)
	}
	output := responses.ResponseInputItemParamOfFunctionCallOutput("4 C")
	output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	params.Input.OfInputItemList = append(params.Input.OfInputItemList,
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), output)
	if resp, err = sdk.Responses.New(ctx, params); err != nil || resp.OutputText() == "" {
		t.Fatalf("answer to the function's output = %+v, %v; want text", resp, err)
	}
	var sent struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(lastRequest(t, h.simA).Body, &sent); err != nil || len(sent.Messages) != 3 {
		t.Fatalf("Anthropic got %d messages, %v; want the question, the call and its result", len(sent.Messages), err)
	}
	if use, result := sent.Messages[1].Content, sent.Messages[2].Content; len(use) == 0 || len(result) == 0 ||
		use[len(use)-1].Type != "tool_use" || use[len(use)-1].ID != call.CallID || result[0].Type != "tool_result" || result[0].ToolUseID != call.CallID {
		t.Errorf("the call and its output reached Anthropic as %+v and %+v; want tool_use and tool_result under %s", use, result, call.CallID)
	}
}
