package app_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// newGeminiTranslateHarness serves, from simA, gpt-on-gem (an OpenAI chat
// alias on a Gemini endpoint) and gem-on-gpt (a Gemini alias on an OpenAI
// chat endpoint): both translated.
func newGeminiTranslateHarness(t *testing.T) *harness {
	t.Helper()
	return newProtocolHarness(t, "ep-gem", sluice.ProtocolGemini, `  - alias: gpt-on-gem
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-gem]}]
  - alias: gem-on-gpt
    protocol: gemini.generate
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
`)
}

// An OpenAI SDK caller on a Gemini model: text, stream with usage, a tool
// call (streamed) and its result sent back, whose call keeps its id and
// thought signature on the way to Gemini; what Gemini cannot express is
// the caller's 400, and nothing is sent.
func TestChatCallerOnGeminiDeployment(t *testing.T) {
	h := newGeminiTranslateHarness(t)
	sdk := h.sdk(keyWeb)
	ctx := t.Context()
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-on-gem",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be terse."), openai.UserMessage("hello there")},
	}
	c, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil || len(c.Choices) == 0 || c.Choices[0].Message.Content == "" || c.Choices[0].FinishReason != "stop" || c.Usage.TotalTokens == 0 {
		t.Fatalf("chat completion on a Gemini model = %+v, %v; want content and usage", c, err)
	}
	rec := lastRequest(t, h.simA)
	if rec.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || rec.Key != secretA1 ||
		!strings.Contains(string(rec.Body), `"systemInstruction":{"parts":[{"text":"Be terse."}]}`) || strings.Contains(string(rec.Body), `"model"`) {
		t.Errorf("simulator got %s key %q body %s; want generateContent of the deployment's model with the credential, the system prompt as systemInstruction",
			rec.Path, rec.Key, rec.Body)
	}

	streamed := params
	streamed.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	stream := sdk.Chat.Completions.NewStreaming(ctx, streamed)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content != c.Choices[0].Message.Content || acc.Usage.TotalTokens == 0 {
		t.Errorf("streamed chat completion on a Gemini model = %+v, %v; want the same content, and usage", acc.ChatCompletion, err)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" {
		t.Errorf("simulator got %s, want streamGenerateContent", rec.Path)
	}

	tools := params
	tools.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	})}
	tools.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo? " + simulator.ToolWord)}
	stream = sdk.Chat.Completions.NewStreaming(ctx, tools)
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) == 0 || len(acc.Choices[0].Message.ToolCalls) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("streamed tool call on a Gemini model = %+v, %v; want one tool call", acc.ChatCompletion, err)
	}
	call := acc.Choices[0].Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || !strings.Contains(call.Function.Arguments, `"city"`) || !strings.Contains(call.ID, "__thought__") {
		t.Errorf("tool call = %+v, want get_weather with a city and the thought signature in its id", call)
	}
	tools.Messages = append(tools.Messages, acc.Choices[0].Message.ToParam(), openai.ToolMessage("4 C", call.ID))
	if c, err = sdk.Chat.Completions.New(ctx, tools); err != nil || c.Choices[0].Message.Content == "" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("answer to the tool result = %+v, %v; want text", c, err)
	}
	var sent struct {
		Contents []struct {
			Parts []struct {
				ThoughtSignature string `json:"thoughtSignature"`
				FunctionCall     *struct {
					ID, Name string
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID, Name string
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(lastRequest(t, h.simA).Body, &sent); err != nil || len(sent.Contents) != 3 {
		t.Fatalf("simulator got %d contents, %v; want the question, the call and its result", len(sent.Contents), err)
	}
	fc, fr := sent.Contents[1].Parts[0], sent.Contents[2].Parts[0]
	if fc.FunctionCall == nil || fr.FunctionResponse == nil || fc.ThoughtSignature == "" || fc.FunctionCall.ID != fr.FunctionResponse.ID ||
		fr.FunctionResponse.Name != "get_weather" || !strings.HasPrefix(call.ID, fc.FunctionCall.ID+"__thought__") {
		t.Errorf("the call and its result reached Gemini as %+v and %+v; want one id, the name, and the call's signature back", fc, fr)
	}

	before := len(h.simA.Requests())
	n := params
	n.N = param.NewOpt[int64](2)
	_, err = sdk.Chat.Completions.New(ctx, n)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "invalid_request" || len(h.simA.Requests()) != before {
		t.Errorf("n=2 on a Gemini model: %v; want OpenAI's 400 invalid_request, nothing sent upstream", err)
	}
}

// A Gemini caller (Google's SDK, and the JSON-array stream by hand) on an
// OpenAI chat model: text, stream, a function call and its result paired
// by name on the way to chat; what chat cannot express is Google's 400.
func TestGeminiCallerOnChatDeployment(t *testing.T) {
	h := newGeminiTranslateHarness(t)
	ctx := t.Context()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: keyWeb, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: h.url("/"), APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Models.GenerateContent(ctx, "gem-on-gpt", genai.Text("hello there"), nil)
	if err != nil || resp.Text() == "" || resp.UsageMetadata == nil || resp.UsageMetadata.PromptTokenCount == 0 || resp.Candidates[0].FinishReason != genai.FinishReasonStop {
		t.Fatalf("GenerateContent on a chat model = %+v, %v; want text and usage", resp, err)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/chat/completions" || rec.Model != "gpt-4o-mini" || rec.Key != secretA1 || rec.Stream {
		t.Errorf("simulator got %s model %q key %q stream %v; want a chat completion of gpt-4o-mini with the credential", rec.Path, rec.Model, rec.Key, rec.Stream)
	}

	var streamed strings.Builder
	var last *genai.GenerateContentResponse
	for chunk, err := range client.Models.GenerateContentStream(ctx, "gem-on-gpt", genai.Text("hello there"), nil) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		streamed.WriteString(chunk.Text())
		last = chunk
	}
	if streamed.String() != resp.Text() || last == nil || last.Candidates[0].FinishReason != genai.FinishReasonStop ||
		last.UsageMetadata == nil || last.UsageMetadata.CandidatesTokenCount == 0 {
		t.Errorf("stream said %q, want %q ending with STOP and usage", streamed.String(), resp.Text())
	}
	if rec := lastRequest(t, h.simA); !rec.Stream {
		t.Errorf("simulator got a request without stream; want a streamed chat completion")
	}

	// Without alt=sse the caller gets the JSON array Gemini writes then.
	status, _, body := geminiDo(t, h, "POST", "/v1beta/models/gem-on-gpt:streamGenerateContent", keyWeb, "header", geminiHello)
	var chunks []geminiChunk
	if err := json.Unmarshal([]byte(body), &chunks); status != 200 || err != nil || len(chunks) < 2 || chunks[len(chunks)-1].Candidates[0].FinishReason != "STOP" {
		t.Errorf("JSON-array stream = %d %s, want chunks ending with STOP", status, body)
	}

	// A call without an id and its result, as Gemini CLI sends them back.
	contents := []*genai.Content{
		genai.NewContentFromText("Weather in Oslo?", genai.RoleUser),
		genai.NewContentFromFunctionCall("get_weather", map[string]any{"city": "Oslo"}, genai.RoleModel),
		genai.NewContentFromFunctionResponse("get_weather", map[string]any{"output": "4 C"}, genai.RoleUser),
	}
	tools := []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather",
		ParametersJsonSchema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}}
	if resp, err = client.Models.GenerateContent(ctx, "gem-on-gpt", contents, &genai.GenerateContentConfig{Tools: tools}); err != nil || resp.Text() == "" {
		t.Fatalf("answer to a function's response = %+v, %v; want text", resp, err)
	}
	var sent struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []any `json:"tools"`
	}
	if err := json.Unmarshal(lastRequest(t, h.simA).Body, &sent); err != nil || len(sent.Messages) != 3 || len(sent.Tools) != 1 {
		t.Fatalf("simulator got %+v, %v; want the question, the call and its result, and the tool", sent, err)
	}
	if m := sent.Messages; len(m[1].ToolCalls) != 1 || m[2].Role != "tool" || m[2].ToolCallID != m[1].ToolCalls[0].ID || m[2].Content != "4 C" {
		t.Errorf("the call and its result reached chat as %+v and %+v; want a tool message answering the call's id", m[1], m[2])
	}

	before := len(h.simA.Requests())
	_, err = client.Models.GenerateContent(ctx, "gem-on-gpt", genai.Text("hi"), &genai.GenerateContentConfig{CandidateCount: 2})
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Status != "INVALID_ARGUMENT" || !strings.Contains(apiErr.Message, "candidateCount") ||
		len(h.simA.Requests()) != before {
		t.Errorf("candidateCount 2 on a chat model: %v; want Google's 400 INVALID_ARGUMENT, nothing sent upstream", err)
	}
}
