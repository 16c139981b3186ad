package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/sluicehq/sluice/internal/simulator"
)

// checkVertexAnthropic checks the last request to Vertex: Claude's
// rawPredict (or streamRawPredict) under the project and location, with
// the service account's token and a body without model and with the
// Vertex version.
func (g *cloudGateway) checkVertexAnthropic(method string) {
	g.t.Helper()
	r := g.lastHosted()
	var body map[string]json.RawMessage
	_ = json.Unmarshal(r.Body, &body)
	if r.Path != "/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:"+method ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sim-cat-") || body["model"] != nil ||
		string(body["anthropic_version"]) != `"`+simulator.VertexAnthropicVersion+`"` {
		g.t.Errorf("vertex request %s, authorization %q, body %s", r.Path, r.Header.Get("Authorization"), r.Body)
	}
}

// anthropic-sdk-go on Claude on Vertex AI through Sluice: a message, a
// stream, and a streamed tool call and its result; an OpenAI chat caller
// on the same model through the chat→Messages translator. The service
// account's token is obtained once.
func TestVertexAnthropicThroughSluice(t *testing.T) {
	g := startCloudGateway(t)
	ctx := t.Context()
	client := anthropicSDK(g.harness, keyWeb)
	params := anthropic.MessageNewParams{
		Model: "claude-vertex", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
	msg, err := client.Messages.New(ctx, params)
	if err != nil || len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.Usage.OutputTokens == 0 {
		t.Fatalf("message = %+v, %v", msg, err)
	}
	g.checkVertexAnthropic("rawPredict")

	acc, use := askForTheWeather(t, client, &params)
	g.checkVertexAnthropic("streamRawPredict")
	if acc.StopReason != anthropic.StopReasonToolUse || use.Name != "get_weather" || acc.Usage.OutputTokens == 0 {
		t.Fatalf("tool answer %s %+v", acc.StopReason, use)
	}
	params.Messages = append(params.Messages, acc.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "4 C", false)))
	if msg, err = client.Messages.New(ctx, params); err != nil || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("answer to the tool result = %+v, %v", msg, err)
	}

	chat, err := g.sdk(keyWeb).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-on-claude-vertex", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	if err != nil || len(chat.Choices) == 0 || chat.Choices[0].Message.Content == "" {
		t.Fatalf("chat on Claude on Vertex = %+v, %v", chat, err)
	}
	g.checkVertexAnthropic("rawPredict")
	if n := g.sim.CloudTokensIssued(); n != 2 {
		t.Errorf("%d tokens issued, want 2: one for the service account, one for the application", n)
	}
}

// Google's genai SDK on Gemini on Vertex AI through Sluice: the Gemini
// body passed through to the publisher model's URL, streamed too.
func TestVertexGeminiThroughSluice(t *testing.T) {
	g := startCloudGateway(t)
	ctx := t.Context()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: keyWeb, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: g.url("/"), APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Models.GenerateContent(ctx, "gem-vertex", genai.Text("hello there"), nil)
	if err != nil || resp.Text() == "" || resp.UsageMetadata == nil || resp.UsageMetadata.PromptTokenCount == 0 {
		t.Fatalf("GenerateContent = %+v, %v", resp, err)
	}
	const model = "/v1/projects/proj-1/locations/us-east5/publishers/google/models/gemini-2.5-flash"
	if r := g.lastHosted(); r.Path != model+":generateContent" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sim-cat-") || r.Header.Get("X-Goog-Api-Key") != "" {
		t.Errorf("vertex request %s, authorization %q", r.Path, r.Header.Get("Authorization"))
	}
	var text strings.Builder
	for chunk, err := range client.Models.GenerateContentStream(ctx, "gem-vertex", genai.Text("hello there"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(chunk.Text())
	}
	if r := g.lastHosted(); text.Len() == 0 || r.Path != model+":streamGenerateContent" || r.Query != "alt=sse" {
		t.Errorf("stream %q on %s?%s", text.String(), r.Path, r.Query)
	}
}
