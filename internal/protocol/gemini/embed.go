package gemini

import (
	"encoding/json"
)

// EmbedRequest is an embedContent request body, or one of a
// batchEmbedContents' requests (which names its model, models/{model}).
type EmbedRequest struct {
	Model                string  `json:"model,omitempty"`
	Content              Content `json:"content"`
	TaskType             string  `json:"taskType,omitempty"`
	Title                string  `json:"title,omitempty"`
	OutputDimensionality *int64  `json:"outputDimensionality,omitempty"`
}

// BatchEmbedRequest is a batchEmbedContents request body.
type BatchEmbedRequest struct {
	Requests []EmbedRequest `json:"requests"`
}

// Embedding is one content's embedding. Values is the JSON array of
// numbers as sent, so that a translator passes it on without decoding it.
type Embedding struct {
	Values json.RawMessage `json:"values"`
}

// EmbedResponse is embedContent's answer. Gemini's embedding answers
// carry no usage.
type EmbedResponse struct {
	Embedding Embedding `json:"embedding"`
}

// BatchEmbedResponse is batchEmbedContents' answer: one embedding per
// request, in their order.
type BatchEmbedResponse struct {
	Embeddings []Embedding `json:"embeddings"`
}

// ReadEmbed decodes a caller's embedContent or batchEmbedContents body
// into v, its snake_case names read as their lowerCamelCase; camel is the
// body as read (see ReadRequest).
func ReadEmbed(body []byte, v any) (camel []byte, err error) {
	if camel, err = camelBody(body); err != nil {
		return nil, err
	}
	return camel, json.Unmarshal(camel, v)
}
