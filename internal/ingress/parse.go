package ingress

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// fields is what routing and accounting need from a request body.
// Everything else stays in the caller's bytes, untouched.
type fields struct {
	Model               string
	Stream              bool
	User                string
	IncludeUsage        bool // stream_options.include_usage
	MaxTokens           int64
	MaxCompletionTokens int64
	ServiceTier         string // checked against the key's service-tier scope
	// Responses only: the end user's newer name (preferred to user), and
	// the hints a later affinity reads.
	SafetyIdentifier, PromptCacheKey, PreviousResponseID string
}

// defaultOutputTokens is the output reserved for a request that sets no
// max_tokens; the reservation is corrected to the measured usage after.
const defaultOutputTokens = 512

// output is the output tokens a request reserves: what it asks for, or
// defaultOutputTokens when it sets no limit, at most MaxTokenEstimate;
// embeddings produce none. Parse refuses negative max_tokens.
func (f *fields) output(p sluice.Protocol) int64 {
	if p == sluice.ProtocolOpenAIEmbeddings || p == sluice.ProtocolGeminiEmbed {
		return 0
	}
	out := max(f.MaxTokens, f.MaxCompletionTokens)
	if out <= 0 {
		out = defaultOutputTokens
	}
	return min(out, sluice.MaxTokenEstimate)
}

// checkUser refuses an end-user name (body "user" or X-Sluice-User) that
// could not be a state key as it is, by the rule of the catalog's and the
// admin API's names (config.CheckText).
func checkUser(user string) error {
	if msg := config.CheckText(user, config.MaxUser); msg != "" {
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "user " + msg}
	}
	return nil
}

// Parse reads the fields of a body of protocol p (OpenAI-style, or
// Anthropic Messages) that Sluice routes on and fills a Request that keeps
// body as is. The body must be one JSON object with a non-empty string
// "model", and each field Sluice reads must appear at most once, spelled
// exactly (see checkKeys).
func Parse(p sluice.Protocol, body []byte) (*sluice.Request, error) {
	rf := openAIFields
	switch p {
	case sluice.ProtocolAnthropic:
		rf = anthropicFields
	case sluice.ProtocolOpenAIResponses:
		rf = responsesFields
	}
	f, ok := scan(body, rf)
	if !ok {
		var err error
		if f, err = rf.decode(body, rf); err != nil {
			return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: fieldError(err), Err: err}
		}
	}
	if err := f.check(p); err != nil {
		return nil, err
	}
	return &sluice.Request{
		Protocol:     p,
		Model:        f.Model,
		Stream:       f.Stream,
		IncludeUsage: f.IncludeUsage,
		User:         cmp.Or(f.SafetyIdentifier, f.User),
		Body:         body,
		MaxTokens:    max(f.MaxTokens, f.MaxCompletionTokens),
		Text:         sluice.MeasureText(body),
		Output:       f.output(p),
		ServiceTier:  f.ServiceTier,
		// Responses' state and cache hints, for routing that keeps them.
		PromptCacheKey:     f.PromptCacheKey,
		PreviousResponseID: f.PreviousResponseID,
	}, nil
}

// check refuses values Sluice cannot act on.
func (f *fields) check(p sluice.Protocol) error {
	if err := checkModel(f.Model); err != nil {
		return err
	}
	switch {
	case f.Stream && p != sluice.ProtocolOpenAIChat && p != sluice.ProtocolAnthropic && p != sluice.ProtocolOpenAIResponses:
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "stream is not supported on this endpoint"}
	case f.MaxTokens < 0 && p == sluice.ProtocolOpenAIResponses:
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "max_output_tokens must not be negative"}
	case f.MaxTokens < 0:
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "max_tokens must not be negative"}
	case f.MaxCompletionTokens < 0:
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "max_completion_tokens must not be negative"}
	}
	if err := checkUser(f.SafetyIdentifier); err != nil {
		return err
	}
	return checkUser(f.User)
}

// checkModel refuses an empty model, and one with U+FFFD or invalid UTF-8:
// encoding/json reads invalid UTF-8 and lone surrogates as U+FFFD, which
// other readers read otherwise. Without them every reader that accepts the
// body reads the same model name as Sluice, so a body whose model already
// is the deployment's can be sent unchanged.
func checkModel(model string) error {
	switch {
	case model == "":
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "you must provide a model parameter"}
	case strings.ContainsRune(model, utf8.RuneError): // U+FFFD, or any invalid UTF-8
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "model must be valid UTF-8"}
	}
	return nil
}

// The fields Sluice reads from a body, which an upstream reads too. Each
// must be spelled exactly and appear at most once: a second member that
// any JSON reader could take for one of them ("Model", "mod\u0065l",
// "ſtream", a duplicate) lets Sluice read one value (encoding/json takes
// the last member and folds case) and the upstream another (many readers
// take the first, or match keys exactly), so Sluice could admit and bill
// one model while the upstream runs another.
var (
	readFields   = [...]string{"model", "stream", "stream_options", "user", "max_tokens", "max_completion_tokens", "service_tier"}
	optionFields = [...]string{"include_usage"} // inside stream_options
	// Anthropic Messages names the end user metadata.user_id.
	anthropicReadFields = [...]string{"model", "stream", "max_tokens", "metadata", "service_tier"}
	metadataFields      = [...]string{"user_id"} // inside metadata
	// OpenAI Responses names the output limit max_output_tokens, and the
	// end user safety_identifier (user is its older name).
	responsesReadFields = [...]string{"model", "stream", "max_output_tokens", "user", "safety_identifier", "prompt_cache_key", "previous_response_id", "service_tier"}
)

// scan and checkKeys note the fields seen in the bits of a uint8.
var (
	_ [8 - len(readFields)]struct{}
	_ [8 - len(anthropicReadFields)]struct{}
	_ [8 - len(responsesReadFields)]struct{}
)

// readSet is the fields Sluice reads of one protocol's bodies: names at the
// top level, inner names inside the object member nested, and decode, the
// reference reader (encoding/json) for what scan leaves to it.
type readSet struct {
	names  []string
	nested string
	inner  []string
	decode func(body []byte, rf *readSet) (fields, error)
}

var (
	openAIFields    = &readSet{names: readFields[:], nested: "stream_options", inner: optionFields[:], decode: decodeOpenAI}
	anthropicFields = &readSet{names: anthropicReadFields[:], nested: "metadata", inner: metadataFields[:], decode: decodeAnthropic}
	responsesFields = &readSet{names: responsesReadFields[:], decode: decodeResponses}
)

// fieldIndex returns the index of key in names, or -1. It compares bytes
// with strings without converting them, so it never allocates.
func fieldIndex(names []string, key []byte) int {
	for i, name := range names {
		if string(key) == name {
			return i
		}
	}
	return -1
}

// errRepeated stops the scan at a member it must leave to decode, which
// then names the field.
var errRepeated = errors.New("field repeated")

// scan reads the fields in one pass over body that also checks all of it is
// valid JSON, without the reflection that made decoding most of Parse's
// cost. It handles the bodies clients send: ok is false for anything else —
// invalid JSON, a field of the wrong type, a key that is not plain (see
// jsonfield.PlainKey: "Model", "mod\u0065l", which decode's checkKeys
// refuses if it folds to a read field), a read field repeated, a string
// with escapes — and decode, the reference, then gives the answer or the
// error. A plain key folds to itself, so a bitmask of the fields seen is all
// the scan needs to apply checkKeys' rule.
func scan(body []byte, rf *readSet) (f fields, ok bool) {
	var seen uint8
	err := jsonfield.PlainMembers(body, func(key, value []byte) error {
		i := fieldIndex(rf.names, key)
		if i < 0 {
			return nil
		}
		if seen&(1<<i) != 0 {
			return errRepeated
		}
		seen |= 1 << i
		switch rf.names[i] {
		case "model":
			return jsonfield.DecodeString(&f.Model, value)
		case "stream":
			return jsonfield.DecodeBool(&f.Stream, value)
		case "user":
			return jsonfield.DecodeString(&f.User, value)
		case "max_tokens", "max_output_tokens":
			return jsonfield.DecodeInt(&f.MaxTokens, value)
		case "safety_identifier":
			return jsonfield.DecodeString(&f.SafetyIdentifier, value)
		case "prompt_cache_key":
			return jsonfield.DecodeString(&f.PromptCacheKey, value)
		case "previous_response_id":
			return jsonfield.DecodeString(&f.PreviousResponseID, value)
		case "max_completion_tokens":
			return jsonfield.DecodeInt(&f.MaxCompletionTokens, value)
		case "service_tier":
			return jsonfield.DecodeString(&f.ServiceTier, value)
		case "metadata":
			return scanInner(value, "user_id", func(v []byte) error { return jsonfield.DecodeString(&f.User, v) })
		}
		return scanInner(value, "include_usage", func(v []byte) error { return jsonfield.DecodeBool(&f.IncludeUsage, v) })
	})
	return f, err == nil
}

// scanInner reads an object member that holds a field Sluice reads (name,
// decoded by read): null, or an object with name at most once.
func scanInner(value []byte, name string, read func(value []byte) error) error {
	if string(value) == "null" {
		return nil
	}
	if value[0] != '{' {
		return jsonfield.ErrNotPlain
	}
	seen := false
	return jsonfield.PlainMembers(value, func(key, value []byte) error {
		if string(key) != name {
			return nil
		}
		if seen {
			return errRepeated
		}
		seen = true
		return read(value)
	})
}

// ambiguousError is a member some JSON reader could take for a field Sluice
// reads, beside the exactly spelled one or instead of it.
type ambiguousError struct{ field string }

func (e *ambiguousError) Error() string {
	return fmt.Sprintf("%q must appear at most once, spelled exactly so (no other case or escapes)", e.field)
}

// checkKeys applies the rule of readFields to obj, valid JSON: it refuses a
// member whose key folds (jsonfield.FoldKey) to one of rf's names unless it
// is that name, spelled plainly, for the first time; and it applies the
// rule to rf's inner names inside its nested member (stream_options).
func checkKeys(obj []byte, rf *readSet) error {
	return checkNames(obj, rf.names, "", rf)
}

func checkNames(obj []byte, names []string, prefix string, rf *readSet) error {
	var seen uint8
	return jsonfield.Fields(obj, func(key, value []byte) error {
		i := fieldIndex(names, key)
		if i < 0 && !jsonfield.PlainKey(key) {
			if i = slices.Index(names, jsonfield.FoldKey(key)); i >= 0 {
				return &ambiguousError{field: prefix + names[i]}
			}
		}
		if i < 0 {
			return nil
		}
		if seen&(1<<i) != 0 {
			return &ambiguousError{field: prefix + names[i]}
		}
		seen |= 1 << i
		if prefix == "" && names[i] == rf.nested && value[0] == '{' {
			return checkNames(value, rf.inner, rf.nested+".", rf)
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
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	ServiceTier         string `json:"service_tier"`
}

// decodeOpenAI reads the fields with encoding/json, for the bodies scan
// leaves to it, and refuses what checkKeys refuses.
func decodeOpenAI(body []byte, rf *readSet) (fields, error) {
	var w wireFields
	if err := json.Unmarshal(body, &w); err != nil {
		return fields{}, err
	}
	if err := checkKeys(body, rf); err != nil {
		return fields{}, err
	}
	return fields{
		Model: w.Model, Stream: w.Stream, User: w.User,
		IncludeUsage: w.StreamOptions != nil && w.StreamOptions.IncludeUsage,
		MaxTokens:    int64(w.MaxTokens), MaxCompletionTokens: int64(w.MaxCompletionTokens),
		ServiceTier: w.ServiceTier,
	}, nil
}

// anthropicWireFields is what Sluice reads of an Anthropic Messages body,
// as encoding/json decodes it.
type anthropicWireFields struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	MaxTokens   int    `json:"max_tokens"`
	ServiceTier string `json:"service_tier"`
}

// decodeAnthropic is decodeOpenAI for an Anthropic Messages body.
func decodeAnthropic(body []byte, rf *readSet) (fields, error) {
	var w anthropicWireFields
	if err := json.Unmarshal(body, &w); err != nil {
		return fields{}, err
	}
	if err := checkKeys(body, rf); err != nil {
		return fields{}, err
	}
	f := fields{Model: w.Model, Stream: w.Stream, MaxTokens: int64(w.MaxTokens), ServiceTier: w.ServiceTier}
	if w.Metadata != nil {
		f.User = w.Metadata.UserID
	}
	return f, nil
}

// responsesWireFields is what Sluice reads of an OpenAI Responses body, as
// encoding/json decodes it.
type responsesWireFields struct {
	Model              string `json:"model"`
	Stream             bool   `json:"stream"`
	MaxOutputTokens    int    `json:"max_output_tokens"`
	User               string `json:"user"`
	SafetyIdentifier   string `json:"safety_identifier"`
	PromptCacheKey     string `json:"prompt_cache_key"`
	PreviousResponseID string `json:"previous_response_id"`
	ServiceTier        string `json:"service_tier"`
}

// decodeResponses is decodeOpenAI for an OpenAI Responses body.
func decodeResponses(body []byte, rf *readSet) (fields, error) {
	var w responsesWireFields
	if err := json.Unmarshal(body, &w); err != nil {
		return fields{}, err
	}
	if err := checkKeys(body, rf); err != nil {
		return fields{}, err
	}
	return fields{
		Model: w.Model, Stream: w.Stream, MaxTokens: int64(w.MaxOutputTokens), User: w.User, ServiceTier: w.ServiceTier,
		SafetyIdentifier: w.SafetyIdentifier, PromptCacheKey: w.PromptCacheKey, PreviousResponseID: w.PreviousResponseID,
	}, nil
}

// fieldError names the field whose type was wrong, without echoing values.
func fieldError(err error) string {
	if ae, ok := errors.AsType[*ambiguousError](err); ok {
		return ae.Error()
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return "request body is not valid JSON"
	}
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if ok && te.Field != "" {
		return fmt.Sprintf("invalid type for %q: expected %s", te.Field, te.Type)
	}
	return "request body must be a JSON object"
}
