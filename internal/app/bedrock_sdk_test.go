package app_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"

	"github.com/sluicehq/sluice/internal/simulator"
)

// AWS access keys of the Bedrock tests: the simulator knows their secrets;
// bedrock-bad's secret in the catalog is not the simulator's.
const (
	awsKey1, awsSecret1 = "AKIDBEDROCKONE", "bedrock-secret-one"
	awsKey2, awsSecret2 = "AKIDBEDROCKTWO", "bedrock-secret-two"
	awsToken2           = "bedrock-session-token-two"
	awsKeyBad           = "AKIDBEDROCKBAD"
	bedrockModelID      = "anthropic.claude-sonnet-4-5-20250929-v1:0"
)

func init() {
	for k, v := range map[string]string{
		"AWS_ID_1": awsKey1, "AWS_SECRET_1": awsSecret1,
		"AWS_ID_2": awsKey2, "AWS_SECRET_2": awsSecret2, "AWS_TOKEN_2": awsToken2,
		"AWS_ID_BAD": awsKeyBad, "AWS_SECRET_BAD": "not-the-secret-the-simulator-has",
	} {
		testEnv[k] = v
	}
}

// newBedrockHarness is the test catalog plus two Bedrock endpoints on simA:
// ep-bedrock with two AWS keys (of two accounts; the second a
// temporary one with a session token) and ep-bedrock-bad with a key whose
// secret is wrong; aliases on them for Anthropic and OpenAI chat callers.
func newBedrockHarness(t *testing.T) *harness {
	t.Helper()
	template := strings.Replace(catalogTemplate, "credentials:\n", `  - id: ep-bedrock
    base_url: %[3]s
    bedrock: {region: us-east-1}
    protocols: [anthropic.messages]
  - id: ep-bedrock-bad
    base_url: %[3]s
    bedrock: {region: us-east-1}
    protocols: [anthropic.messages]
accounts:
  - {id: aws-1}
  - {id: aws-2}
credentials:
  - id: bedrock-1
    account: aws-1
    aws: {access_key_id_env: AWS_ID_1, secret_access_key_env: AWS_SECRET_1}
    endpoints: [ep-bedrock]
  - id: bedrock-2
    account: aws-2
    aws: {access_key_id_env: AWS_ID_2, secret_access_key_env: AWS_SECRET_2, session_token_env: AWS_TOKEN_2}
    endpoints: [ep-bedrock]
  - id: bedrock-bad
    aws: {access_key_id_env: AWS_ID_BAD, secret_access_key_env: AWS_SECRET_BAD}
    endpoints: [ep-bedrock-bad]
`, 1)
	template = strings.Replace(template, "keys:\n", `  - alias: claude-bedrock
    protocol: anthropic.messages
    deployments: [{model: `+bedrockModelID+`, endpoints: [ep-bedrock]}]
  - alias: gpt-on-bedrock
    deployments: [{model: `+bedrockModelID+`, endpoints: [ep-bedrock]}]
  - alias: claude-bad-first
    protocol: anthropic.messages
    deployments:
      - {model: `+bedrockModelID+`, endpoints: [ep-bedrock-bad], priority: 0}
      - {model: `+bedrockModelID+`, endpoints: [ep-bedrock], priority: 1}
keys:
`, 1)
	return newHarnessWith(t, template, "{backend: memory}", simulator.Options{AWSKeys: map[string]simulator.AWSKey{
		awsKey1:   {Secret: awsSecret1},
		awsKey2:   {Secret: awsSecret2, SessionToken: awsToken2},
		awsKeyBad: {Secret: "the-simulators-secret"},
	}})
}

// bedrockRequests are the simulator's records of Bedrock invocations.
func bedrockRequests(sim *simulator.Simulator) []simulator.Recorded {
	var out []simulator.Recorded
	for _, r := range sim.Requests() {
		if strings.HasPrefix(r.Path, "/model/") {
			out = append(out, r)
		}
	}
	return out
}

// The Anthropic SDK on a Bedrock-deployed alias: a message, a stream and a
// streamed tool call whose result goes back; each request reaches Bedrock's
// paths as Bedrock's body (no model, no stream, its anthropic_version, the
// caller's beta in the body), signed, and its usage is read.
func TestBedrockAnthropicSDK(t *testing.T) {
	h := newBedrockHarness(t)
	client := anthropic.NewClient(anthropicoption.WithBaseURL(h.url("")), anthropicoption.WithAPIKey(keyWeb),
		anthropicoption.WithMaxRetries(0), anthropicoption.WithHeader("anthropic-beta", "context-1m-2025-08-07"))
	ctx := t.Context()
	params := anthropic.MessageNewParams{
		Model: "claude-bedrock", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
	msg, err := client.Messages.New(ctx, params)
	if err != nil || len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.Usage.OutputTokens == 0 {
		t.Fatalf("message = %+v, %v; want text and usage", msg, err)
	}
	recs := bedrockRequests(h.simA)
	if len(recs) != 1 || recs[0].Path != "/model/"+bedrockModelID+"/invoke" || recs[0].Model != bedrockModelID {
		t.Fatalf("simulator got %+v, want one invoke of the deployment's model", recs)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(recs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["model"]; ok || string(body["anthropic_version"]) != `"bedrock-2023-05-31"` || string(body["anthropic_beta"]) != `["context-1m-2025-08-07"]` {
		t.Errorf("Bedrock body = %s; want no model, Bedrock's version and the caller's beta", recs[0].Body)
	}

	acc, err := streamMessage(t, client, params)
	if err != nil || len(acc.Content) == 0 || acc.Content[0].Text != msg.Content[0].Text || acc.Usage.OutputTokens == 0 {
		t.Fatalf("stream = %+v, %v; want the message's text, and usage", acc, err)
	}
	if recs = bedrockRequests(h.simA); recs[len(recs)-1].Path != "/model/"+bedrockModelID+"/invoke-with-response-stream" {
		t.Errorf("stream went to %s", recs[len(recs)-1].Path)
	}

	acc, use := askForTheWeather(t, client, &params)
	if acc.StopReason != anthropic.StopReasonToolUse || use.Name != "get_weather" || use.ID == "" {
		t.Fatalf("tool answer %s %+v, want tool_use get_weather", acc.StopReason, use)
	}
	params.Messages = append(params.Messages, acc.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "4 C", false)))
	if msg, err = client.Messages.New(ctx, params); err != nil || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("answer to the tool result = %+v, %v; want end_turn", msg, err)
	}
	// A request Bedrock refuses (ValidationException) reaches the caller
	// as Anthropic's invalid_request_error.
	params.MaxTokens = -1
	_, err = client.Messages.New(ctx, params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), "invalid_request_error") {
		t.Errorf("refused request: %v; want a 400 invalid_request_error", err)
	}
}

// The OpenAI SDK on a Bedrock-deployed alias: translated to Messages and
// back, as JSON and as a stream with usage.
func TestBedrockOpenAISDK(t *testing.T) {
	h := newBedrockHarness(t)
	client := h.sdk(keyWeb)
	ctx := t.Context()
	params := openai.ChatCompletionNewParams{Model: "gpt-on-bedrock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")}}
	c, err := client.Chat.Completions.New(ctx, params)
	if err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" || c.Usage.CompletionTokens == 0 {
		t.Fatalf("completion = %+v, %v", c, err)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != c.Choices[0].Message.Content || acc.Usage.CompletionTokens == 0 {
		t.Fatalf("stream = %+v, %v; want the completion's text and usage", acc.ChatCompletion, err)
	}
}

// A throttled AWS key cools its account (the request is served by the
// other), and a signature Bedrock refuses disables the credential.
func TestBedrockThrottleAndBadSignature(t *testing.T) {
	h := newBedrockHarness(t)
	h.simA.SetKey(awsKey1, simulator.Behavior{FailStatus: http.StatusTooManyRequests})
	body := `{"model":"claude-bedrock","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	for range 3 {
		if status, _, got := postAnthropic(t, h, "/v1/messages", keyWeb, body); status != http.StatusOK {
			t.Fatalf("status %d %s, want the other account to serve it", status, got)
		}
	}
	if n := h.simA.Count(awsKey1); n != 1 {
		t.Errorf("calls with the throttled key = %d, want 1: then its account cools", n)
	}
	if a := h.accounts(t)["aws-1"]; a.CoolingUntil.Before(time.Now()) {
		t.Errorf("aws-1 = %+v, want cooling", a)
	}
	if c := h.credentials(t)["bedrock-1"]; c.Status != "active" {
		t.Errorf("bedrock-1 = %+v, want active: a throttle disables nothing", c)
	}

	body = strings.Replace(body, "claude-bedrock", "claude-bad-first", 1)
	if status, _, got := postAnthropic(t, h, "/v1/messages", keyWeb, body); status != http.StatusOK {
		t.Fatalf("status %d %s, want the next tier to serve it", status, got)
	}
	if c := h.credentials(t)["bedrock-bad"]; c.Status != "disabled" || !strings.HasPrefix(c.Reason, "auth") {
		t.Errorf("bedrock-bad = %+v, want disabled for auth", c)
	}
	recs := bedrockRequests(h.simA)
	if r := recs[len(recs)-2]; r.Status != http.StatusForbidden || r.Key != awsKeyBad {
		t.Errorf("the bad key's request = %d %s, want 403", r.Status, r.Key)
	}
}
