package app_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"
)

// Embeddings across OpenAI and Gemini: the OpenAI SDK on a Gemini
// embedding model (every input one request of a batchEmbedContents, and no
// usage, recorded unmeasured) and Google's SDK on an OpenAI embedding
// model (embedContent and a batch, usage measured from OpenAI's answer).
func TestEmbeddingsAcrossOpenAIAndGemini(t *testing.T) {
	h := newMatrixHarness(t)
	ctx := t.Context()
	resp, err := h.sdk(keyWeb).Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:      "embed-on-gem",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta gamma"}},
		Dimensions: openai.Int(4),
	})
	if err != nil || len(resp.Data) != 2 || len(resp.Data[0].Embedding) != 4 || len(resp.Data[1].Embedding) != 4 || resp.Data[1].Index != 1 || resp.Usage.PromptTokens != 0 {
		t.Fatalf("Embeddings.New on a Gemini model = %+v, %v; want two vectors of 4 in order, no usage", resp, err)
	}
	rec := lastRequest(t, h.simA)
	var batch struct {
		Requests []struct {
			Model                string `json:"model"`
			OutputDimensionality int    `json:"outputDimensionality"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(rec.Body, &batch); err != nil || rec.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" || rec.Key != secretA1 ||
		len(batch.Requests) != 2 || batch.Requests[0].Model != "models/gemini-embedding-001" || batch.Requests[1].OutputDimensionality != 4 {
		t.Errorf("simulator got %s key %q body %s; want a batch of two for the deployment's model, 4 dimensions", rec.Path, rec.Key, rec.Body)
	}
	if u := h.usage(t, 1)[0]; u.Alias != "embed-on-gem" || u.Usage.Measured {
		t.Errorf("usage record %+v; want embed-on-gem unmeasured (Gemini reports no usage)", u)
	}

	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: keyWeb, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: h.url("/"), APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	dims := int32(4)
	emb, err := client.Models.EmbedContent(ctx, "gem-embed-on-openai",
		[]*genai.Content{genai.NewContentFromText("a river", genai.RoleUser), genai.NewContentFromText("a lake", genai.RoleUser)},
		&genai.EmbedContentConfig{OutputDimensionality: &dims, TaskType: "RETRIEVAL_DOCUMENT"})
	if err != nil || len(emb.Embeddings) != 2 || len(emb.Embeddings[0].Values) != 4 || emb.Embeddings[0].Values[0] == emb.Embeddings[1].Values[0] {
		t.Fatalf("EmbedContent on an OpenAI model = %+v, %v; want two different vectors of 4", emb, err)
	}
	var sent struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions int      `json:"dimensions"`
	}
	rec = lastRequest(t, h.simA)
	if err := json.Unmarshal(rec.Body, &sent); err != nil || rec.Path != "/v1/embeddings" || sent.Model != "text-embedding-3-small" ||
		len(sent.Input) != 2 || sent.Input[1] != "a lake" || sent.Dimensions != 4 {
		t.Errorf("simulator got %s %s; want OpenAI embeddings of the two texts, 4 dimensions", rec.Path, rec.Body)
	}
	status, _, body := geminiDo(t, h, "POST", "/v1beta/models/gem-embed-on-openai:embedContent", keyWeb, "header",
		`{"content":{"parts":[{"text":"a river"}]},"outputDimensionality":4}`)
	var one struct {
		Embedding struct {
			Values []float32 `json:"values"`
		} `json:"embedding"`
	}
	if err := json.Unmarshal([]byte(body), &one); status != 200 || err != nil || len(one.Embedding.Values) != 4 || one.Embedding.Values[0] != emb.Embeddings[0].Values[0] {
		t.Errorf("embedContent on an OpenAI model = %d %s; want the batch's first vector", status, body)
	}
	var measured bool
	for _, u := range h.usage(t, 3) {
		measured = measured || u.Alias == "gem-embed-on-openai" && u.Usage.Measured && u.Usage.PromptTokens > 0
	}
	if !measured {
		t.Error("no measured usage record for gem-embed-on-openai; want OpenAI's usage")
	}

	status, _, body = geminiDo(t, h, "POST", "/v1beta/models/gem-embed-on-openai:embedContent", keyWeb, "header",
		`{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBO"}}]}}`)
	if status != 400 || !json.Valid([]byte(body)) {
		t.Errorf("an image to embed on an OpenAI model = %d %s; want Google's 400", status, body)
	}
}
