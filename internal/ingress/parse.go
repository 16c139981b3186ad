package ingress

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

// fields is what routing and accounting need from an OpenAI request body.
// Everything else stays in the caller's bytes, untouched.
type fields struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	User          string `json:"user"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// defaultOutputTokens is the output reserved for a request that sets no
// max_tokens; the reservation is corrected to the measured usage after.
const defaultOutputTokens = 512

// estimate is the tokens a request is expected to use, reserved against
// token-per-minute limits before the call: about four bytes of prompt per
// token (JSON syntax included, so it errs high) plus the output allowed.
func (f *fields) estimate(p sluice.Protocol, bodyLen int) int {
	prompt := bodyLen/4 + 1
	if p == sluice.ProtocolOpenAIEmbeddings {
		return prompt
	}
	out := max(f.MaxTokens, f.MaxCompletionTokens)
	if out <= 0 {
		out = defaultOutputTokens
	}
	return prompt + out
}

// Parse reads the fields of an OpenAI-style body that Sluice routes on and
// fills a Request that keeps body as is. The body must be one JSON object
// with a non-empty string "model".
func Parse(p sluice.Protocol, body []byte) (*sluice.Request, error) {
	var f fields
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: fieldError(err), Err: err}
	}
	if f.Model == "" {
		return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "you must provide a model parameter"}
	}
	if f.Stream && p != sluice.ProtocolOpenAIChat {
		return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "stream is not supported on this endpoint"}
	}
	return &sluice.Request{
		Protocol:     p,
		Model:        f.Model,
		Stream:       f.Stream,
		IncludeUsage: f.StreamOptions != nil && f.StreamOptions.IncludeUsage,
		User:         f.User,
		Body:         body,
		Tokens:       f.estimate(p, len(body)),
	}, nil
}

// fieldError names the field whose type was wrong, without echoing values.
func fieldError(err error) string {
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return "request body is not valid JSON"
	}
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if ok && te.Field != "" {
		return fmt.Sprintf("invalid type for %q: expected %s", te.Field, te.Type)
	}
	return "request body must be a JSON object"
}
