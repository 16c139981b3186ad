package openai

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
)

const geminiEmbedGolden = "testdata/from_gemini_embed"

// A batch (snake_case and camelCase names alike): one input per request,
// the dimensions, and the embeddings back in the requests' order whatever
// the order of OpenAI's data.
func TestFromGeminiEmbedGolden(t *testing.T) {
	read := func(name string) []byte { return adaptertest.Read(t, filepath.Join(geminiEmbedGolden, name)) }
	tr := NewFromGeminiEmbed()
	body, err := tr.Request(&sluice.Request{Body: read("request.json"), Batch: true}, "text-embedding-3-small")
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.GoldenJSON(t, filepath.Join(geminiEmbedGolden, "request.want.json"), body)
	out, err := tr.Response(read("response.json"))
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.GoldenJSON(t, filepath.Join(geminiEmbedGolden, "response.want.json"), out)
	adaptertest.GoldenJSON(t, filepath.Join(geminiEmbedGolden, "error.want.json"), tr.Error(429, read("error.json")))
}

// embedContent gets embedContent's shape back: one embedding, not a list.
func TestFromGeminiEmbedOne(t *testing.T) {
	tr := NewFromGeminiEmbed()
	body, err := tr.Request(&sluice.Request{Body: []byte(`{"content":{"parts":[{"text":"hello"}]}}`)}, "text-embedding-3-small")
	if err != nil || string(body) != `{"model":"text-embedding-3-small","input":["hello"]}` {
		t.Fatalf("Request = %s, %v", body, err)
	}
	out, err := tr.Response([]byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,1]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`))
	if err != nil || string(out) != `{"embedding":{"values":[0.5,1]}}` {
		t.Errorf("Response = %s, %v; want embedContent's answer", out, err)
	}
}

func TestFromGeminiEmbedRefusals(t *testing.T) {
	tests := []struct {
		body  string
		batch bool
		want  string
	}{
		{`{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBO"}}]}}`, false, "only text"},
		{`{"content":{"parts":[]}}`, false, "no text"},
		{`{"requests":[]}`, true, "must not be empty"},
		{`{"requests":[{"content":{"parts":[{"text":"a"}]},"outputDimensionality":4},{"content":{"parts":[{"text":"b"}]}}]}`, true, "requests[1].outputDimensionality"},
		{`{"requests":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"fileData":{"fileUri":"x"}}]}}]}`, true, "requests[1].content"},
	}
	for _, tt := range tests {
		_, err := NewFromGeminiEmbed().Request(&sluice.Request{Body: []byte(tt.body), Batch: tt.batch}, "m")
		if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeInvalidRequest || !strings.Contains(e.Msg, tt.want) {
			t.Errorf("%s: %v; want invalid_request naming %q", tt.body, err, tt.want)
		}
	}
}
