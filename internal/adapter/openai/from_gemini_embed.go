package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

// FromGeminiEmbed carries one Gemini embedContent or batchEmbedContents
// execution to an OpenAI embeddings upstream. Each request's content
// becomes one input (its text parts joined by newlines), its
// outputDimensionality the request's dimensions, and the embeddings come
// back as embedContent's one embedding or the batch's list, their values
// passed on as OpenAI wrote them (floats are asked for).
//
// Refused (CodeInvalidRequest): parts other than text (an OpenAI
// embedding model embeds text), a content without text, and a batch whose
// requests ask for different dimensions (OpenAI takes one per request).
// Dropped, and named (Dropped): FromGeminiEmbedHints.
//
// One value per execution; not safe for concurrent use.
type FromGeminiEmbed struct {
	batch   bool
	inputs  int
	dropped []string
}

var _ adapter.Translator = (*FromGeminiEmbed)(nil)

// NewFromGeminiEmbed returns a translator for one execution.
func NewFromGeminiEmbed() *FromGeminiEmbed { return &FromGeminiEmbed{} }

// FromGeminiEmbedHints are what FromGeminiEmbed drops (adapter.Hints):
// taskType and title, of embedContent or of a batch's requests, which
// OpenAI's models have no field for (the embedding's shape does not
// depend on them).
var FromGeminiEmbedHints = adapter.Hints{"taskType", "title", "requests[].taskType", "requests[].title"}

// Dropped names the caller's hints the last Request left out.
func (t *FromGeminiEmbed) Dropped() []string { return t.dropped }

// Request returns the embeddings body for the caller's embedContent
// (req.Batch false) or batchEmbedContents request.
func (t *FromGeminiEmbed) Request(req *sluice.Request, model string) ([]byte, error) {
	t.batch = req.Batch
	var reqs []gemini.EmbedRequest
	var camel []byte // the body as read, where the hints are looked for
	var err error
	if req.Batch {
		var in gemini.BatchEmbedRequest
		if camel, err = gemini.ReadEmbed(req.Body, &in); err != nil {
			return nil, adapter.Untranslatable("request body is not a valid batchEmbedContents request: %v", err)
		}
		reqs = in.Requests
	} else {
		var in gemini.EmbedRequest
		if camel, err = gemini.ReadEmbed(req.Body, &in); err != nil {
			return nil, adapter.Untranslatable("request body is not a valid embedContent request: %v", err)
		}
		reqs = []gemini.EmbedRequest{in}
	}
	if len(reqs) == 0 {
		return nil, adapter.Untranslatable("requests must not be empty")
	}
	t.dropped = FromGeminiEmbedHints.Sent(camel)
	out := wire.EmbeddingsRequest{Model: model, Dimensions: reqs[0].OutputDimensionality}
	texts := make([]string, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if !sameDimensions(r.OutputDimensionality, out.Dimensions) {
			return nil, adapter.Untranslatable("requests[%d].outputDimensionality differs from requests[0]'s: this model's upstream (OpenAI embeddings) takes one size per request", i)
		}
		text, err := embedText(&r.Content)
		if err != nil {
			if t.batch {
				return nil, adapter.Untranslatable("requests[%d].content: %s", i, err)
			}
			return nil, adapter.Untranslatable("content: %s", err)
		}
		texts[i] = text
	}
	t.inputs = len(texts)
	if out.Input, err = json.Marshal(texts); err != nil {
		return nil, err
	}
	return json.Marshal(&out)
}

func sameDimensions(a, b *int64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// embedText is a content's text, its parts joined by newlines.
func embedText(c *gemini.Content) (string, error) {
	texts := make([]string, 0, len(c.Parts))
	for i := range c.Parts {
		if !isTextPart(&c.Parts[i]) {
			return "", errors.New("only text parts are supported by this model's upstream (OpenAI embeddings)")
		}
		if c.Parts[i].Text != "" {
			texts = append(texts, c.Parts[i].Text)
		}
	}
	if len(texts) == 0 {
		return "", errors.New("no text to embed")
	}
	return strings.Join(texts, "\n"), nil
}

// Response returns Gemini's answer for OpenAI's embeddings answer: the
// embeddings by their index.
func (t *FromGeminiEmbed) Response(body []byte) ([]byte, error) {
	var in wire.EmbeddingsResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("openai embeddings answer: %w", err)
	}
	embeddings := make([]gemini.Embedding, t.inputs)
	for _, d := range in.Data {
		if d.Index < 0 || d.Index >= t.inputs || embeddings[d.Index].Values != nil {
			return nil, fmt.Errorf("openai embeddings answer: unexpected index %d of %d inputs", d.Index, t.inputs)
		}
		embeddings[d.Index].Values = d.Vector
	}
	if len(in.Data) != t.inputs {
		return nil, fmt.Errorf("openai embeddings answer: %d embeddings for %d inputs", len(in.Data), t.inputs)
	}
	if t.batch {
		return json.Marshal(&gemini.BatchEmbedResponse{Embeddings: embeddings})
	}
	return json.Marshal(&gemini.EmbedResponse{Embedding: embeddings[0]})
}

// Event refuses: embeddings are not streamed.
func (t *FromGeminiEmbed) Event(adapter.Event, func(adapter.Event) error) error {
	return errors.New("openai embeddings: not a stream")
}

// Error returns Google's error body for an OpenAI error answer.
func (t *FromGeminiEmbed) Error(status int, body []byte) []byte { return googleErrorBody(status, body) }
