package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// newResponsesHarness serves gpt-resp, an OpenAI Responses alias on the
// simulator's Responses API (simA, passed through), and two translated:
// resp-on-chat, a Responses alias on simA's chat completions, and
// chat-on-resp, a chat alias on its Responses API.
func newResponsesHarness(t *testing.T) *harness {
	t.Helper()
	return newProtocolHarness(t, "ep-resp", sluice.ProtocolOpenAIResponses, responsesAliases)
}

// responsesAliases are newResponsesHarness's aliases.
const responsesAliases = `  - alias: gpt-resp
    protocol: openai.responses
    deployments: [{model: gpt-4o-mini, endpoints: [ep-resp]}]
  - alias: resp-on-chat
    protocol: openai.responses
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
  - alias: chat-on-resp
    deployments: [{model: gpt-4o-mini, endpoints: [ep-resp]}]
`

// responsesUsage is the usage of a Responses answer.
type responsesUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// loggedUsage is how the access log line shows usage u.
func (u responsesUsage) logged() string {
	return fmt.Sprintf(`"prompt_tokens":%d,"completion_tokens":%d`, u.InputTokens, u.OutputTokens)
}

func TestResponsesPassThrough(t *testing.T) {
	h := newResponsesHarness(t)
	body := `{"model":"gpt-resp","input":"hi","max_output_tokens":64,"prompt_cache_key":"conv-1","safety_identifier":"user-7"}`
	status, _, got := h.post(t.Context(), "/v1/responses", keyWeb, body)
	var resp struct {
		Object string         `json:"object"`
		Status string         `json:"status"`
		Usage  responsesUsage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(got), &resp); status != 200 || err != nil || resp.Object != "response" || resp.Usage.OutputTokens == 0 {
		t.Fatalf("POST /v1/responses = %d %s, want a response with usage", status, got)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/responses" || rec.Model != "gpt-4o-mini" || rec.Key != secretA1 ||
		!strings.Contains(string(rec.Body), `"prompt_cache_key":"conv-1"`) {
		t.Errorf("simulator got %s model %q key %q body %s; want /v1/responses, the deployment's model, the credential, the caller's fields",
			rec.Path, rec.Model, rec.Key, rec.Body)
	}
	eventually(t, 2e9, "the access log line with the answer's usage", func() bool {
		return strings.Contains(h.logs.String(), resp.Usage.logged())
	})

	status, hdr, got := h.post(t.Context(), "/v1/responses", keyWeb, strings.Replace(body, `"input"`, `"stream":true,"input"`, 1))
	completed := got[strings.LastIndex(got, "event: response.completed\ndata: ")+len("event: response.completed\ndata: "):]
	var end struct {
		Response struct {
			Usage responsesUsage `json:"usage"`
		} `json:"response"`
	}
	if status != 200 || hdr.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(got, "event: response.created") ||
		json.Unmarshal([]byte(strings.TrimSpace(completed)), &end) != nil || end.Response.Usage.OutputTokens == 0 {
		t.Fatalf("stream = %d %q, want Responses events from response.created to response.completed with usage", status, got)
	}
	eventually(t, 2e9, "the access log line with the stream's usage", func() bool {
		return strings.Contains(h.logs.String(), end.Response.Usage.logged())
	})
}

// Codex signed in with ChatGPT posts to the ChatGPT backend's path: the
// same front; the upstream gets the Responses path of its endpoint.
func TestResponsesCodexBackendPath(t *testing.T) {
	h := newResponsesHarness(t)
	status, _, got := h.post(t.Context(), "/backend-api/codex/responses", keyWeb, `{"model":"gpt-resp","input":"hi","stream":true,"store":false}`)
	if status != 200 || !strings.HasPrefix(got, "event: response.created") || !strings.Contains(got, "event: response.completed") {
		t.Fatalf("POST /backend-api/codex/responses = %d %q, want a Responses stream", status, got)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/responses" || rec.Model != "gpt-4o-mini" {
		t.Errorf("simulator got %s model %q, want /v1/responses of the deployment's model", rec.Path, rec.Model)
	}
}

func TestResponsesStreamCutEndsWithErrorEvent(t *testing.T) {
	h := newResponsesHarness(t)
	h.simA.SetKey(secretA1, simulator.Behavior{CutAfter: 1})
	status, _, got := h.post(t.Context(), "/v1/responses", keyWeb, `{"model":"gpt-resp","input":"hi","stream":true}`)
	want := "event: error\ndata: {\"type\":\"error\",\"code\":\"" + string(sluice.CodeUpstreamStreamFailed) + `"`
	if status != 200 || !strings.HasPrefix(got, "event: response.created") || !strings.Contains(got, want) {
		t.Errorf("cut stream = %d %q, want its first events and then a Responses error event", status, got)
	}
}

func TestResponsesErrorEnvelope(t *testing.T) {
	h := newResponsesHarness(t)
	tests := []struct {
		name, key, body string
		status          int
		typ             string
		code            sluice.Code
	}{
		{"missing key", "", `{"model":"gpt-resp","input":"hi"}`, 401, "authentication_error", sluice.CodeNoCredentials},
		{"unknown model", keyWeb, `{"model":"nope","input":"hi"}`, 404, "not_found_error", sluice.CodeModelNotFound},
		{"duplicate previous_response_id", keyWeb, `{"model":"gpt-resp","previous_response_id":"a","previous_response_id":"b"}`, 400, "invalid_request_error", sluice.CodeInvalidRequest},
		// Last: it cools the one account.
		{"rate limited upstream", keyWeb, `{"model":"gpt-resp","input":"hi"}`, 429, "rate_limit_error", sluice.CodeCapacityWaitTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.status == 429 {
				h.simA.SetKey(secretA1, simulator.Behavior{FailStatus: 429})
			}
			status, hdr, got := h.post(t.Context(), "/v1/responses", tt.key, tt.body)
			var e struct {
				Error struct {
					Type, Message, Code string
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(got), &e); err != nil || status != tt.status || e.Error.Type != tt.typ || e.Error.Code != string(tt.code) || e.Error.Message == "" {
				t.Errorf("%s = %d %s, want %d %s with code %s in OpenAI's envelope", tt.name, status, got, tt.status, tt.typ, tt.code)
			}
			if status == 429 && hdr.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		})
	}
}

// streamResponse sends params to sdk's Responses API as a stream and
// returns the text of its deltas, the response it completed with (nil
// when none did) and the stream's error.
func streamResponse(t *testing.T, sdk *openai.Client, params responses.ResponseNewParams) (string, *responses.Response, error) {
	t.Helper()
	stream := sdk.Responses.NewStreaming(t.Context(), params)
	var text strings.Builder
	var completed *responses.Response
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			completed = &r
		}
	}
	return text.String(), completed, stream.Err()
}

// A Responses caller (the official SDK) on a chat alias: its answer and
// its stream are Responses, the upstream got chat completions.
func TestResponsesCallerOnChatAlias(t *testing.T) {
	h := newResponsesHarness(t)
	sdk := h.sdk(keyWeb)
	params := responses.ResponseNewParams{Model: "resp-on-chat", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	resp, err := sdk.Responses.New(t.Context(), params)
	if err != nil || resp.OutputText() == "" || resp.Usage.OutputTokens == 0 {
		t.Fatalf("Responses.New on a chat alias = %+v, %v; want text and usage", resp, err)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/chat/completions" || rec.Model != "gpt-4o-mini" {
		t.Errorf("simulator got %s model %q, want chat completions of the deployment's model", rec.Path, rec.Model)
	}
	text, completed, err := streamResponse(t, sdk, params)
	if err != nil || text == "" || completed == nil || completed.Usage.OutputTokens == 0 {
		t.Fatalf("stream on a chat alias = %q, completed %v, %v; want text deltas and a completed response with usage", text, completed, err)
	}
}

// A chat caller (the official SDK) on a Responses alias: its answer is a
// chat completion, the upstream got a Responses request.
func TestChatCallerOnResponsesAlias(t *testing.T) {
	h := newResponsesHarness(t)
	c, err := h.sdk(keyWeb).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "chat-on-resp", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil || len(c.Choices) == 0 || c.Choices[0].Message.Content == "" || c.Usage.TotalTokens == 0 {
		t.Fatalf("chat completion on a Responses alias = %+v, %v; want content and usage", c, err)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/responses" || rec.Model != "gpt-4o-mini" {
		t.Errorf("simulator got %s model %q, want a Responses request for the deployment's model", rec.Path, rec.Model)
	}
	stream := h.sdk(keyWeb).Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "chat-on-resp", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" || acc.Usage.TotalTokens == 0 {
		t.Fatalf("chat stream on a Responses alias = %+v, %v; want content and usage", acc.ChatCompletion, err)
	}
}
