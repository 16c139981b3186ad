package adapter

import (
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// Hints are the fields of a caller's request that a translator leaves out
// of the upstream request when they are sent: hints the upstream's protocol
// has no field for and that do not change the answer's shape (a seed, a
// top_k, a cache breakpoint). Sluice drops them rather than refuse the
// request, since real clients send them by default, but never silently:
// the caller is told their names (X-Sluice-Dropped), and a caller that
// asks for strict translation gets a 400 instead (Strict).
//
// Each is the field's path in the caller's body, in its protocol's names,
// which is also what the caller is told: members joined by dots, "[]"
// after a list's name for any of its elements, and "[type=x]" for those
// of its elements whose "type" is x (messages[].content[type=thinking]).
// A translator's list is written once, beside it (anthropic.FromOpenAIHints
// …); the translation rules (docs/translators.md) are tested against it.
type Hints []string

// Sent returns those of h that body sends with a value (see Present), in
// h's order; nil when none. body is a JSON object the translator has read;
// a path through anything else than it expects is simply not sent. One
// pass over body's members serves every path (at most 64).
func (h Hints) Sent(body []byte) []string {
	var found uint64 // bit i: h[i] is sent
	_ = jsonfield.Fields(body, func(key, value []byte) error {
		for i, path := range h {
			if member(path) == string(key) && sentIn(value, path) {
				found |= 1 << i
			}
		}
		return nil
	})
	var sent []string
	for i, path := range h {
		if found&(1<<i) != 0 {
			sent = append(sent, path)
		}
	}
	return sent
}

// Sent reports whether body sends the field at path (see Hints) with a
// value.
func Sent(body []byte, path string) bool {
	s, e, ok, err := jsonfield.Find(body, member(path))
	return ok && err == nil && sentIn(body[s:e], path)
}

// member is the name of the member of the body path starts with.
func member(path string) string {
	name, _, _ := strings.Cut(path, ".")
	name, _, _ = strings.Cut(name, "[")
	return name
}

// sentIn reports whether v, the value of the member path starts with,
// sends the rest of path with a value.
func sentIn(v []byte, path string) bool {
	seg, rest, nested := strings.Cut(path, ".")
	_, filter, list := strings.Cut(seg, "[")
	switch {
	case !list && nested:
		return Sent(v, rest)
	case !list:
		return Present(v)
	}
	typ, filtered := strings.CutPrefix(strings.TrimSuffix(filter, "]"), "type=")
	found := false
	jsonfield.Elements(v, func(s, e int) {
		el := v[s:e]
		if found || filtered && !hasType(el, typ) {
			return
		}
		found = nested && Sent(el, rest) || !nested && Present(el)
	})
	return found
}

// hasType reports whether the object el's "type" is the string typ.
func hasType(el []byte, typ string) bool {
	s, e, ok, err := jsonfield.Find(el, "type")
	return ok && err == nil && e-s == len(typ)+2 && string(el[s+1:e-1]) == typ
}

// Origins names, for a translator of a caller's protocol to the hub, the
// caller's field each hub field it fills comes from, where the two names
// differ (generationConfig.seed for seed); any other hub field is named
// as the caller's own. A Chain tells the caller what its hub-to-upstream
// half drops in the caller's names.
type Origins map[string]string

// Sent returns the caller's name of the hub field hub when caller, the
// caller's body, sends that field; "" when it does not (the translator
// filled the hub field on its own, with a default of the caller's
// protocol).
func (o Origins) Sent(caller []byte, hub string) string {
	name, ok := o[hub]
	if !ok {
		name = hub
	}
	if !Sent(caller, name) {
		return ""
	}
	return name
}

// origins is a translator to the hub that names, for a Chain, the
// caller's field a hub field of its last Request came from; "" when the
// caller sent none (Origins.Sent).
type origins interface {
	Origin(hub string) string
}

// Strict returns the 400 of a request whose caller asked for strict
// translation (X-Sluice-Translation: strict) and that the translation to
// upstream would carry without the fields dropped; nil when none were.
func Strict(dropped []string, upstream sluice.Protocol) error {
	if len(dropped) == 0 {
		return nil
	}
	them := "it"
	if len(dropped) > 1 {
		them = "them"
	}
	name, ok := protocolNames[upstream]
	if !ok {
		name = string(upstream)
	}
	return Untranslatable("%s cannot be carried to this model's upstream (%s); send the request without %s, or without X-Sluice-Translation: strict",
		strings.Join(dropped, ", "), name, them)
}

// protocolNames are the protocols as a caller's message names them.
var protocolNames = map[sluice.Protocol]string{
	sluice.ProtocolOpenAIChat:       "OpenAI chat",
	sluice.ProtocolOpenAIResponses:  "OpenAI Responses",
	sluice.ProtocolOpenAIEmbeddings: "OpenAI embeddings",
	sluice.ProtocolAnthropic:        "Anthropic Messages",
	sluice.ProtocolGemini:           "Gemini",
	sluice.ProtocolGeminiEmbed:      "Gemini embeddings",
}
