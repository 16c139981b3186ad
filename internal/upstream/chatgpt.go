package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/protocol/openai"
	"github.com/sluicehq/sluice/internal/sse"
)

// ChatGPTResponses is OpenAI's Responses API as the ChatGPT backend serves
// it to Codex signed in with a ChatGPT account (base URL
// https://chatgpt.com/backend-api/codex): POST {base}/responses (and
// /responses/compact), the account's access token as a bearer token, its
// ChatGPT account in chatgpt-account-id (the credential's headers carry
// it), and Codex's client name in originator. Unlike a cloud's, the
// backend is the one Codex itself calls: a passthrough caller's headers
// go on as they do to OpenAI's own API (Pass: Codex's originator, session
// ids, x-codex-* headers and user agent). The backend takes a narrower
// body than the API (chatgptBody) and answers only streams: a caller that
// asked for a whole answer is sent a stream, read to its end
// (gatherResponse), and answered the response the stream completes with,
// whose usage is the answer's. Errors are OpenAI's envelope, or FastAPI's
// {"detail": "…"} for a body it refuses, which chatgptRejection rewrites
// as OpenAI's; a usage limit's 429 says in its body when the limit resets,
// which becomes the Retry-After the account cools for.
var ChatGPTResponses = func() *Dialect {
	d := Hosted(OpenAIResponses, Hosting{
		URL: chatgptURL, Authorize: chatgptAuth, Finish: chatgptBody, Rejection: chatgptRejection, Gather: gatherResponse,
	})
	d.Pass = OpenAIResponses.Pass
	return d
}()

// chatgptURL is where req goes on the backend: "" for a token count
// (Sluice estimates it), as the Responses API has none.
func chatgptURL(req *sluice.Request, ep *sluice.Endpoint, _ string) string {
	base := strings.TrimSuffix(ep.BaseURL, "/")
	switch {
	case req.CountTokens:
		return ""
	case req.Compact:
		return base + "/responses/compact"
	}
	return base + "/responses"
}

// Header values of every request to the backend that no caller's header
// gave, shared as the upstream request's are (see jsonContentType): Codex
// names itself codex_cli_rs and asks for the Responses beta.
var (
	codexOriginator       = []string{"codex_cli_rs"}
	responsesExperimental = []string{"responses=experimental"}
)

// chatgptAuth presents an access token (or a static secret holding one)
// as the backend takes it, with Codex's originator and beta unless the
// caller's came with the request (passOn). The account's id follows from
// the credential's headers, which may set another originator too.
func chatgptAuth(h, _ http.Header, token string) {
	h["Authorization"] = []string{"Bearer " + token}
	if h["Originator"] == nil {
		h["Originator"] = codexOriginator
	}
	if h["Openai-Beta"] == nil {
		h["Openai-Beta"] = responsesExperimental
	}
}

// chatgptDropped are the members of a Responses request the backend
// refuses ("Unsupported parameter: …"), none of which Codex sends: a cap
// on the output, sampling settings, truncation, and identifiers and
// options the API has and the backend has not. Sluice leaves them out
// rather than fail the request: a chat caller's max_tokens and temperature
// become the first two, and the backend decides them itself.
var chatgptDropped = map[string]bool{
	"max_output_tokens": true, "temperature": true, "top_p": true, "truncation": true,
	"user": true, "safety_identifier": true, "prompt_cache_retention": true,
	"stream_options": true, "context_management": true,
}

// chatgptBody makes a Responses body, the caller's or a translator's, one
// the backend takes:
//   - "stream": true and "store": false, which it requires (a whole answer
//     is gathered from the stream; nothing is stored upstream, so
//     previous_response_id cannot name an earlier response there); a
//     compaction has neither, as it answers JSON;
//   - "instructions", which it requires: "" when absent or null;
//   - the members of chatgptDropped left out;
//   - input as chatgptInput makes it.
//
// Every other member is kept byte for byte.
func chatgptBody(req *sluice.Request, _ *sluice.Endpoint, _ string, body []byte) ([]byte, error) {
	out := make([]byte, 0, len(body)+64)
	out = append(out, '{')
	instructions := false
	err := jsonfield.Fields(body, func(key, value []byte) error {
		switch k := string(key); {
		case k == "stream" || k == "store" || chatgptDropped[k]:
			return nil
		case k == "instructions" && string(value) == "null":
			return nil
		case k == "instructions":
			instructions = true
		case k == "input":
			value = chatgptInput(value)
		}
		out = appendMember(out, key, value)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !instructions {
		out = append(out, `"instructions":"",`...)
	}
	if !req.Compact {
		out = append(out, `"stream":true,"store":false,`...)
	}
	out[len(out)-1] = '}' // the last member's comma
	return out, nil
}

// chatgptInput is a request's input as the backend takes it: a list of
// items, as Codex sends (a string is the one user message it stands for),
// whose messages have no "system" role, which the backend refuses ("System
// messages are not allowed"): such a message is the developer's, the role
// the Responses API gives the same place.
func chatgptInput(input []byte) []byte {
	if len(input) > 0 && input[0] == '"' {
		out := make([]byte, 0, len(input)+80)
		out = append(out, `[{"type":"message","role":"user","content":[{"type":"input_text","text":`...)
		out = append(out, input...)
		return append(out, "}]}]"...)
	}
	if !bytes.Contains(input, systemRole) {
		return input
	}
	out := make([]byte, 0, len(input)+16)
	out = append(out, '[')
	jsonfield.Elements(input, func(start, end int) {
		item := input[start:end]
		if s, e, ok, err := jsonfield.Find(item, "role"); err == nil && ok && bytes.Equal(item[s:e], systemRole) {
			item, _ = jsonfield.Set(item, "role", developerRole) // Find has read it: Set cannot fail
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, item...)
	})
	return append(out, ']')
}

var (
	systemRole    = []byte(`"system"`)
	developerRole = []byte(`"developer"`)
)

// chatgptRejection rewrites the backend's own error body, FastAPI's
// {"detail": "…"}, in OpenAI's envelope with the status's type, and gives
// a usage limit's 429 (error type usage_limit_reached, whose body says
// when the limit resets: resets_at, a Unix time, or resets_in_seconds)
// the Retry-After it lacks, so the account cools until then.
func chatgptRejection(status int, h http.Header, body []byte) (int, []byte) {
	var e struct {
		Detail json.RawMessage `json:"detail"`
		Error  struct {
			Type            string `json:"type"`
			ResetsAt        int64  `json:"resets_at"`
			ResetsInSeconds int64  `json:"resets_in_seconds"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return status, body
	}
	if status == http.StatusTooManyRequests && RetryAfter(h, time.Now()) == 0 {
		wait := e.Error.ResetsInSeconds
		if until := e.Error.ResetsAt - time.Now().Unix(); e.Error.ResetsAt > 0 && until > 0 {
			wait = until
		}
		if wait > 0 {
			h["Retry-After"] = []string{strconv.FormatInt(wait, 10)}
		}
	}
	var detail string
	if json.Unmarshal(e.Detail, &detail) != nil || detail == "" {
		return status, body
	}
	b, err := json.Marshal(openai.ErrorEnvelope{Error: openai.ErrorBody{Message: detail, Type: openai.ErrorType(status), Code: json.RawMessage("null")}})
	if err != nil {
		return status, body
	}
	return status, b
}

// maxGatheredItems bounds the output items gatherResponse keeps, and
// their bytes maxHeldAnswer: a longer answer is not held whole anywhere.
const maxGatheredItems = 1024

// maxTrailingEvents bounds what gatherResponse reads after a stream's
// last event.
const maxTrailingEvents = 8

// errGatheredTooLong fails a stream whose items exceed what is held.
var errGatheredTooLong = errors.New("upstream stream's output is too long to answer whole")

// gatherResponse reads a Responses stream to its end and returns the
// response its last event (response.completed or response.incomplete)
// carries: the answer the request would have had unstreamed, usage
// included. The backend may send that response with an empty output,
// each item having come in its response.output_item.done; the items, in
// output order, are then put in it. An error or response.failed event is
// a *FailedEvent whose data is the failure in OpenAI's envelope.
func gatherResponse(events io.Reader) ([]byte, error) {
	rd := sse.NewReader(events)
	var items [][]byte // by output_index
	held := 0
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil, errStreamTruncated
		}
		if err != nil {
			return nil, err
		}
		if ev.Data == nil {
			continue
		}
		var typ, response, item, index, failure []byte
		if jsonfield.Members(ev.Data, func(key, value []byte) error {
			switch string(key) {
			case "type":
				typ = value
			case "response":
				response = value
			case "item":
				item = value
			case "output_index":
				index = value
			}
			return nil
		}) != nil {
			return nil, protocol.ErrMalformedEvent
		}
		switch string(typ) {
		case `"response.output_item.done"`:
			var i int64
			if jsonfield.DecodeInt(&i, index) != nil {
				i = int64(len(items)) // no index: after the items before it
			}
			if i < 0 || i >= maxGatheredItems || held+len(item) > maxHeldAnswer {
				return nil, errGatheredTooLong
			}
			for int64(len(items)) <= i {
				items = append(items, nil)
			}
			items[i] = bytes.Clone(item) // the reader reuses its buffer
			held += len(item)
		case `"response.completed"`, `"response.incomplete"`:
			answer, err := withOutput(response, items)
			// The call is over when the stream is, as an answer's is at
			// its end: what follows its last event (the stream's end, or
			// a few stray events) is read before the answer goes on, so
			// the upstream counts the request done before its account's
			// slot is given back, and the connection can be reused.
			for range maxTrailingEvents {
				if _, err := rd.Next(); err != nil {
					break
				}
			}
			return answer, err
		case `"response.failed"`:
			jsonfield.Members(response, func(key, value []byte) error {
				if string(key) == "error" {
					failure = value
				}
				return nil
			})
			if failure == nil {
				failure = []byte("null")
			}
			return nil, &FailedEvent{Data: append(append([]byte(`{"error":`), failure...), '}')}
		case `"error"`:
			return nil, &FailedEvent{Data: bytes.Clone(ev.Data)} // its code and message are top-level members, as classify reads them
		}
	}
}

// withOutput is response with items as its output when its own is empty
// or absent; a copy of it otherwise.
func withOutput(response []byte, items [][]byte) ([]byte, error) {
	s, e, ok, err := jsonfield.Find(response, "output")
	if err != nil {
		return nil, protocol.ErrMalformedEvent
	}
	if len(items) == 0 || ok && !emptyList(response[s:e]) {
		return bytes.Clone(response), nil
	}
	list := make([]byte, 0, 2+len(items)*256)
	list = append(list, '[')
	for _, it := range items {
		if it == nil {
			continue // an index the stream skipped
		}
		if len(list) > 1 {
			list = append(list, ',')
		}
		list = append(list, it...)
	}
	return jsonfield.Set(response, "output", append(list, ']'))
}

// emptyList reports whether a JSON value is null or an empty array.
func emptyList(v []byte) bool {
	v = bytes.TrimSpace(v)
	return string(v) == "null" || len(v) >= 2 && v[0] == '[' && len(bytes.TrimSpace(v[1:len(v)-1])) == 0
}
