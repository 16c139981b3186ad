package upstream

import (
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// OpenAIResponses is the upstream side of OpenAI's Responses API: a Bearer
// credential, usage in the answer's "usage" (input and output tokens, with
// their cached and reasoning details; a compaction's answer has the same),
// and a stream of named events that ends with response.completed or
// response.incomplete, whose response carries the usage
// (docs/protocols.md). A Responses stream reports usage without being
// asked: only "model" changes.
var OpenAIResponses = &Dialect{
	Path: openai.ResponsesPath, CompactPath: openai.CompactPath,
	Authorize: bearerAuth, Prepare: prepareModel, Usage: openai.ResponsesUsageValue, Event: openai.ResponsesEvent,
	Stores: true, Pass: openAIPass,
}

// storedID is the id of the stored response an answer is ("object":
// "response"), "" when it is none or says "store":false (kept nowhere
// upstream: Codex sends store false and resends the whole conversation).
// f may hold the members of an answer's first bytes only (readAnswer reads
// those before the cut): its id and object come first, but its store comes
// after the output, so such an answer is taken as stored unless those bytes
// say otherwise.
func storedID(f answerFields) string {
	var id string
	if string(f.object) != `"response"` || string(f.store) == "false" || jsonfield.DecodeString(&id, f.id) != nil {
		return ""
	}
	return id
}

// createdID is the id of the stored response a Responses stream's event
// announces when it is response.created, else "".
func createdID(data []byte) string {
	var typ, response []byte
	if jsonfield.Members(data, func(key, value []byte) error {
		switch string(key) {
		case "type":
			typ = value
		case "response":
			response = value
		}
		return nil
	}) != nil || string(typ) != `"response.created"` {
		return ""
	}
	f, ok := readAnswer(response)
	if !ok {
		return ""
	}
	return storedID(f)
}

// ResponsesEnding ends a committed stream as the Responses API does (and
// as the translators to it do): an "error" event, whose code is Sluice's.
var ResponsesEnding = endingOf("error", openai.ResponsesStreamError)
