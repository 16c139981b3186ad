package app_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/sluicehq/sluice/internal/simulator"
)

// geminiAliases are the Gemini aliases of newGeminiHarness, on ep-gem.
const geminiAliases = `  - alias: gem
    protocol: gemini.generate
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-gem]}]
  - alias: gem-embed
    protocol: gemini.embed
    deployments: [{model: gemini-embedding-001, endpoints: [ep-gem]}]
  - alias: gem-on-chat
    protocol: gemini.generate
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
`

// newGeminiHarness serves gem (Gemini generateContent) and gem-embed
// (Gemini embeddings) from simA's Gemini API, passed through, and
// gem-on-chat, a Gemini alias on an OpenAI chat endpoint.
func newGeminiHarness(t *testing.T) *harness {
	t.Helper()
	return newProtocolHarness(t, "ep-gem", "gemini.generate, gemini.embed", geminiAliases)
}

// geminiDo sends a raw request to the gateway: the key in x-goog-api-key
// ("header"), ?key= ("query") or as a bearer token ("bearer").
func geminiDo(t *testing.T, h *harness, method, path, key, where, body string) (int, http.Header, string) {
	t.Helper()
	if where == "query" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "key=" + key
	}
	req, err := http.NewRequest(method, h.url(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	switch where {
	case "header":
		req.Header.Set("X-Goog-Api-Key", key)
	case "bearer":
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// geminiChunk is what the tests read of a GenerateContentResponse.
type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text         string         `json:"text"`
				FunctionCall map[string]any `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount int `json:"promptTokenCount"`
	} `json:"usageMetadata"`
	Error *struct {
		Code   int    `json:"code"`
		Status string `json:"status"`
	} `json:"error"`
}

// googleErr is Google's error envelope as the tests read it.
type googleErr struct {
	Error struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details"`
	} `json:"error"`
}

// readGoogleError decodes body as Google's envelope and returns it with the
// reason of its ErrorInfo detail (Sluice's code).
func readGoogleError(t *testing.T, body string) (googleErr, string) {
	t.Helper()
	var e googleErr
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Status == "" {
		t.Fatalf("body %s is not Google's error envelope", body)
	}
	for _, d := range e.Error.Details {
		if d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			r, _ := d["reason"].(string)
			return e, r
		}
	}
	return e, ""
}

const geminiHello = `{"contents":[{"role":"user","parts":[{"text":"hello there"}]}]}`

func TestGeminiPassThrough(t *testing.T) {
	h := newGeminiHarness(t)
	for _, version := range []string{"/v1beta", "/v1"} {
		status, _, body := geminiDo(t, h, "POST", version+"/models/gem:generateContent", keyWeb, "header", geminiHello)
		var c geminiChunk
		if err := json.Unmarshal([]byte(body), &c); status != 200 || err != nil || len(c.Candidates) != 1 || c.Candidates[0].FinishReason != "STOP" ||
			c.UsageMetadata == nil {
			t.Fatalf("%s generateContent = %d %s, want an answer", version, status, body)
		}
		rec := lastRequest(t, h.simA)
		if rec.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || rec.Key != secretA1 || string(rec.Body) != geminiHello {
			t.Errorf("simulator got %s key %q body %s; want the deployment's model in the path, the credential, the caller's body unchanged",
				rec.Path, rec.Key, rec.Body)
		}
	}
}

func TestGeminiStreams(t *testing.T) {
	h := newGeminiHarness(t)
	// ?alt=sse: server-sent events, passed through.
	status, hdr, body := geminiDo(t, h, "POST", "/v1beta/models/gem:streamGenerateContent?alt=sse", keyWeb, "header", geminiHello)
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("SSE stream = %d %s %s", status, hdr.Get("Content-Type"), body)
	}
	var events []geminiChunk
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var c geminiChunk
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			events = append(events, c)
		}
	}
	if len(events) < 3 || events[len(events)-1].Candidates[0].FinishReason != "STOP" || events[len(events)-1].UsageMetadata == nil {
		t.Fatalf("SSE stream has %d events, want several ending with finishReason and usage:\n%s", len(events), body)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" {
		t.Errorf("simulator got %s", rec.Path)
	}

	// Without alt: one JSON array, written as the chunks arrive.
	status, hdr, arrayBody := geminiDo(t, h, "POST", "/v1/models/gem:streamGenerateContent", keyWeb, "query", geminiHello)
	var chunks []geminiChunk
	if err := json.Unmarshal([]byte(arrayBody), &chunks); status != 200 || err != nil || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("JSON-array stream = %d %s %s (%v)", status, hdr.Get("Content-Type"), arrayBody, err)
	}
	if len(chunks) != len(events) || chunks[len(chunks)-1].Candidates[0].FinishReason != "STOP" || !strings.Contains(arrayBody, "},\r\n{") {
		t.Errorf("JSON array has %d chunks, want the %d of the event stream, separated as Gemini does: %s", len(chunks), len(events), arrayBody)
	}

	// A stream broken after the 200 ends with Gemini's error chunk, in
	// both framings.
	h.simA.SetKey(secretA1, simulator.Behavior{ErrorAfter: 2})
	_, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem:streamGenerateContent?alt=sse", keyWeb, "header", geminiHello)
	if !strings.HasSuffix(strings.TrimSpace(body), `"domain":"sluice"}]}}`) || !strings.Contains(body, `"reason":"upstream_stream_failed"`) {
		t.Errorf("broken SSE stream ends %q, want Gemini's error event with Sluice's code", body[max(len(body)-200, 0):])
	}
	_, _, arrayBody = geminiDo(t, h, "POST", "/v1beta/models/gem:streamGenerateContent", keyWeb, "header", geminiHello)
	if err := json.Unmarshal([]byte(arrayBody), &chunks); err != nil || chunks[len(chunks)-1].Error == nil || chunks[len(chunks)-1].Error.Code != 500 {
		t.Errorf("broken JSON-array stream = %s (%v), want an array whose last element is the error", arrayBody, err)
	}
}

func TestGeminiCountEmbedAndModels(t *testing.T) {
	h := newGeminiHarness(t)
	status, _, body := geminiDo(t, h, "POST", "/v1beta/models/gem:countTokens", keyWeb, "bearer", geminiHello)
	var count struct {
		TotalTokens int `json:"totalTokens"`
	}
	if err := json.Unmarshal([]byte(body), &count); status != 200 || err != nil || count.TotalTokens == 0 {
		t.Fatalf("countTokens = %d %s", status, body)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1beta/models/gemini-2.5-flash:countTokens" {
		t.Errorf("count went to %s", rec.Path)
	}

	// An OpenAI chat upstream has no count: Sluice estimates, in Gemini's shape.
	before := len(h.simA.Requests())
	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem-on-chat:countTokens", keyWeb, "header", geminiHello)
	if err := json.Unmarshal([]byte(body), &count); status != 200 || err != nil || count.TotalTokens != len(geminiHello)/4+1 || len(h.simA.Requests()) != before {
		t.Errorf("countTokens on a chat upstream = %d %s after %d upstream requests, want Sluice's estimate and none sent", status, body, len(h.simA.Requests())-before)
	}

	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem-embed:embedContent", keyWeb, "header",
		`{"content":{"parts":[{"text":"a river"}]},"outputDimensionality":4}`)
	var one struct {
		Embedding struct {
			Values []float64 `json:"values"`
		} `json:"embedding"`
	}
	if err := json.Unmarshal([]byte(body), &one); status != 200 || err != nil || len(one.Embedding.Values) != 4 {
		t.Fatalf("embedContent = %d %s", status, body)
	}
	batch := `{"requests":[{"model":"models/gem-embed","content":{"parts":[{"text":"a"}]}},{"model":"models/gem-embed","content":{"parts":[{"text":"b"}]}}]}`
	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem-embed:batchEmbedContents", keyWeb, "header", batch)
	var many struct {
		Embeddings []struct {
			Values []float64 `json:"values"`
		} `json:"embeddings"`
	}
	if err := json.Unmarshal([]byte(body), &many); status != 200 || err != nil || len(many.Embeddings) != 2 {
		t.Fatalf("batchEmbedContents = %d %s", status, body)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" ||
		strings.Count(string(rec.Body), `"model":"models/gemini-embedding-001"`) != 2 {
		t.Errorf("simulator got %s %s, want the batch's models made the deployment's", rec.Path, rec.Body)
	}
	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem-embed:batchEmbedContents", keyWeb, "header",
		strings.Replace(batch, "models/gem-embed", "models/other", 1))
	if _, reason := readGoogleError(t, body); status != 400 || reason != "invalid_request" {
		t.Errorf("a batch naming another model = %d %s, want 400 invalid_request", status, body)
	}

	for _, path := range []string{"/v1beta/models", "/v1/models"} {
		status, _, body = geminiDo(t, h, "GET", path, keyWeb, "header", "")
		var list struct {
			Models []struct {
				Name                       string   `json:"name"`
				SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
			} `json:"models"`
		}
		err := json.Unmarshal([]byte(body), &list)
		var names []string
		for _, m := range list.Models {
			names = append(names, m.Name)
		}
		// fast and only-a name no protocol: they answer Gemini callers too.
		want := "[models/fast models/gem models/gem-embed models/gem-on-chat models/only-a]"
		if status != 200 || err != nil || fmt.Sprint(names) != want ||
			!slices.Contains(list.Models[2].SupportedGenerationMethods, "embedContent") {
			t.Errorf("GET %s with a Gemini key = %d %s, want the aliases Gemini callers may call, %s", path, status, body, want)
		}
	}
	if status, _, body = geminiDo(t, h, "GET", "/v1/models", keyWeb, "bearer", ""); status != 200 || !strings.Contains(body, `"object":"list"`) {
		t.Errorf("OpenAI's GET /v1/models = %d %s, want OpenAI's list", status, body)
	}
	if status, _, body = geminiDo(t, h, "GET", "/v1beta/models/gem", keyWeb, "query", ""); status != 200 || !strings.Contains(body, `"name":"models/gem"`) {
		t.Errorf("GET /v1beta/models/gem = %d %s", status, body)
	}
	status, _, body = geminiDo(t, h, "GET", "/v1beta/models/embed", keyWeb, "header", "")
	if e, reason := readGoogleError(t, body); status != 404 || e.Error.Status != "NOT_FOUND" || reason != "model_not_found" {
		t.Errorf("GET an OpenAI embeddings alias as a Gemini model = %d %s, want 404 NOT_FOUND", status, body)
	}
}

func TestGeminiKeysAndErrors(t *testing.T) {
	h := newGeminiHarness(t)
	for _, where := range []string{"header", "query", "bearer"} {
		if status, _, body := geminiDo(t, h, "POST", "/v1beta/models/gem:generateContent", keyWeb, where, geminiHello); status != 200 {
			t.Errorf("key in the %s: %d %s", where, status, body)
		}
	}
	status, _, body := geminiDo(t, h, "POST", "/v1beta/models/gem:generateContent", "sk-wrong", "header", geminiHello)
	if e, reason := readGoogleError(t, body); status != 401 || e.Error.Code != 401 || e.Error.Status != "UNAUTHENTICATED" || reason == "" {
		t.Errorf("a wrong key = %d %s, want 401 UNAUTHENTICATED with Sluice's code", status, body)
	}
	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/nope:generateContent", keyWeb, "header", geminiHello)
	if e, reason := readGoogleError(t, body); status != 404 || e.Error.Status != "NOT_FOUND" || reason != "model_not_found" {
		t.Errorf("an unknown model = %d %s, want 404 NOT_FOUND model_not_found", status, body)
	}
	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem:generateContent", keyWeb, "header",
		`{"generationConfig":{"maxOutputTokens":5},"generation_config":{"maxOutputTokens":5000}}`)
	if _, reason := readGoogleError(t, body); status != 400 || reason != "invalid_request" {
		t.Errorf("generationConfig twice = %d %s, want 400", status, body)
	}
	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem:nothing", keyWeb, "header", geminiHello)
	if e, _ := readGoogleError(t, body); status != 404 || e.Error.Status != "NOT_FOUND" {
		t.Errorf("an unknown method = %d %s, want 404", status, body)
	}
}

// TestGeminiStreamOfSeveralCandidatesIsRefused: Sluice reads a Gemini
// stream's end from the chunk with a finishReason, which each candidate
// sends apart: a stream of more than one candidate is refused before
// anything is sent, whatever the spelling; one candidate streams, and a
// whole answer may have several.
func TestGeminiStreamOfSeveralCandidatesIsRefused(t *testing.T) {
	h := newGeminiHarness(t)
	const stream = "/v1beta/models/gem:streamGenerateContent?alt=sse"
	for _, config := range []string{`"generationConfig":{"candidateCount":2}`, `"generation_config":{"candidate_count":"3"}`} {
		body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],` + config + `}`
		status, _, answer := geminiDo(t, h, "POST", stream, keyWeb, "header", body)
		if _, reason := readGoogleError(t, answer); status != 400 || reason != "invalid_request" {
			t.Errorf("stream with %s = %d %s, want 400 invalid_request", config, status, answer)
		}
	}
	if n := len(h.simA.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider, want none", n)
	}
	one := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":1}}`
	if status, _, answer := geminiDo(t, h, "POST", stream, keyWeb, "header", one); status != 200 {
		t.Errorf("stream of one candidate = %d %s, want 200", status, answer)
	}
	two := strings.Replace(one, `"candidateCount":1`, `"candidateCount":2`, 1)
	if status, _, answer := geminiDo(t, h, "POST", "/v1beta/models/gem:generateContent", keyWeb, "header", two); status != 200 {
		t.Errorf("generateContent of two candidates = %d %s, want 200", status, answer)
	}
}

func TestGeminiRateLimitRetryInfo(t *testing.T) {
	h := newGeminiHarness(t)
	h.writeCatalog(strings.Replace(h.catalog(), "{id: web, tenant: web, secret_env: KEY_WEB}",
		"{id: web, tenant: web, secret_env: KEY_WEB, limits: {rpm: 1}}", 1))
	eventually(t, 5*time.Second, "the catalog with rpm 1 is loaded", func() bool {
		status, _, _ := geminiDo(t, h, "POST", "/v1beta/models/gem:generateContent", keyWeb, "header", geminiHello)
		return status == 429
	})
	status, hdr, body := geminiDo(t, h, "POST", "/v1beta/models/gem:generateContent", keyWeb, "header", geminiHello)
	e, reason := readGoogleError(t, body)
	var delay string
	for _, d := range e.Error.Details {
		if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo" {
			delay, _ = d["retryDelay"].(string)
		}
	}
	if status != 429 || e.Error.Status != "RESOURCE_EXHAUSTED" || reason == "" || delay == "" || hdr.Get("Retry-After") == "" ||
		delay != hdr.Get("Retry-After")+"s" {
		t.Errorf("over the key's rpm = %d %s (Retry-After %q), want 429 RESOURCE_EXHAUSTED with a RetryInfo matching Retry-After",
			status, body, hdr.Get("Retry-After"))
	}
}

// TestGeminiSDK drives the gateway with Google's Go SDK, as a Gemini
// client configured with Sluice's base URL and key does.
func TestGeminiSDK(t *testing.T) {
	h := newGeminiHarness(t)
	ctx := t.Context()
	for _, version := range []string{"v1beta", "v1"} {
		client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: keyWeb, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: h.url("/"), APIVersion: version}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Models.GenerateContent(ctx, "gem", genai.Text("hello there"), nil)
		if err != nil || resp.Text() == "" || resp.UsageMetadata == nil || resp.UsageMetadata.PromptTokenCount == 0 {
			t.Fatalf("%s GenerateContent = %+v, %v", version, resp, err)
		}
		var streamed strings.Builder
		var last *genai.GenerateContentResponse
		for chunk, err := range client.Models.GenerateContentStream(ctx, "gem", genai.Text("hello there"), nil) {
			if err != nil {
				t.Fatalf("%s stream: %v", version, err)
			}
			streamed.WriteString(chunk.Text())
			last = chunk
		}
		if streamed.String() != resp.Text() || last == nil || last.Candidates[0].FinishReason != genai.FinishReasonStop {
			t.Errorf("%s stream said %q, want %q ending with STOP", version, streamed.String(), resp.Text())
		}
		tools := []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather",
			ParametersJsonSchema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}}
		call, err := client.Models.GenerateContent(ctx, "gem", genai.Text("please "+simulator.ToolWord), &genai.GenerateContentConfig{Tools: tools})
		if err != nil || len(call.FunctionCalls()) != 1 || call.FunctionCalls()[0].Name != "get_weather" || call.FunctionCalls()[0].Args["city"] == nil {
			t.Errorf("%s a tool call = %+v, %v", version, call, err)
		}
		count, err := client.Models.CountTokens(ctx, "gem", genai.Text("hello there"), nil)
		if err != nil || count.TotalTokens == 0 {
			t.Errorf("%s CountTokens = %+v, %v", version, count, err)
		}
		emb, err := client.Models.EmbedContent(ctx, "gem-embed", genai.Text("a river"), nil)
		if err != nil || len(emb.Embeddings) != 1 || len(emb.Embeddings[0].Values) == 0 {
			t.Errorf("%s EmbedContent = %+v, %v", version, emb, err)
		}
		model, err := client.Models.Get(ctx, "gem", nil)
		if err != nil || model.Name != "models/gem" {
			t.Errorf("%s Models.Get = %+v, %v", version, model, err)
		}
		_, err = client.Models.GenerateContent(ctx, "nope", genai.Text("hi"), nil)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 404 || apiErr.Status != "NOT_FOUND" || len(apiErr.Details) == 0 ||
			apiErr.Details[0]["reason"] != "model_not_found" {
			t.Errorf("%s an unknown model: %v, want an APIError 404 with Sluice's code in its details", version, err)
		}
	}
}
