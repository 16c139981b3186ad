package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/sluicehq/sluice/internal/simulator"
)

// The Code Assist test catalog's Gemini CLI client, as Google's token
// endpoint knows it.
const (
	gcaClientID     = "gemini-cli-client-1"
	gcaClientSecret = "gca-client-SECRET-5d1e"
)

// codeAssistCatalog has a Code Assist endpoint for project proj-gca-1,
// reached with a Gemini CLI login's refresh token and its client's secret,
// for a Gemini alias and a chat alias; %[1]s is the test's directory,
// %[2]s the simulator.
const codeAssistCatalog = tokenKeepingServer + `endpoints:
  - {id: ep-gca, base_url: %[2]s, protocols: [gemini.generate], code_assist: {project: proj-gca-1}}
credentials:
  - id: cred-gca
    oauth: {token_url: %[2]s/oauth/token, client_id: ` + gcaClientID + `, refresh_token_file: %[1]s/refresh-token, client_secret_file: %[1]s/client-secret}
    endpoints: [ep-gca]
models:
  - alias: gem-gca
    protocol: gemini.generate
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-gca]}]
  - alias: chat-gca
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-gca]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// codeAssistGateway is a gateway in front of codeAssistCatalog's Code
// Assist endpoint, once its credential has its first token.
type codeAssistGateway struct {
	*harness
	sim *simulator.Simulator
}

func startCodeAssistGateway(t *testing.T) *codeAssistGateway {
	t.Helper()
	h, sim := startSimulatedCloud(t, codeAssistCatalog, func(sim *simulator.Simulator, _ string) map[string]string {
		sim.RequireClientSecret(gcaClientID, gcaClientSecret)
		return map[string]string{
			"refresh-token": sim.NewRefreshToken(simulator.Behavior{}, time.Hour),
			"client-secret": gcaClientSecret + "\n",
		}
	}, map[string]string{"/v1beta/models/gem-gca:generateContent": `{"contents":[{"parts":[{"text":"hi"}]}]}`})
	return &codeAssistGateway{harness: h, sim: sim}
}

// checkHosted checks the last request to Code Assist: method's URL, the
// refreshed access token as a bearer token, and (for a generation) the
// Gemini request wrapped with the model and the endpoint's project.
func (g *codeAssistGateway) checkHosted(method, query string) {
	g.t.Helper()
	reqs := g.sim.HostedRequests()
	r := reqs[len(reqs)-1]
	var body struct {
		Model, Project string
		Request        map[string]json.RawMessage
	}
	_ = json.Unmarshal(r.Body, &body)
	switch {
	case r.Path != "/v1internal:"+method || r.Query != query:
		g.t.Errorf("code assist request %s?%s, want /v1internal:%s?%s", r.Path, r.Query, method, query)
	case !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sim-oat-") || r.Header.Get("X-Goog-Api-Key") != "":
		g.t.Errorf("code assist request authorized with %q (x-goog-api-key %q), want a refreshed bearer token", r.Header.Get("Authorization"), r.Header.Get("X-Goog-Api-Key"))
	case body.Request["contents"] == nil:
		g.t.Errorf("code assist request body %s: want the Gemini request's contents in request", r.Body)
	case method == "countTokens" && (body.Model != "" || string(body.Request["model"]) != `"models/gemini-2.5-flash"`):
		g.t.Errorf("code assist count %s: want request.model models/gemini-2.5-flash", r.Body)
	case method != "countTokens" && (body.Model != "gemini-2.5-flash" || body.Project != "proj-gca-1"):
		g.t.Errorf("code assist request %s: want model gemini-2.5-flash in project proj-gca-1", r.Body)
	}
}

// Google's genai SDK and the OpenAI SDK through Sluice on a Code Assist
// endpoint: Gemini's generateContent passed through in Code Assist's
// envelope, whole and streamed, a token count, and chat translated to
// Gemini then wrapped, each answer taken out of the envelope for its
// caller, with the usage Code Assist reported in every usage record. The
// credential's token came from a refresh with the client secret.
func TestCodeAssistThroughSluice(t *testing.T) {
	g := startCodeAssistGateway(t)
	ctx := t.Context()
	if got := g.sim.LastTokenRequest().Get("client_secret"); got != gcaClientSecret {
		t.Errorf("the refresh sent client_secret %q, want the catalog's client secret", got)
	}
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: keyWeb, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: g.url("/"), APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Models.GenerateContent(ctx, "gem-gca", genai.Text("hello there"), nil)
	if err != nil || resp.Text() == "" || resp.UsageMetadata == nil || resp.UsageMetadata.PromptTokenCount == 0 {
		t.Fatalf("GenerateContent = %+v, %v", resp, err)
	}
	g.checkHosted("generateContent", "")
	var text strings.Builder
	chunks := 0
	for chunk, err := range client.Models.GenerateContentStream(ctx, "gem-gca", genai.Text("hello there"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(chunk.Text())
		chunks++
	}
	if text.String() != resp.Text() || chunks < 2 {
		t.Errorf("stream of %d chunks %q, want the whole answer's text %q in chunks", chunks, text.String(), resp.Text())
	}
	g.checkHosted("streamGenerateContent", "alt=sse")
	count, err := client.Models.CountTokens(ctx, "gem-gca", genai.Text("hello there"), nil)
	if err != nil || count.TotalTokens == 0 {
		t.Errorf("CountTokens = %+v, %v", count, err)
	}
	g.checkHosted("countTokens", "")

	chat, err := g.sdk(keyWeb).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "chat-gca", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
	})
	if err != nil || len(chat.Choices) != 1 || chat.Choices[0].Message.Content != resp.Text() || chat.Usage.PromptTokens == 0 {
		t.Fatalf("chat on Code Assist = %+v, %v", chat, err)
	}
	g.checkHosted("generateContent", "")
	stream := g.sdk(keyWeb).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "chat-gca", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != resp.Text() || acc.Usage.PromptTokens == 0 {
		t.Fatalf("chat stream on Code Assist = %+v, %v", acc.ChatCompletion, err)
	}
	g.checkHosted("streamGenerateContent", "alt=sse")

	// Two Gemini generations and two chats (a count spends no tokens),
	// after the probes that waited for the first token.
	want := []string{"gemini.generate stream=false", "gemini.generate stream=true", "openai.chat stream=false", "openai.chat stream=true"}
	measured := map[string]int{}
	eventually(t, 5*time.Second, "a usage record of each request with Code Assist's usage", func() bool {
		clear(measured)
		for _, rec := range g.usage(t, 1) {
			if rec.Status == http.StatusOK && rec.Usage.Measured && rec.Usage.PromptTokens > 0 && rec.Usage.CompletionTokens > 0 &&
				len(rec.Executions) == 1 && rec.Executions[0].EndpointID == "ep-gca" {
				measured[fmt.Sprintf("%s stream=%v", rec.Protocol, rec.Stream)]++
			}
		}
		return len(measured) == len(want)
	})
	for _, w := range want {
		if measured[w] == 0 {
			t.Errorf("no usage record of a %s request with Code Assist's usage; have %v", w, measured)
		}
	}
}
