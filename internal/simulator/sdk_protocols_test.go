//go:build !sluice_fuzz

package simulator_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sluicehq/sluice/internal/simulator"
)

// The official SDKs read the simulator's Messages and Responses answers:
// text, stream, a tool round trip and the error types.

func anthropicClient(srv *httptest.Server, key string) anthropic.Client {
	return anthropic.NewClient(
		anthropicoption.WithBaseURL(srv.URL),
		anthropicoption.WithAPIKey(key),
		anthropicoption.WithHTTPClient(srv.Client()),
		anthropicoption.WithMaxRetries(0),
	)
}

var weatherToolParam = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name: "get_weather",
	InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}},
		Required:   []string{"city"},
	},
}}

func TestAnthropicSDK(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	client := anthropicClient(srv, "sk-ant-sdk")
	ctx := t.Context()
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-6",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello to the world"))},
	}

	msg, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.Usage.OutputTokens != 16 {
		t.Errorf("message = %s %d blocks, usage %+v; want end_turn, one text block, 16 output tokens", msg.StopReason, len(msg.Content), msg.Usage)
	}

	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != msg.Content[0].Text || acc.StopReason != msg.StopReason || acc.Usage.OutputTokens != msg.Usage.OutputTokens {
		t.Errorf("accumulated %+v, want the JSON answer %+v", acc.Content, msg.Content)
	}

	// Tool round trip: the word asks for the tool, the result gets text.
	params.Tools = []anthropic.ToolUnionParam{weatherToolParam}
	params.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo? " + simulator.ToolWord))}
	stream = client.Messages.NewStreaming(ctx, params)
	acc = anthropic.Message{}
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("tool stream: %v", err)
	}
	use := acc.Content[len(acc.Content)-1].AsToolUse()
	if acc.StopReason != anthropic.StopReasonToolUse || use.Name != "get_weather" || len(use.Input) < len(`{"city":""}`) {
		t.Fatalf("tool answer %s %+v, want tool_use get_weather with a city", acc.StopReason, use)
	}
	params.Messages = append(params.Messages, acc.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "4 C and cloudy", false)))
	msg, err = client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || msg.Content[0].Type != "text" {
		t.Errorf("answer to the tool result %s %s, want end_turn text", msg.StopReason, msg.Content[0].Type)
	}

	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: params.Model, Messages: params.Messages})
	if err != nil || count.InputTokens < 10 {
		t.Errorf("count_tokens = %+v, %v", count, err)
	}
}

func TestAnthropicSDKErrors(t *testing.T) {
	_, srv := start(t, simulator.Options{
		Models: []string{"claude-sonnet-4-6"},
		Keys: map[string]simulator.Behavior{
			"good":    {},
			"limited": {FailStatus: 429, RetryAfter: 2 * time.Second},
			"busy":    {FailStatus: 529},
			"revoked": {Invalid: true},
		},
	})
	tests := []struct {
		key, model string
		wantStatus int
		wantType   string
	}{
		{"revoked", "claude-sonnet-4-6", 401, "authentication_error"},
		{"good", "claude-9", 404, "not_found_error"},
		{"limited", "claude-sonnet-4-6", 429, "rate_limit_error"},
		{"busy", "claude-sonnet-4-6", 529, "overloaded_error"},
	}
	for _, tt := range tests {
		t.Run(tt.wantType, func(t *testing.T) {
			client := anthropicClient(srv, tt.key)
			_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
				Model: anthropic.Model(tt.model), MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			apiErr, ok := errors.AsType[*anthropic.Error](err)
			if !ok {
				t.Fatalf("err = %v, want *anthropic.Error", err)
			}
			if apiErr.StatusCode != tt.wantStatus || string(apiErr.Type()) != tt.wantType || apiErr.RequestID == "" {
				t.Errorf("SDK error = %d %q request %q, want %d %s and a request id", apiErr.StatusCode, apiErr.Type(), apiErr.RequestID, tt.wantStatus, tt.wantType)
			}
		})
	}
}

func TestResponsesSDK(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	client := sdkClient(srv, "sk-resp")
	ctx := t.Context()
	params := responses.ResponseNewParams{
		Model: "gpt-5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello to the world")},
	}
	first, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != responses.ResponseStatusCompleted || first.OutputText() == "" || first.Usage.OutputTokens != 16 {
		t.Errorf("response = %s %q usage %+v, want completed text of 16 tokens", first.Status, first.OutputText(), first.Usage)
	}

	stream := client.Responses.NewStreaming(ctx, params)
	var completed responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			completed = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if completed.OutputText() != first.OutputText() || completed.Usage.TotalTokens != first.Usage.TotalTokens {
		t.Errorf("streamed %q %d tokens, want %q %d", completed.OutputText(), completed.Usage.TotalTokens, first.OutputText(), first.Usage.TotalTokens)
	}

	// Tool round trip, chained with previous_response_id.
	params.Input.OfString = openai.String("Weather in Oslo? " + simulator.ToolWord)
	params.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name:       "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	}}}
	called, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	call := called.Output[len(called.Output)-1].AsFunctionCall()
	if call.Name != "get_weather" || call.CallID == "" || call.Arguments == "" {
		t.Fatalf("tool answer %+v, want a get_weather call", called.Output)
	}
	output := responses.ResponseInputItemParamOfFunctionCallOutput("4 C and cloudy")
	output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}}
	params.PreviousResponseID = openai.String(called.ID)
	answered, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if answered.OutputText() == "" || answered.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Errorf("answer to the tool output %q usage %+v, want text and cached tokens", answered.OutputText(), answered.Usage)
	}

	got, err := client.Responses.Get(ctx, answered.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != answered.OutputText() {
		t.Errorf("Get = %v, %v; want the stored response", got, err)
	}
	other := sdkClient(srv, "sk-other")
	_, err = other.Responses.Get(ctx, answered.ID, responses.ResponseGetParams{})
	if apiErr, ok := errors.AsType[*openai.Error](err); !ok || apiErr.StatusCode != 404 {
		t.Errorf("Get with another key: %v, want a 404 *openai.Error", err)
	}
}
