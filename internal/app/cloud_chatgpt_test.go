package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/sluicehq/sluice/internal/simulator"
)

// chatgptCatalog puts an endpoint on the simulator's ChatGPT backend
// (%[2]s) with one Codex login of account acct-1; %[1]s is the test's
// directory.
const chatgptCatalog = tokenKeepingServer + `endpoints:
  - {id: ep-chatgpt, base_url: %[2]s/backend-api/codex, protocols: [openai.responses], chatgpt: {}}
credentials:
  - id: codex-login
    oauth: {token_url: %[2]s/oauth/token, client_id: app_EMoamEEZ73f0CkXaXp7hrann, refresh_token_file: %[1]s/refresh-token, body: json}
    headers: {chatgpt-account-id: acct-1}
    endpoints: [ep-chatgpt]
models:
  - alias: codex
    deployments: [{model: gpt-5-codex, endpoints: [ep-chatgpt]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// TestChatGPTBackendThroughSluice serves an OpenAI chat caller (the SDK,
// whole and streamed), a Responses caller (whole and streamed), an
// Anthropic and a Gemini caller and Codex on a ChatGPT-backend endpoint:
// each request reaches the backend as a stream with the login's refreshed
// access token and its account, a whole answer is gathered from that
// stream, and every request's usage is the backend's.
func TestChatGPTBackendThroughSluice(t *testing.T) {
	var refresh string
	h, sim := startSimulatedCloud(t, chatgptCatalog, func(sim *simulator.Simulator, _ string) map[string]string {
		refresh = sim.NewRefreshToken(simulator.Behavior{ChatGPTAccount: "acct-1"}, time.Hour)
		return map[string]string{"refresh-token": refresh}
	}, map[string]string{"/v1/responses": `{"model":"codex","input":"hi"}`})
	ctx := t.Context()
	if got := sim.LastTokenRequest(); got.Get("client_id") != "app_EMoamEEZ73f0CkXaXp7hrann" || got.Get("grant_type") != "refresh_token" {
		t.Errorf("token request %v, want the Codex CLI's client's refresh_token grant", got)
	}
	before := len(sim.Requests())

	// lastSent checks what the backend got for the latest request.
	lastSent := func(what string) {
		t.Helper()
		reqs := sim.Requests()
		r := reqs[len(reqs)-1]
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("%s: the backend got %s", what, r.Body)
		}
		if r.Path != "/backend-api/codex/responses" || r.Status != http.StatusOK || r.Model != "gpt-5-codex" ||
			!strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sim-oat-") || r.Header.Get("Chatgpt-Account-Id") != "acct-1" ||
			r.Header.Get("Originator") != "codex_cli_rs" || body["stream"] != true || body["store"] != false || body["max_output_tokens"] != nil {
			t.Errorf("%s: the backend got %s %d, headers %v, body %s", what, r.Path, r.Status, r.Header, r.Body)
		}
	}

	client := h.sdk(keyWeb)
	params := openai.ChatCompletionNewParams{Model: "codex", MaxTokens: openai.Int(64),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello there")}}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil || len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "" || resp.Usage.TotalTokens == 0 {
		t.Fatalf("chat = %+v, %v", resp, err)
	}
	lastSent("a whole chat completion")
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("chat stream = %+v, %v", acc, err)
	}
	lastSent("a streamed chat completion")

	status, header, body := h.post(ctx, "/v1/responses", keyWeb, `{"model":"codex","input":"hello there","max_output_tokens":64}`)
	var answer struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Type string `json:"type"`
		} `json:"output"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "application/json") ||
		answer.Object != "response" || answer.Status != "completed" || len(answer.Output) == 0 || answer.Usage.OutputTokens == 0 {
		t.Fatalf("a whole Responses answer: %d %s %s (%v)", status, header.Get("Content-Type"), body, err)
	}
	lastSent("a whole Responses answer")
	status, header, body = h.post(ctx, "/v1/responses", keyWeb, `{"model":"codex","input":"hello there","stream":true}`)
	if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") || !strings.Contains(body, "response.completed") {
		t.Fatalf("a streamed Responses answer: %d %s %s", status, header.Get("Content-Type"), body)
	}
	lastSent("a streamed Responses answer")

	// Claude Code and Gemini CLI on a Codex model, through the chained
	// translators; Codex itself reaches the backend with its headers.
	for _, c := range []*callerSide{messagesCaller, geminiCaller} {
		if status, body := h.ask(ctx, c, keyWeb, "codex", "hello there", nil); status != http.StatusOK || !strings.Contains(body, c.answered) {
			t.Errorf("a %s caller: %d %s", c.protocol, status, body)
		}
		lastSent("a " + string(c.protocol) + " caller")
	}
	codex := map[string]string{"Originator": "codex_exec", "Session_id": "s-1", "Chatgpt-Account-Id": "acct-caller"}
	if status, body := h.ask(ctx, responsesCaller, keyWeb, "codex", "hello there", codex); status != http.StatusOK {
		t.Errorf("Codex: %d %s", status, body)
	}
	reqs := sim.Requests()
	if r := reqs[len(reqs)-1]; r.Header.Get("Originator") != "codex_exec" || r.Header.Get("Session_id") != "s-1" || r.Header.Get("Chatgpt-Account-Id") != "acct-1" {
		t.Errorf("Codex reached the backend with %v, want its originator and session, and the credential's account", r.Header)
	}
	if got := len(reqs) - before; got != 7 {
		t.Errorf("the backend got %d requests for 7 calls", got)
	}

	// The first answered request (once the token was in) and the seven.
	var answered []usageRecord
	eventually(t, 5*time.Second, "the usage of the eight answered requests", func() bool {
		answered = answered[:0]
		for _, rec := range h.usage(t, 1) {
			if rec.Status == http.StatusOK {
				answered = append(answered, rec)
			}
		}
		return len(answered) >= 8
	})
	for _, rec := range answered {
		if u := rec.Usage; !u.Measured || u.PromptTokens == 0 || u.CompletionTokens == 0 {
			t.Errorf("request %s (stream %v): usage %+v, want the backend's", rec.RequestID, rec.Stream, rec.Usage)
		}
	}
	if strings.Contains(h.logs.String(), refresh) || strings.Contains(h.logs.String(), "sim-oat-") {
		t.Error("a token reached the logs")
	}
}
