// Package adapter is the seam between the protocol a caller speaks and the
// protocol an upstream speaks. A Translator carries one execution across
// two different protocols: the request body on the way out, and the
// answer — a whole body, or a stream event by event — and the upstream's
// errors on the way back. Usage and the end of a stream are not its to
// report: the upstream side reads both from the upstream's own answer
// (upstream.Dialect), with or without a translator. When caller and
// upstream speak the same protocol no Translator is used: the body passes
// through as it is (zero copy but for the model name), which is the common
// case and the fast one.
//
// Translators live in one package per upstream protocol, one file per
// caller protocol (adapter/anthropic/from_openai.go turns an OpenAI chat
// caller's request into an Anthropic Messages one). Which pairs exist is
// one explicit table in package app. The package depends only on package
// sluice, the OpenAI protocol package (RefuseOneChoice) and jsonfield
// (Hints).
package adapter

import (
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice"
)

// Event is one server-sent event: its name (empty for an unnamed event,
// as OpenAI sends them) and its data.
type Event struct {
	Name string
	Data []byte
}

// Translator carries one execution from the caller's protocol to the
// upstream's and back. A value serves one execution and is not safe for
// concurrent use. Nothing is silently dropped: what the other side cannot
// express and would change the answer's shape is refused — Request returns
// a *sluice.Error with CodeInvalidRequest and a message fit for the caller
// — and the hints it leaves out (Hints) are named by Dropped, for the
// caller's answer to say so, or for a strict caller's request to be
// refused (Strict).
type Translator interface {
	// Request returns the upstream body for the caller's request, asking
	// for the upstream model.
	Request(req *sluice.Request, model string) ([]byte, error)
	// Dropped names, after a successful Request, the caller's fields it
	// left out of the upstream body (its Hints the caller sent), in the
	// caller's protocol's names; nil when none.
	Dropped() []string
	// Response returns the caller's body for a complete (non-streamed)
	// successful upstream answer.
	Response(body []byte) ([]byte, error)
	// Event translates one upstream stream event, calling emit for each
	// event the caller is to receive (none, one or several), in order. The
	// upstream's terminal event makes the caller's last ones.
	Event(ev Event, emit func(Event) error) error
	// Error returns the caller's error body for an upstream error answer
	// that is passed on (a request error), in the caller's envelope.
	Error(status int, body []byte) []byte
}

// MaxHeldOutput bounds what a stream translator holds of the output it
// relays. Most pass each event on as it comes and hold nothing; two must
// repeat what they passed: a Responses stream ends with events that carry
// the whole text and arguments (output_text.done, response.completed), and
// Gemini sends a tool call whole, so its arguments wait for the call's
// end. Past this many bytes such a translator fails the stream (saying
// HeldTooLong) rather than grow with it: memory per stream stays
// bounded however long an upstream streams. It is several times the
// longest output any model writes in one answer.
const MaxHeldOutput = 4 << 20

// HeldTooLong is the message of the error that ends a stream whose
// output its translator would have to hold past MaxHeldOutput.
const HeldTooLong = "the answer is longer than Sluice holds to translate it (4 MiB of text and tool-call arguments)"

// Present reports whether a raw JSON member was sent with a value: neither
// left out nor null, which a translator treats alike.
func Present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// Untranslatable is the 400 invalid_request_error of a request the
// upstream's protocol cannot express, its message formatted as fmt.Sprintf.
func Untranslatable(format string, args ...any) error {
	return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: fmt.Sprintf(format, args...)}
}
