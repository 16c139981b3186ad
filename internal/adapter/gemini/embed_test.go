package gemini

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

const embedGolden = "testdata/embed"

func TestFromOpenAIEmbeddingsGolden(t *testing.T) {
	read := func(name string) []byte { return adaptertest.Read(t, filepath.Join(embedGolden, name)) }
	tr := NewFromOpenAIEmbeddings()
	body, err := tr.Request(&sluice.Request{Body: read("request.json")}, "gemini-embedding-001")
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.GoldenJSON(t, filepath.Join(embedGolden, "request.want.json"), body)
	out, err := tr.Response(read("response.json"))
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.GoldenJSON(t, filepath.Join(embedGolden, "response.want.json"), out)
	adaptertest.GoldenJSON(t, filepath.Join(embedGolden, "error.want.json"), tr.Error(429, read("error.json")))
}

// With encoding_format base64 the caller gets each vector as OpenAI encodes
// it: the little-endian float32s, in standard base64.
func TestFromOpenAIEmbeddingsBase64(t *testing.T) {
	tr := NewFromOpenAIEmbeddings()
	if _, err := tr.Request(&sluice.Request{Body: []byte(`{"model":"m","input":"hi","encoding_format":"base64"}`)}, "g"); err != nil {
		t.Fatal(err)
	}
	out, err := tr.Response([]byte(`{"embeddings":[{"values":[0.5,-2,1e-7]}]}`))
	var got openai.EmbeddingsResponse
	if err != nil || json.Unmarshal(out, &got) != nil || len(got.Data) != 1 {
		t.Fatalf("Response = %s, %v", out, err)
	}
	var s string
	if err := json.Unmarshal(got.Data[0].Vector, &s); err != nil {
		t.Fatalf("embedding %s is not a string", got.Data[0].Vector)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 12 {
		t.Fatalf("embedding %q: %d bytes, %v; want 3 float32s", s, len(b), err)
	}
	for i, want := range []float32{0.5, -2, 1e-7} {
		if f := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); f != want {
			t.Errorf("value %d = %v, want %v", i, f, want)
		}
	}
}

func TestFromOpenAIEmbeddingsRefusals(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"model":"m","input":[1,2,3]}`, "token ids"},
		{`{"model":"m","input":[[1,2],[3]]}`, "token ids"},
		{`{"model":"m","input":""}`, "must not be empty"},
		{`{"model":"m","input":[]}`, "must not be empty"},
		{`{"model":"m","input":["a",""]}`, "input[1]"},
		{`{"model":"m","input":"a","encoding_format":"int8"}`, "encoding_format"},
	}
	for _, tt := range tests {
		_, err := NewFromOpenAIEmbeddings().Request(&sluice.Request{Body: []byte(tt.body)}, "g")
		if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeInvalidRequest || !strings.Contains(e.Msg, tt.want) {
			t.Errorf("%s: %v; want invalid_request naming %q", tt.body, err, tt.want)
		}
	}
}

// An answer that does not hold one embedding per input is the upstream's
// failure, not a shorter list for the caller.
func TestFromOpenAIEmbeddingsCountMismatch(t *testing.T) {
	tr := NewFromOpenAIEmbeddings()
	if _, err := tr.Request(&sluice.Request{Body: []byte(`{"model":"m","input":["a","b"]}`)}, "g"); err != nil {
		t.Fatal(err)
	}
	if out, err := tr.Response([]byte(`{"embeddings":[{"values":[1]}]}`)); err == nil {
		t.Errorf("Response = %s; want an error for one embedding of two", out)
	}
}
