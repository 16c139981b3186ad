package upstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/sse"
)

// CodeAssistGemini is Gemini's generateContent as Google's Code Assist API
// serves it to Gemini CLI signed in with a Google account: POST
// {base}/v1internal:generateContent (:streamGenerateContent?alt=sse,
// :countTokens) with a Google access token as a bearer token. The model
// and the Google Cloud project are in the body, which wraps Gemini's
// request: {"model": m, "project": p, "request": {…}}; a count's is
// {"request": {"model": "models/m", "contents": […]}}. An answer wraps
// Gemini's in {"response": {…}, "traceId": …}, and so does the data of
// every streamed event. Sluice wraps the body (codeAssistBody) and takes
// the answers and events out of their envelope (codeAssistAnswer,
// codeAssistEvents), so every reader of Gemini's answers (usage, the
// relay, the translators) serves Code Assist unchanged; a count's answer,
// {"totalTokens": n}, is already Gemini's. Errors are Google's envelope,
// as Gemini's are.
var CodeAssistGemini = Hosted(GeminiGenerate, Hosting{
	URL: codeAssistURL, Authorize: bearerAuth, Finish: codeAssistBody, Answer: codeAssistAnswer, Unframe: codeAssistUnframe,
})

// codeAssistVersion is the Code Assist API's version, which its methods
// follow after a colon.
const codeAssistVersion = "/v1internal"

// codeAssistURL is the URL of req's method: a base URL written with
// /v1internal keeps it once. The model is in the body.
func codeAssistURL(req *sluice.Request, ep *sluice.Endpoint, _ string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(ep.BaseURL, "/"), codeAssistVersion) + codeAssistVersion
	switch {
	case req.CountTokens:
		return base + ":countTokens"
	case req.Stream:
		return base + ":streamGenerateContent?alt=sse"
	}
	return base + ":generateContent"
}

// codeAssistBody wraps a Gemini body (the caller's, or a translator's) in
// Code Assist's request, with model and the endpoint's project; a token
// count as Code Assist takes one, with the contents alone (of the body, or
// of its generateContentRequest): it counts no system instruction or
// tools.
func codeAssistBody(req *sluice.Request, ep *sluice.Endpoint, model string, body []byte) ([]byte, error) {
	if req.CountTokens {
		return codeAssistCount(model, body)
	}
	name, _ := json.Marshal(model) // a string always marshals
	project, _ := json.Marshal(ep.Host.Project)
	out := make([]byte, 0, len(body)+len(name)+len(project)+36)
	out = append(out, `{"model":`...)
	out = append(out, name...)
	out = append(out, `,"project":`...)
	out = append(out, project...)
	out = append(out, `,"request":`...)
	out = append(out, body...)
	return append(out, '}'), nil
}

// codeAssistCount is the count request of a Gemini countTokens body.
func codeAssistCount(model string, body []byte) ([]byte, error) {
	s, e, ok, err := jsonfield.Find(body, "generateContentRequest")
	if err != nil {
		return nil, err
	}
	if ok {
		body = body[s:e]
	}
	name, _ := json.Marshal("models/" + model)
	out := make([]byte, 0, len(body)+len(name)+36)
	out = append(out, `{"request":{"model":`...)
	out = append(out, name...)
	if s, e, ok, err = jsonfield.Find(body, "contents"); err != nil {
		return nil, err
	} else if ok {
		out = append(out, `,"contents":`...)
		out = append(out, body[s:e]...)
	}
	return append(out, "}}"...), nil
}

// codeAssistAnswer takes a whole answer out of Code Assist's envelope: its
// "response" object. An answer without one (a count's) is left as it is,
// as Gemini CLI reads it.
func codeAssistAnswer(body []byte) []byte {
	if s, e, ok, err := jsonfield.Find(body, "response"); err == nil && ok && body[s] == '{' {
		return body[s:e]
	}
	return body
}

// codeAssistUnframe reads a Code Assist stream as Gemini's server-sent
// events.
func codeAssistUnframe(h http.Header, body io.Reader) (io.Reader, error) {
	if !hasMediaType(h, isEventStream) {
		return nil, fmt.Errorf("upstream answered a stream with a content type that is not %s", eventStream[0])
	}
	return codeAssistEvents(sse.NewReader(body)), nil
}

// codeAssistEvents reads Code Assist's server-sent events and gives each as
// Gemini sends it: its data taken out of the envelope (codeAssistAnswer;
// an event without one, such as an error, as it is), on one data line per
// line; comments and events without data as they came.
func codeAssistEvents(events *sse.Reader) *reframed {
	return &reframed{
		next: func(dst []byte) ([]byte, error) {
			ev, err := events.Next()
			if err != nil {
				return dst, err
			}
			return codeAssistEvent(dst, ev), nil
		},
		buffered: events.Buffered,
	}
}

// codeAssistEvent appends Gemini's event for Code Assist's event ev to out.
func codeAssistEvent(out []byte, ev sse.Event) []byte {
	if ev.Data == nil {
		return append(out, ev.Raw...)
	}
	if ev.Name != nil {
		out = append(out, "event: "...)
		out = append(out, ev.Name...)
		out = append(out, '\n')
	}
	return appendData(out, codeAssistAnswer(ev.Data))
}
