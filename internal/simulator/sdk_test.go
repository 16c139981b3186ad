//go:build !sluice_fuzz

package simulator_test

import (
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluicehq/sluice/internal/simulator"
)

// The official SDK is the reference client: if it reads the simulator's
// answers, gateways that speak to OpenAI will too.

func sdkClient(srv *httptest.Server, key string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(srv.URL+"/v1/"),
		option.WithAPIKey(key),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0), // the tests look at single answers
	)
}

func sdkParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello to the world")},
	}
}

func TestSDKChat(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	client := sdkClient(srv, "sk-test")
	want := complete(t, srv.URL, chatBody)

	got, err := client.Chat.Completions.New(t.Context(), sdkParams())
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != want.Choices[0].Message.Content || got.Choices[0].FinishReason != "stop" {
		t.Errorf("SDK choice = %q %q, want %q stop", got.Choices[0].Message.Content, got.Choices[0].FinishReason, want.Choices[0].Message.Content)
	}
	if got.Usage.PromptTokens != 11 || got.Usage.CompletionTokens != 16 || got.Usage.TotalTokens != 27 {
		t.Errorf("SDK usage = %+v, want 11 + 16 = 27", got.Usage)
	}

	p := sdkParams()
	p.MaxCompletionTokens = openai.Int(4)
	got, err = client.Chat.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].FinishReason != "length" || got.Usage.CompletionTokens != 4 {
		t.Errorf("SDK with max_completion_tokens 4 = %q, %d tokens; want length, 4", got.Choices[0].FinishReason, got.Usage.CompletionTokens)
	}
}

func TestSDKStream(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	client := sdkClient(srv, "sk-test")
	want := complete(t, srv.URL, chatBody)

	p := sdkParams()
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := client.Chat.Completions.NewStreaming(t.Context(), p)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if chunks != 19 {
		t.Errorf("%d chunks, want 19 (role, 16 words, finish, usage)", chunks)
	}
	if got := acc.Choices[0].Message.Content; got != want.Choices[0].Message.Content {
		t.Errorf("accumulated %q, want %q", got, want.Choices[0].Message.Content)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens != 27 {
		t.Errorf("accumulated finish %q usage %+v, want stop and 27 tokens", acc.Choices[0].FinishReason, acc.Usage)
	}
}

func TestSDKStreamErrors(t *testing.T) {
	_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{
		"error": {ErrorAfter: 2},
		"cut":   {CutAfter: 2},
	}})
	for _, key := range []string{"error", "cut"} {
		t.Run(key, func(t *testing.T) {
			client := sdkClient(srv, key)
			stream := client.Chat.Completions.NewStreaming(t.Context(), sdkParams())
			for stream.Next() {
			}
			if stream.Err() == nil {
				t.Error("stream.Err() = nil, want the failure surfaced")
			}
		})
	}
}

func TestSDKEmbeddings(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	client := sdkClient(srv, "sk-test")
	params := openai.EmbeddingNewParams{
		Model:      openai.EmbeddingModelTextEmbedding3Small,
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta gamma"}},
		Dimensions: openai.Int(6),
	}
	floats, err := client.Embeddings.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	b64, err := client.Embeddings.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(floats.Data) != 2 || len(floats.Data[1].Embedding) != 6 || floats.Usage.TotalTokens != 3 {
		t.Fatalf("SDK embeddings = %d items, %d dims, %d tokens; want 2, 6, 3", len(floats.Data), len(floats.Data[1].Embedding), floats.Usage.TotalTokens)
	}
	for i := range floats.Data {
		// The float form is float32's shortest decimal, so compare as float32.
		if !slices.Equal(float32s(floats.Data[i].Embedding), float32s(b64.Data[i].Embedding)) {
			t.Errorf("item %d: float %v, base64 %v", i, floats.Data[i].Embedding, b64.Data[i].Embedding)
		}
	}
}

func TestSDKModelsAndErrors(t *testing.T) {
	_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{
		"limited": {FailStatus: 429, RetryAfter: 2 * time.Second},
	}})
	client := sdkClient(srv, "sk-test")
	page, err := client.Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != len(simulator.DefaultModels) || page.Data[0].ID != simulator.DefaultModels[0] {
		t.Errorf("SDK models = %+v, want the defaults", page.Data)
	}

	limited := sdkClient(srv, "limited")
	_, err = limited.Chat.Completions.New(t.Context(), sdkParams())
	apiErr, ok := errors.AsType[*openai.Error](err)
	if !ok {
		t.Fatalf("err = %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" || apiErr.Type != "requests" {
		t.Errorf("SDK error = %d %q %q, want 429 rate_limit_exceeded requests", apiErr.StatusCode, apiErr.Code, apiErr.Type)
	}
}

func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = float32(f)
	}
	return out
}
