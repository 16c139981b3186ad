package app_test

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// The OpenAI SDK on Azure OpenAI through Sluice: a chat completion, a
// stream with usage and an embedding with the resource's key, sent to the
// deployment's URL with its api-version; and a chat completion with an
// Entra ID application's token, obtained once with the client_credentials
// grant.
func TestAzureOpenAIThroughSluice(t *testing.T) {
	g := startCloudGateway(t)
	ctx := t.Context()
	client := g.sdk(keyWeb)
	params := openai.ChatCompletionNewParams{Model: "azure-gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil || len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "" || resp.Usage.TotalTokens == 0 {
		t.Fatalf("chat = %+v, %v", resp, err)
	}
	r := g.lastHosted()
	if r.Path != "/openai/deployments/my-gpt-4o/chat/completions" || r.Query != "api-version=2024-10-21" ||
		r.Header.Get("Api-Key") != azureKey || r.Header.Get("Authorization") != "" {
		t.Errorf("azure request %s?%s, api-key %q, authorization %q", r.Path, r.Query, r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
	}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content == "" {
		t.Fatalf("stream = %+v, %v", acc, err)
	}
	if !strings.Contains(string(g.lastHosted().Body), `"include_usage":true`) {
		t.Error("the stream did not ask Azure for usage")
	}

	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "azure-embed", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil || len(emb.Data) == 0 || g.lastHosted().Path != "/openai/deployments/my-embedding/embeddings" {
		t.Fatalf("embedding = %+v, %v (path %s)", emb, err, g.lastHosted().Path)
	}

	params.Model = "entra-gpt"
	for range 2 {
		if resp, err = client.Chat.Completions.New(ctx, params); err != nil || resp.Choices[0].Message.Content == "" {
			t.Fatalf("entra chat = %+v, %v", resp, err)
		}
	}
	r = g.lastHosted()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sim-cat-") || r.Header.Get("Api-Key") != "" || r.Path != "/openai/deployments/my-gpt-4o/chat/completions" {
		t.Errorf("entra request %s, authorization %q, api-key %q", r.Path, r.Header.Get("Authorization"), r.Header.Get("Api-Key"))
	}
	if n := g.sim.CloudTokensIssued(); n != 2 {
		t.Errorf("%d tokens issued, want 2: one for the application, one for the service account, however many requests", n)
	}
	if strings.Contains(g.logs.String(), entraSecret) || strings.Contains(g.logs.String(), azureKey) || strings.Contains(g.logs.String(), "sim-cat-") {
		t.Error("a secret reached the logs")
	}
}
