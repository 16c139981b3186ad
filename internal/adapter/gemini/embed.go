package gemini

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	generate "github.com/sluicehq/sluice/internal/protocol/gemini"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// FromOpenAIEmbeddings carries one OpenAI embeddings execution to a Gemini
// embedding upstream. Every input becomes one request of a
// batchEmbedContents (the upstream side asks a translated embedding as a
// batch, since an OpenAI input may be a list), dimensions each request's
// outputDimensionality, and the embeddings come back in the inputs' order,
// their values passed on as Gemini wrote them (base64 when the caller asked
// for it, as OpenAI encodes them: little-endian float32s).
//
// Gemini reports no usage for embeddings, so the answer's usage is zero
// and Sluice records the request unmeasured (nothing is estimated).
//
// Refused (CodeInvalidRequest): token ids as input (Gemini takes text),
// an empty input or string, and encoding formats other than float and
// base64. Dropped, and named (Dropped): FromOpenAIEmbeddingsHints.
//
// One value per execution; not safe for concurrent use.
type FromOpenAIEmbeddings struct {
	model   string
	base64  bool
	inputs  int
	dropped []string
}

var _ adapter.Translator = (*FromOpenAIEmbeddings)(nil)

// NewFromOpenAIEmbeddings returns a translator for one execution.
func NewFromOpenAIEmbeddings() *FromOpenAIEmbeddings { return &FromOpenAIEmbeddings{} }

// FromOpenAIEmbeddingsHints are what FromOpenAIEmbeddings drops
// (adapter.Hints): the end user, for whom Gemini has no field.
var FromOpenAIEmbeddingsHints = adapter.Hints{"user"}

// Dropped names the caller's hints the last Request left out.
func (t *FromOpenAIEmbeddings) Dropped() []string { return t.dropped }

// Request returns the batchEmbedContents body for the caller's embeddings
// request.
func (t *FromOpenAIEmbeddings) Request(req *sluice.Request, model string) ([]byte, error) {
	var in openai.EmbeddingsRequest
	if err := json.Unmarshal(req.Body, &in); err != nil {
		return nil, adapter.Untranslatable("request body is not a valid embeddings request: %v", err)
	}
	switch in.EncodingFormat {
	case "", "float":
	case "base64":
		t.base64 = true
	default:
		return nil, adapter.Untranslatable("encoding_format must be float or base64")
	}
	t.dropped = FromOpenAIEmbeddingsHints.Sent(req.Body)
	texts, err := embeddingTexts(in.Input)
	if err != nil {
		return nil, err
	}
	t.model, t.inputs = model, len(texts)
	out := generate.BatchEmbedRequest{Requests: make([]generate.EmbedRequest, len(texts))}
	for i, text := range texts {
		out.Requests[i] = generate.EmbedRequest{
			Model:                "models/" + model,
			Content:              generate.Content{Parts: []generate.Part{{Text: text}}},
			OutputDimensionality: in.Dimensions,
		}
	}
	return json.Marshal(&out)
}

// embeddingTexts is an embeddings input's texts: one string or a list.
func embeddingTexts(input json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(input, &one) == nil {
		if one == "" {
			return nil, adapter.Untranslatable("input must not be empty")
		}
		return []string{one}, nil
	}
	var texts []string
	if err := json.Unmarshal(input, &texts); err != nil {
		return nil, adapter.Untranslatable("input must be a string or a list of strings for this model's upstream (Gemini): token ids are not supported")
	}
	if len(texts) == 0 {
		return nil, adapter.Untranslatable("input must not be empty")
	}
	for i, s := range texts {
		if s == "" {
			return nil, adapter.Untranslatable("input[%d] must not be empty", i)
		}
	}
	return texts, nil
}

// Response returns the embeddings answer for Gemini's batch answer.
func (t *FromOpenAIEmbeddings) Response(body []byte) ([]byte, error) {
	var in generate.BatchEmbedResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("gemini embeddings answer: %w", err)
	}
	if len(in.Embeddings) != t.inputs {
		return nil, fmt.Errorf("gemini embeddings answer: %d embeddings for %d inputs", len(in.Embeddings), t.inputs)
	}
	out := openai.EmbeddingsResponse{Object: "list", Data: make([]openai.Embedding, len(in.Embeddings)), Model: t.model}
	for i, e := range in.Embeddings {
		v := e.Values
		if t.base64 {
			var err error
			if v, err = base64Vector(v); err != nil {
				return nil, fmt.Errorf("gemini embeddings answer: embeddings[%d]: %w", i, err)
			}
		}
		out.Data[i] = openai.Embedding{Object: "embedding", Index: i, Vector: v}
	}
	return json.Marshal(&out)
}

// base64Vector is a JSON array of numbers as OpenAI's base64 encoding
// writes it: a JSON string of the little-endian float32s.
func base64Vector(values json.RawMessage) (json.RawMessage, error) {
	var fs []float32
	if err := json.Unmarshal(values, &fs); err != nil {
		return nil, err
	}
	b := make([]byte, 4*len(fs))
	for i, f := range fs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

// Event refuses: embeddings are not streamed.
func (t *FromOpenAIEmbeddings) Event(adapter.Event, func(adapter.Event) error) error {
	return errors.New("gemini embeddings: not a stream")
}

// Error returns OpenAI's error body for a Gemini error answer.
func (t *FromOpenAIEmbeddings) Error(status int, body []byte) []byte {
	return openAIErrorBody(status, body)
}
