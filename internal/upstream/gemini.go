package upstream

import (
	"encoding/json"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
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
	Usage: gemini.UsageValue, Event: gemini.Event, CountAnswer: gemini.CountAnswer, Pass: geminiPass,
}

// GeminiEmbed is the upstream side of the Gemini API's embedContent and
// batchEmbedContents. A batch names its model in each of its requests too,
// which follow the edge's model.
var GeminiEmbed = &Dialect{
	ModelPath: geminiEmbedPath, Authorize: geminiAuth, Prepare: prepareGeminiEmbed, Usage: gemini.UsageValue, Event: gemini.Event,
	Pass: geminiPass,
}

// geminiPass is what the Gemini API's protocols pass on of a caller's
// headers.
var geminiPass = sluice.NewHeaderSet(gemini.PassHeaders...)

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
// Sluice's error in it.
var GeminiEnding = endingOf("", gemini.Envelope)
