package openai

import "encoding/json"

// EmbeddingsRequest is an embeddings request body: the fields a translator
// reads or writes.
type EmbeddingsRequest struct {
	Model string `json:"model"`
	// Input is a string, a list of strings, a list of token ids or a
	// list of lists of them.
	Input          json.RawMessage `json:"input"`
	Dimensions     *int64          `json:"dimensions,omitempty"`
	EncodingFormat string          `json:"encoding_format,omitempty"` // float (the default) or base64
	User           string          `json:"user,omitempty"`
}

// EmbeddingsResponse is an embeddings answer.
type EmbeddingsResponse struct {
	Object string          `json:"object"` // "list"
	Data   []Embedding     `json:"data"`
	Model  string          `json:"model"`
	Usage  EmbeddingsUsage `json:"usage"`
}

// Embedding is one input's embedding. Vector is the JSON value as sent: an
// array of numbers, or with encoding_format base64 a string of the
// little-endian float32s, so a translator passes it on without decoding it.
type Embedding struct {
	Object string          `json:"object"` // "embedding"
	Index  int             `json:"index"`
	Vector json.RawMessage `json:"embedding"`
}

// EmbeddingsUsage is an embeddings answer's usage: the input's tokens.
type EmbeddingsUsage struct {
	PromptTokens int64 `json:"prompt_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}
