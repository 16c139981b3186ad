package ingress

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// fields is what routing and accounting need from an OpenAI request body.
// Everything else stays in the caller's bytes, untouched.
type fields struct {
	Model               string
	Stream              bool
	User                string
	IncludeUsage        bool // stream_options.include_usage
	MaxTokens           int64
	MaxCompletionTokens int64
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
	out := int(max(f.MaxTokens, f.MaxCompletionTokens))
	if out <= 0 {
		out = defaultOutputTokens
	}
	return prompt + out
}

// Parse reads the fields of an OpenAI-style body that Sluice routes on and
// fills a Request that keeps body as is. The body must be one JSON object
// with a non-empty string "model".
func Parse(p sluice.Protocol, body []byte) (*sluice.Request, error) {
	f, ok := scan(body)
	if !ok {
		var err error
		if f, err = decode(body); err != nil {
			return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: fieldError(err), Err: err}
		}
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
		IncludeUsage: f.IncludeUsage,
		User:         f.User,
		Body:         body,
		Tokens:       f.estimate(p, len(body)),
	}, nil
}

// scan reads the fields in one pass over body that also checks all of it is
// valid JSON, without the reflection that made decoding most of Parse's
// cost. It handles
// the bodies clients send: ok is false for anything else — invalid JSON, a
// field of the wrong type, a key encoding/json might match to a field
// without being equal to it ("Model"), a string with escapes — and decode,
// the reference, then gives the answer or the error. A key may appear more
// than once: as for encoding/json, the last value wins, and null leaves the
// field as it was.
func scan(body []byte) (f fields, ok bool) {
	hasOptions := false
	err := jsonfield.PlainMembers(body, func(key, value []byte) error {
		switch string(key) {
		case "model":
			return jsonfield.DecodeString(&f.Model, value)
		case "stream":
			return jsonfield.DecodeBool(&f.Stream, value)
		case "user":
			return jsonfield.DecodeString(&f.User, value)
		case "max_tokens":
			return jsonfield.DecodeInt(&f.MaxTokens, value)
		case "max_completion_tokens":
			return jsonfield.DecodeInt(&f.MaxCompletionTokens, value)
		case "stream_options":
			return scanOptions(&hasOptions, &f.IncludeUsage, value)
		}
		return nil
	})
	return f, err == nil
}

// scanOptions reads stream_options, a pointer to a struct for
// encoding/json: null sets the pointer to nil, and an object is decoded into
// the struct already there, if any, so a second stream_options object keeps
// what the first set unless it sets it again.
func scanOptions(has, includeUsage *bool, value []byte) error {
	if string(value) == "null" {
		*has, *includeUsage = false, false
		return nil
	}
	if value[0] != '{' {
		return jsonfield.ErrNotPlain
	}
	if !*has {
		*has, *includeUsage = true, false
	}
	return jsonfield.PlainMembers(value, func(key, value []byte) error {
		if string(key) == "include_usage" {
			return jsonfield.DecodeBool(includeUsage, value)
		}
		return nil
	})
}

// wireFields is fields as encoding/json decodes them. The type of
// stream_options stays an unnamed struct: its name is part of the error
// message for a stream_options of the wrong type.
type wireFields struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	User          string `json:"user"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// decode reads the fields with encoding/json, for the bodies scan leaves to it.
func decode(body []byte) (fields, error) {
	var w wireFields
	if err := json.Unmarshal(body, &w); err != nil {
		return fields{}, err
	}
	return fields{
		Model: w.Model, Stream: w.Stream, User: w.User,
		IncludeUsage: w.StreamOptions != nil && w.StreamOptions.IncludeUsage,
		MaxTokens:    int64(w.MaxTokens), MaxCompletionTokens: int64(w.MaxCompletionTokens),
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
