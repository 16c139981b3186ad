package upstream

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
	"github.com/sluicehq/sluice/internal/protocol/openai"
	"github.com/sluicehq/sluice/internal/sse"
)

// OpenAIChat and OpenAIEmbeddings are the upstream sides of OpenAI's chat
// completions and embeddings, and of the many upstreams compatible with
// them: a Bearer credential, usage in the answer's "usage", a stream of
// unnamed chunks that ends with [DONE].
var (
	OpenAIChat = &Dialect{
		Path: openai.ChatPath, Authorize: bearerAuth, Prepare: PrepareBody, Usage: openai.UsageValue, Event: openAIEvent,
	}
	OpenAIEmbeddings = &Dialect{
		Path: openai.EmbeddingsPath, Authorize: bearerAuth, Prepare: PrepareBody, Usage: openai.UsageValue, Event: openAIEvent,
	}
)

// OpenAIVideos and FalQueue are the upstream sides of the job protocols
// as far as the job engine (jobs.go) uses them: how a credential is
// presented (OpenAI's bearer token, fal's "Key"). Their paths and answers
// are the job engine's.
var (
	OpenAIVideos = &Dialect{Authorize: bearerAuth}
	FalQueue     = &Dialect{Authorize: falAuth}
)

// falAuth presents the secret as fal's "Authorization: Key".
func falAuth(h, _ http.Header, secret string) {
	h["Authorization"] = []string{"Key " + secret}
}

// OpenAIEnding ends a committed stream in the OpenAI dialect that SDKs
// recognise: a chunk with an "error" key.
var OpenAIEnding = &Ending{
	Failed: sseEvent("", `{"error":{"message":"the upstream stream failed before it completed","type":"upstream_error","param":null,"code":"`+
		string(sluice.CodeUpstreamStreamFailed)+`"}}`),
	Shutdown: sseEvent("", `{"error":{"message":"`+ErrShuttingDown.Msg+`; the stream ended before it completed","type":"server_error","param":null,"code":"`+
		string(ErrShuttingDown.Code)+`"}}`),
}

// bearerAuth presents the secret as OpenAI's "Authorization: Bearer".
func bearerAuth(h, _ http.Header, secret string) {
	h["Authorization"] = []string{"Bearer " + secret}
}

var doneData = []byte("[DONE]")

// errMalformedEvent ends a stream with a data event that is not JSON.
var errMalformedEvent = errors.New("upstream stream event is neither a JSON object nor [DONE]")

// openAIMarkers are what an OpenAI chunk is skimmed for (eventscan.go):
// its usage, the only member Sluice reads of it, under either name that
// readAnswer takes for one (Gemini's usageMetadata too).
var openAIMarkers = newEventMarkers(marker{`"usage"`, asMember}, marker{`"` + gemini.UsageKey + `"`, asMember})

// openAIEvent reads an event of an OpenAI stream. The usage-only chunk at
// its end exists because Sluice asked for it (PrepareBody): a caller that
// did not ask never sees it.
func openAIEvent(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	switch {
	case ev.Data == nil:
		return u, false, false, nil // a keep-alive comment
	case bytes.Equal(ev.Data, doneData):
		return u, false, true, nil
	}
	if read, err := openAIMarkers.skim(ev.Data); !read {
		return u, false, false, err
	}
	return readOpenAIEvent(ev, req, u)
}

// readOpenAIEvent reads a chunk of an OpenAI stream whole: one JSON
// object, the fields Sluice reads picked in a check that does not allocate
// (readAnswer); anything else is errMalformedEvent.
func readOpenAIEvent(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	f, ok := readAnswer(ev.Data)
	if !ok {
		return u, false, false, errMalformedEvent
	}
	if v := openai.UsageValue(f.usage); v.Measured {
		u = v
		drop = !req.IncludeUsage && isUsageOnly(f.choices)
	}
	return u, drop, false, nil
}
