package app_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// anthropicSDK is the official Anthropic Go SDK pointed at the gateway.
func anthropicSDK(h *harness, key string) anthropic.Client {
	return anthropic.NewClient(anthropicoption.WithBaseURL(h.url("")), anthropicoption.WithAPIKey(key), anthropicoption.WithMaxRetries(0))
}

// streamMessage sends params to client as a stream and returns the
// message its events add up to, with the stream's error.
func streamMessage(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, error) {
	t.Helper()
	stream := client.Messages.NewStreaming(t.Context(), params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	return acc, stream.Err()
}

// askForTheWeather has params ask for Oslo's weather with get_weather to
// call, streamed, and returns the answer, which has content, with its last
// block as a tool use. params keeps the tool and the question, for the
// tool's result to follow.
func askForTheWeather(t *testing.T, client anthropic.Client, params *anthropic.MessageNewParams) (anthropic.Message, anthropic.ToolUseBlock) {
	t.Helper()
	params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"},
		},
	}}}
	params.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo? " + simulator.ToolWord))}
	acc, err := streamMessage(t, client, *params)
	if err != nil || len(acc.Content) == 0 {
		t.Fatalf("tool stream = %+v, %v", acc, err)
	}
	return acc, acc.Content[len(acc.Content)-1].AsToolUse()
}

// The Anthropic SDK round-trips through Sluice: on an Anthropic model
// (passed through) and on an OpenAI chat model (translated), a message, a
// stream and count_tokens; on the Anthropic model a tool call and its
// result too.
func TestAnthropicSDKThroughSluice(t *testing.T) {
	h := newMessagesHarness(t)
	client := anthropicSDK(h, keyWeb)
	for _, alias := range []string{"claude-sim", "claude-on-gpt"} {
		t.Run(alias, func(t *testing.T) {
			ctx := t.Context()
			params := anthropic.MessageNewParams{
				Model: anthropic.Model(alias), MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
			}
			msg, err := client.Messages.New(ctx, params)
			if err != nil || len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.Usage.OutputTokens == 0 {
				t.Fatalf("message = %+v, %v; want text and usage", msg, err)
			}

			acc, err := streamMessage(t, client, params)
			if err != nil || len(acc.Content) == 0 || acc.Content[0].Text != msg.Content[0].Text || acc.Usage.OutputTokens == 0 {
				t.Fatalf("stream = %+v, %v; want the message's text, and usage", acc, err)
			}

			count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: params.Model, Messages: params.Messages})
			if err != nil || count.InputTokens <= 0 {
				t.Errorf("count_tokens = %+v, %v", count, err)
			}
			if alias != "claude-sim" {
				return // the simulator's chat completions call no tools
			}
			acc, use := askForTheWeather(t, client, &params)
			if acc.StopReason != anthropic.StopReasonToolUse || use.Name != "get_weather" || use.ID == "" {
				t.Fatalf("tool answer %s %+v, want tool_use get_weather", acc.StopReason, use)
			}
			params.Messages = append(params.Messages, acc.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "4 C", false)))
			if msg, err = client.Messages.New(ctx, params); err != nil || msg.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("answer to the tool result = %+v, %v; want end_turn", msg, err)
			}
		})
	}
}

// Sluice's refusals reach the Anthropic SDK as its error types, with
// Sluice's code in error.code.
func TestAnthropicSDKErrors(t *testing.T) {
	h, _ := newAnthropicHarness(t)
	tests := []struct {
		name, key, model string
		status           int
		typ              string
		code             sluice.Code
	}{
		{"unknown key", "sk-sluice-nobody", "claude", 401, "authentication_error", sluice.CodeNoCredentials},
		{"unknown model", keyWeb, "claude-9", 404, "not_found_error", sluice.CodeModelNotFound},
		{"overloaded upstream", keyWeb, "claude-overloaded", 503, "overloaded_error", sluice.CodeNoUpstreamAvailable},
		{"rate limited upstream", keyWeb, "claude-busy", 429, "rate_limit_error", sluice.CodeCapacityWaitTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := anthropicSDK(h, tt.key)
			_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
				Model: anthropic.Model(tt.model), MaxTokens: 8,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			apiErr, ok := errors.AsType[*anthropic.Error](err)
			if !ok {
				t.Fatalf("err = %v, want *anthropic.Error", err)
			}
			var body anthropicError
			_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
			if apiErr.StatusCode != tt.status || string(apiErr.Type()) != tt.typ || body.Error.Code != string(tt.code) || apiErr.RequestID == "" {
				t.Errorf("SDK error = %d %q code %q request %q, want %d %s code %s and Sluice's request ID",
					apiErr.StatusCode, apiErr.Type(), body.Error.Code, apiErr.RequestID, tt.status, tt.typ, tt.code)
			}
			if tt.status == 429 && apiErr.Response.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		})
	}
}
