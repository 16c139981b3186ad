package app_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me something about Sluice")},
	}
}

func TestSDKChat(t *testing.T) {
	h := newHarness(t)
	c := h.sdk(keyWeb)
	resp, err := c.Chat.Completions.New(t.Context(), chatParams("fast"))
	if err != nil {
		t.Fatalf("Chat.Completions.New: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens == 0 {
		t.Errorf("completion = %+v, want one choice with content and usage", resp)
	}
	recs := h.simA.Requests()
	if len(recs) != 1 || recs[0].Model != "gpt-4o-mini" {
		t.Fatalf("upstream saw %d requests (model %q), want 1 for gpt-4o-mini", len(recs), recs[0].Model)
	}
	if k := recs[0].Key; k != secretA1 && k != secretA2 {
		t.Errorf("upstream key = %q, want one of ep-a's credentials", k)
	}
	// The caller's bytes pass through: only the model name changed.
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(recs[0].Body, &sent); err != nil || string(sent["model"]) != `"gpt-4o-mini"` || sent["messages"] == nil {
		t.Errorf("upstream body = %s, want the caller's body with the upstream model", recs[0].Body)
	}
	rec := h.usage(t, 1)[0]
	if rec.KeyID != "web" || rec.Alias != "fast" || !rec.Usage.Measured || rec.Usage.CompletionTokens != resp.Usage.CompletionTokens || len(rec.Executions) != 1 {
		t.Errorf("usage record = %+v, want one measured execution for key web", rec)
	}
}

func TestSDKStreamHidesTheUsageChunkSluiceAskedFor(t *testing.T) {
	h := newHarness(t)
	c := h.sdk(keyWeb)
	plain, err := c.Chat.Completions.New(t.Context(), chatParams("fast"))
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Chat.Completions.NewStreaming(t.Context(), chatParams("fast"))
	var text strings.Builder
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if len(ch.Choices) == 0 {
			t.Errorf("chunk %d has no choices: the usage chunk reached a caller that did not ask for it", chunks)
			continue
		}
		text.WriteString(ch.Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text.String() != plain.Choices[0].Message.Content {
		t.Errorf("streamed text = %q, want the same deterministic answer %q", text.String(), plain.Choices[0].Message.Content)
	}
	last := h.simA.Requests()[1]
	if !last.Stream || !strings.Contains(string(last.Body), `"include_usage":true`) {
		t.Errorf("upstream body = %s, want stream usage requested", last.Body)
	}
	recs := h.usage(t, 2)
	streamed := recs[slices.IndexFunc(recs, func(r usageRecord) bool { return r.Stream })]
	if !streamed.Usage.Measured || streamed.Usage.CompletionTokens != plain.Usage.CompletionTokens {
		t.Errorf("stream usage = %+v, want measured %d completion tokens", streamed.Usage, plain.Usage.CompletionTokens)
	}
}

func TestSDKStreamWithUsageRequested(t *testing.T) {
	h := newHarness(t)
	p := chatParams("fast")
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := h.sdk(keyWeb).Chat.Completions.NewStreaming(t.Context(), p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Usage.TotalTokens == 0 || acc.Choices[0].Message.Content == "" {
		t.Errorf("accumulated = %+v, want content and the usage chunk the caller asked for", acc.ChatCompletion)
	}
}

func TestSDKEmbeddings(t *testing.T) {
	h := newHarness(t)
	resp, err := h.sdk(keyWeb).Embeddings.New(t.Context(), openai.EmbeddingNewParams{
		Model: "embed",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta"}},
	})
	if err != nil {
		t.Fatalf("Embeddings.New: %v", err)
	}
	if len(resp.Data) != 2 || len(resp.Data[0].Embedding) == 0 || resp.Usage.PromptTokens == 0 {
		t.Errorf("embeddings = %+v, want two vectors and usage", resp)
	}
	if rec := h.usage(t, 1)[0]; rec.Usage.PromptTokens != resp.Usage.PromptTokens {
		t.Errorf("usage record prompt tokens = %d, want %d", rec.Usage.PromptTokens, resp.Usage.PromptTokens)
	}
}

func TestSDKModelsListsWhatTheKeyMayUse(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		key  string
		want []string
	}{
		{keyWeb, []string{"embed", "fast", "only-a"}},
		{keyScoped, []string{"fast"}},
	}
	for _, tt := range tests {
		page, err := h.sdk(tt.key).Models.List(t.Context())
		if err != nil {
			t.Fatalf("Models.List: %v", err)
		}
		var got []string
		for _, m := range page.Data {
			got = append(got, m.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Models.List = %v, want %v", got, tt.want)
		}
	}
}
