package upstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
	"github.com/sluicehq/sluice/internal/sse"
)

// GeminiGenerate is the upstream side of the Gemini API's generateContent
// (docs/protocols.md): the secret in x-goog-api-key, the model and the
// method in the path, not the body (so a passthrough body is sent as it
// is), usage in "usageMetadata", and a stream that Sluice always asks for
// as server-sent events (?alt=sse: a caller that wants the JSON-array
// stream gets it reframed by the ingress), one answer chunk per event,
// ending with the chunk that carries finishReason: Gemini sends no [DONE].
var GeminiGenerate = &Dialect{
	ModelPath: geminiGeneratePath, Authorize: geminiAuth, Prepare: prepareUnchanged,
	Usage: gemini.UsageValue, Event: geminiEvent, CountAnswer: geminiCountAnswer,
}

// GeminiEmbed is the upstream side of the Gemini API's embedContent and
// batchEmbedContents. A batch names its model in each of its requests too,
// which follow the edge's model.
var GeminiEmbed = &Dialect{
	ModelPath: geminiEmbedPath, Authorize: geminiAuth, Prepare: prepareGeminiEmbed, Usage: gemini.UsageValue, Event: geminiEvent,
}

// geminiGeneratePath is the path of req to model: generateContent,
// streamGenerateContent?alt=sse or countTokens.
func geminiGeneratePath(req *sluice.Request, model string) string {
	switch {
	case req.CountTokens:
		return gemini.Base + model + ":" + gemini.MethodCount
	case req.Stream:
		return gemini.Base + model + ":" + gemini.MethodStream + "?alt=sse"
	}
	return gemini.Base + model + ":" + gemini.MethodGenerate
}

// geminiEmbedPath is the path of req to model: embedContent, or
// batchEmbedContents for a batch and for an OpenAI embeddings caller
// (translated: its input may be a list). An embedding has no count.
func geminiEmbedPath(req *sluice.Request, model string) string {
	switch {
	case req.CountTokens:
		return ""
	case req.Batch || req.Protocol == sluice.ProtocolOpenAIEmbeddings:
		return gemini.Base + model + ":" + gemini.MethodBatchEmbed
	}
	return gemini.Base + model + ":" + gemini.MethodEmbed
}

// geminiAuth presents the secret as x-goog-api-key, never as ?key=, which
// would put it in the URL (and in logs).
func geminiAuth(h, _ http.Header, secret string) {
	h["X-Goog-Api-Key"] = []string{secret}
}

// prepareUnchanged sends the caller's body as it is: the model is in the
// path, and a Gemini stream reports usage without being asked.
func prepareUnchanged(req *sluice.Request, _ string) ([]byte, error) { return req.Body, nil }

// prepareGeminiEmbed sends the caller's body as it is, but for a batch to
// another model than the alias, whose requests[].model become the edge's
// (the ingress admitted only requests that name the path's model).
func prepareGeminiEmbed(req *sluice.Request, model string) ([]byte, error) {
	if !req.Batch || model == req.Model {
		return req.Body, nil
	}
	s, e, ok, err := jsonfield.Find(req.Body, "requests")
	if err != nil || !ok {
		return req.Body, err
	}
	var requests []json.RawMessage
	if err := json.Unmarshal(req.Body[s:e], &requests); err != nil {
		return nil, err
	}
	for i, r := range requests {
		if requests[i], err = jsonfield.SetString(r, "model", "models/"+model); err != nil {
			return nil, err
		}
	}
	list, err := json.Marshal(requests)
	if err != nil {
		return nil, err
	}
	return jsonfield.Set(req.Body, "requests", list)
}

// GeminiEnding ends a committed stream as Gemini does: a data event whose
// JSON is Google's error envelope (which the SDKs raise as an API error),
// with Sluice's code as the reason of an ErrorInfo detail.
var GeminiEnding = &Ending{
	Failed: sseEvent("", `{"error":{"code":500,"message":"the upstream stream failed before it completed","status":"INTERNAL",`+
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"`+string(sluice.CodeUpstreamStreamFailed)+`","domain":"sluice"}]}}`),
	Shutdown: sseEvent("", `{"error":{"code":503,"message":"`+ErrShuttingDown.Msg+`; the stream ended before it completed","status":"UNAVAILABLE",`+
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"`+string(ErrShuttingDown.Code)+`","domain":"sluice"}]}}`),
}

// geminiEvent reads an event of a Gemini stream: each is a whole answer
// chunk. Its usageMetadata replaces what came before (Gemini's counts are
// cumulative and the last one holds). The chunk that carries a
// finishReason, or a promptFeedback.blockReason (a prompt refused: no
// candidates), is the last; one whose JSON is {"error":…} is the
// upstream's own failure.
var geminiEvent = skimmedEvent(geminiMarkers, readGeminiEvent)

// geminiMarkers are what a Gemini chunk is skimmed for (eventscan.go): the
// members readGeminiEvent acts on (an "error" even when null).
var geminiMarkers = newEventMarkers(
	marker{`"` + gemini.UsageKey + `"`, asMember}, marker{`"finishReason"`, asMember}, marker{`"blockReason"`, asMember}, marker{`"error"`, asKey})

// readGeminiEvent reads a chunk of a Gemini stream whole.
func readGeminiEvent(ev sse.Event, _ *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	var usage, candidates, feedback, failure []byte
	if err := jsonfield.Members(ev.Data, func(key, value []byte) error {
		switch string(key) {
		case gemini.UsageKey:
			usage = value
		case "candidates":
			candidates = value
		case "promptFeedback":
			feedback = value
		case "error":
			failure = value
		}
		return nil
	}); err != nil || ev.Data[0] != '{' {
		return u, false, false, errMalformedEvent
	}
	if failure != nil {
		return u, false, false, errUpstreamErrorEvent
	}
	if v := gemini.UsageValue(usage); v.Measured {
		u = v
	}
	return u, false, finished(candidates) || blocked(feedback), nil
}

// finished reports whether a chunk's candidates include one with a
// finishReason: the answer's end.
func finished(candidates []byte) bool {
	end := false
	eachElement(candidates, func(c []byte) {
		if c[0] == '{' {
			_ = jsonfield.Members(c, func(key, value []byte) error {
				end = end || string(key) == "finishReason" && len(value) > 2 && value[0] == '"'
				return nil
			})
		}
	})
	return end
}

// eachElement calls fn with each element of arr, a JSON array that is
// known to be well-formed (part of a value Members checked); anything else
// than an array has none.
func eachElement(arr []byte, fn func(elem []byte)) {
	if len(arr) < 2 || arr[0] != '[' {
		return
	}
	depth, inString, escaped, start := 0, false, false, 1
	for i := 1; i < len(arr); i++ {
		c := arr[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case depth > 0 && (c == '}' || c == ']'):
			depth--
		case depth == 0 && (c == ',' || c == ']'):
			if elem := bytes.TrimSpace(arr[start:i]); len(elem) > 0 {
				fn(elem)
			}
			start = i + 1
		}
	}
}

// blocked reports whether a promptFeedback names a blockReason.
func blocked(feedback []byte) bool {
	if len(feedback) == 0 || feedback[0] != '{' {
		return false
	}
	var reason bool
	_ = jsonfield.Members(feedback, func(key, value []byte) error {
		reason = reason || string(key) == "blockReason" && value[0] == '"'
		return nil
	})
	return reason
}

// geminiCountAnswer is countTokens' answer for Sluice's own estimate.
func geminiCountAnswer(tokens int64) []byte {
	return []byte(`{"totalTokens":` + strconv.FormatInt(tokens, 10) + `}`)
}
