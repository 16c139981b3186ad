// Package validate refuses, before a request takes any capacity, what its
// upstream would refuse anyway: an empty conversation, a role the protocol
// does not have, a tool result whose call is not in the request, a tool
// schema that is not a JSON object, an output cap of zero. Each check reads
// only the members it needs, with jsonfield's zero-allocation walks, so a
// valid request costs a pass over its bytes and no allocation; only a
// refusal allocates (its message). What the checks do not cover is passed
// through unchanged for the upstream to judge (docs/validation.md).
package validate

import (
	"bytes"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// The reasons of a Refusal, bounded: they label
// sluice_requests_invalid_total.
const (
	ReasonEmpty      = "empty"       // no messages, contents or input
	ReasonShape      = "shape"       // a member of the wrong JSON type
	ReasonRole       = "role"        // a role the protocol does not have
	ReasonToolResult = "tool_result" // a tool result without its call
	ReasonToolSchema = "tool_schema" // a tool's parameters not a JSON Schema object
	ReasonMaxTokens  = "max_tokens"  // an output cap of zero, or above the alias's
)

// Refusal is a request the upstream would refuse: Field is the path of
// the member at fault (messages[3].tool_call_id), Reason one of the
// Reason constants, and Msg the caller's explanation, naming Field.
type Refusal struct {
	Field, Reason, Msg string
}

func (r *Refusal) Error() string { return r.Msg }

func refuse(reason, field, format string, args ...any) *Refusal {
	return &Refusal{Field: field, Reason: reason, Msg: field + " " + fmt.Sprintf(format, args...)}
}

// Request checks body, a request of protocol p that ingress has read (valid
// JSON for the protocols checked), and returns the first Refusal, or nil.
// Protocols without checks (jobs, Gemini embeddings) always pass.
func Request(p sluice.Protocol, body []byte) *Refusal {
	return check(p, body, nil)
}

// Scan is Request that also finds the request's first image part, in the
// same pass (for an alias with a deployment that takes no images); the
// Image is zero when there is none, or when Request refuses the body.
// Embeddings have no images.
func Scan(p sluice.Protocol, body []byte) (Image, *Refusal) {
	var found images
	if r := check(p, body, &found); r != nil {
		return Image{}, r
	}
	return found.first, nil
}

// check runs p's checks on body, noting image parts in found (nil: not
// looking).
func check(p sluice.Protocol, body []byte, found *images) *Refusal {
	switch p {
	case sluice.ProtocolOpenAIChat:
		return chat(body, found)
	case sluice.ProtocolAnthropic:
		return messages(body, found)
	case sluice.ProtocolOpenAIResponses:
		return responses(body, found)
	case sluice.ProtocolGemini:
		return generate(body, found)
	case sluice.ProtocolOpenAIEmbeddings:
		return embeddings(body)
	}
	return nil
}

// MaxOutput refuses an output cap above the alias's max_output_tokens
// (limit, 0 for none); field is the protocol's name for the cap.
func MaxOutput(field string, asked, limit int64, model string) *Refusal {
	if limit > 0 && asked > limit {
		return refuse(ReasonMaxTokens, field, "must be at most %d for model %s", limit, model)
	}
	return nil
}

// member returns the raw value of obj's member key (the last one, as
// encoding/json reads it), nil when absent or obj is not an object.
func member(obj []byte, key string) []byte {
	var found []byte
	_ = jsonfield.Fields(obj, func(k, v []byte) error {
		if string(k) == key {
			found = v
		}
		return nil
	})
	return found
}

// is reports whether raw, a JSON value, is the string s. A string with
// escapes is taken to be s: the checks leave to the upstream what they
// would have to decode to judge.
func is(raw []byte, s string) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	inner := raw[1 : len(raw)-1]
	return string(inner) == s || bytes.IndexByte(inner, '\\') >= 0
}

// isString reports whether raw is a JSON string.
func isString(raw []byte) bool { return len(raw) > 0 && raw[0] == '"' }

// oneOf reports whether raw is one of the strings in set (see is).
func oneOf(raw []byte, set ...string) bool {
	for _, s := range set {
		if is(raw, s) {
			return true
		}
	}
	return false
}

// sameString reports whether a and b, raw JSON strings, may be equal: a
// pair with escapes is given the benefit of the doubt.
func sameString(a, b []byte) bool {
	if !isString(a) || !isString(b) {
		return false
	}
	return bytes.Equal(a, b) || bytes.IndexByte(a, '\\') >= 0 || bytes.IndexByte(b, '\\') >= 0
}

// empty reports whether raw is absent, null, "" or [] (white space aside).
func empty(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `""` {
		return true
	}
	if raw[0] != '[' || len(raw) < 2 {
		return false
	}
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// isArray and isObject tell a raw value's JSON type.
func isArray(raw []byte) bool  { return len(raw) > 0 && raw[0] == '[' }
func isObject(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }

// zeroCap refuses a cap of exactly 0 (ingress refuses negative ones). A
// value that is not a plain integer is left to ingress and the upstream.
func zeroCap(raw []byte, field string) *Refusal {
	var n int64 = -1
	if raw != nil && jsonfield.DecodeInt(&n, raw) == nil && n == 0 {
		return refuse(ReasonMaxTokens, field, "must be at least 1")
	}
	return nil
}

// A schema fault: what is wrong with a tool's parameters, told apart so
// that the caller builds the field's path only when there is one.
type schemaFault int

const (
	schemaOK        schemaFault = iota
	schemaNotObject             // not a JSON object
	schemaNotTyped              // its "type" is not "object"
)

// schema judges tool parameters: a JSON object whose "type", if any, is
// "object" (requireType: it must have one). null and absent pass.
func schema(raw []byte, requireType bool) schemaFault {
	if raw == nil || string(raw) == "null" {
		return schemaOK
	}
	if !isObject(raw) {
		return schemaNotObject
	}
	t := member(raw, "type")
	if t == nil && requireType || t != nil && !is(t, "object") {
		return schemaNotTyped
	}
	return schemaOK
}

// refusal is the Refusal for fault at field, the path of the parameters.
func (fault schemaFault) refusal(field string) *Refusal {
	if fault == schemaNotObject {
		return refuse(ReasonToolSchema, field, "must be a JSON Schema object")
	}
	return refuse(ReasonToolSchema, field+".type", `must be "object"`)
}

// each calls fn with the index and raw value of each element of arr (a
// JSON array), stopping at the first Refusal.
func each(arr []byte, fn func(i int, v []byte) *Refusal) *Refusal {
	var r *Refusal
	i := 0
	jsonfield.Elements(arr, func(start, end int) {
		if r == nil {
			r = fn(i, arr[start:end])
		}
		i++
	})
	return r
}

// anyBefore reports whether some element of arr, before index before (-1: all),
// satisfies fn.
func anyBefore(arr []byte, before int, fn func(v []byte) bool) bool {
	found, i := false, 0
	jsonfield.Elements(arr, func(start, end int) {
		if !found && (before < 0 || i < before) {
			found = fn(arr[start:end])
		}
		i++
	})
	return found
}

// escaped reports whether raw, a JSON string, has escapes: is takes such
// a string for any value, so a check that acts on a match (rather than
// refusing a mismatch) must not.
func escaped(raw []byte) bool { return bytes.IndexByte(raw, '\\') >= 0 }

// ReasonUntranslatable labels a request that no edge of its alias can
// carry: each needs a translator, and each translator refuses it
// (upstream.Caller.Untranslatable); it is judged after routing, not here.
const ReasonUntranslatable = "untranslatable"
