package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// The acceptance tests of capacity, cooldown, priority and failover run for
// every wire in wires: a caller protocol reaching endpoints of an upstream
// protocol, passed through or translated. A wire says how to build a
// request of its caller protocol, how to read the answer and the stream,
// and how to turn the tests' catalogs (written for OpenAI chat) into its
// own. The simulated provider needs no telling: a Behavior fails or limits
// a key in whatever protocol the request came in.

// callerSide is what a test needs of a caller protocol.
type callerSide struct {
	protocol sluice.Protocol
	path     string
	// body is a request for model whose one user message is text.
	body func(model, text string, stream bool) string
	// auth sets the headers that carry key, as the protocol's SDK does.
	auth func(h http.Header, key string)
	// user is the body member that names the end user in the protocol.
	user func(name string) string
	// answered is in every complete JSON answer of the protocol.
	answered string
	// errorCode is Sluice's code in an error answer of the protocol's
	// envelope; ok is false when body is not that envelope.
	errorCode func(body string) (code string, ok bool)
	// streamFailed is Sluice's code in the event that ends a broken stream
	// in this protocol; ok is false for any other event.
	streamFailed func(ev sseEvent) (code string, ok bool)
	// streamDone reports the event that only a complete stream sends.
	streamDone func(ev sseEvent) bool
}

// upstreamSide is what a test needs of the protocol its endpoints speak.
type upstreamSide struct {
	protocol sluice.Protocol
	path     string // where the simulated provider is called
	// overloaded is the status the provider answers when it is overloaded:
	// Anthropic's own 529, a gateway's 502 for OpenAI.
	overloaded int
	// billing is how the provider says the account cannot pay.
	billing failure
}

// failure is an error answer of a provider.
type failure struct {
	status int
	body   string
}

// wire is a caller protocol served by endpoints of an upstream protocol.
type wire struct {
	name     string // the subtest's name
	caller   *callerSide
	upstream *upstreamSide
}

var (
	chatCaller = &callerSide{
		protocol: sluice.ProtocolOpenAIChat,
		path:     "/v1/chat/completions",
		body: func(model, text string, stream bool) string {
			return `{"model":` + strconv.Quote(model) + streamField(stream) + `,"messages":[{"role":"user","content":` + strconv.Quote(text) + `}]}`
		},
		auth:      bearer,
		user:      func(name string) string { return `"user":` + strconv.Quote(name) },
		answered:  `"object":"chat.completion"`,
		errorCode: openAIErrorCode,
		streamFailed: func(ev sseEvent) (string, bool) {
			if ev.name != "" {
				return "", false
			}
			return openAIErrorCode(ev.data)
		},
		streamDone: func(ev sseEvent) bool { return ev.data == "[DONE]" },
	}
	messagesCaller = &callerSide{
		protocol: sluice.ProtocolAnthropic,
		path:     "/v1/messages",
		body: func(model, text string, stream bool) string {
			return `{"model":` + strconv.Quote(model) + `,"max_tokens":64` + streamField(stream) + `,"messages":[{"role":"user","content":` + strconv.Quote(text) + `}]}`
		},
		auth: func(h http.Header, key string) {
			h.Set("X-Api-Key", key)
			h.Set("Anthropic-Version", "2023-06-01")
		},
		user:      func(name string) string { return `"metadata":{"user_id":` + strconv.Quote(name) + `}` },
		answered:  `"type":"message"`,
		errorCode: anthropicErrorCode,
		streamFailed: func(ev sseEvent) (string, bool) {
			if ev.name != "error" {
				return "", false
			}
			return anthropicErrorCode(ev.data)
		},
		streamDone: func(ev sseEvent) bool { return ev.name == "message_stop" },
	}
	responsesCaller = &callerSide{
		protocol: sluice.ProtocolOpenAIResponses,
		path:     "/v1/responses",
		body: func(model, text string, stream bool) string {
			return `{"model":` + strconv.Quote(model) + streamField(stream) + `,"input":` + strconv.Quote(text) + `}`
		},
		auth:      bearer,
		user:      func(name string) string { return `"safety_identifier":` + strconv.Quote(name) },
		answered:  `"object":"response"`,
		errorCode: openAIErrorCode,
		streamFailed: func(ev sseEvent) (string, bool) {
			// The Responses API's error event: its code at the top level.
			var e struct{ Type, Code, Message string }
			if ev.name != "error" || json.Unmarshal([]byte(ev.data), &e) != nil || e.Type != "error" || e.Message == "" {
				return "", false
			}
			return e.Code, true
		},
		streamDone: func(ev sseEvent) bool { return ev.name == "response.completed" },
	}

	chatUpstream      = &upstreamSide{protocol: sluice.ProtocolOpenAIChat, path: "/v1/chat/completions", overloaded: http.StatusBadGateway, billing: openAIBilling}
	messagesUpstream  = &upstreamSide{protocol: sluice.ProtocolAnthropic, path: "/v1/messages", overloaded: 529, billing: anthropicBilling}
	responsesUpstream = &upstreamSide{protocol: sluice.ProtocolOpenAIResponses, path: "/v1/responses", overloaded: http.StatusBadGateway, billing: openAIBilling}

	chatWire = wire{"openai.chat", chatCaller, chatUpstream}
	// wires are the three protocols passed through, and an Anthropic caller
	// translated to OpenAI chat (Claude Code on an OpenAI-compatible model).
	wires = []wire{
		chatWire,
		{"anthropic.messages", messagesCaller, messagesUpstream},
		{"openai.responses", responsesCaller, responsesUpstream},
		{"anthropic.messages-on-openai.chat", messagesCaller, chatUpstream},
	}
)

// openAIBilling is OpenAI's answer when the account's quota is spent,
// anthropicBilling Anthropic's when its credit is.
var (
	openAIBilling = failure{http.StatusTooManyRequests,
		`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}
	anthropicBilling = failure{http.StatusBadRequest,
		`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`}
)

func streamField(stream bool) string {
	if stream {
		return `,"stream":true`
	}
	return ""
}

// withUser is body (a JSON object) naming name as its end user.
func (c *callerSide) withUser(body, name string) string {
	return "{" + c.user(name) + "," + body[1:]
}

func bearer(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

// openAIErrorCode reads OpenAI's envelope (chat and Responses).
func openAIErrorCode(body string) (string, bool) {
	var e envelope
	if json.Unmarshal([]byte(body), &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
		return "", false
	}
	return e.Error.Code, true
}

// anthropicErrorCode reads Anthropic's envelope, in which Sluice keeps its
// code in error.code.
func anthropicErrorCode(body string) (string, bool) {
	var e anthropicError
	if json.Unmarshal([]byte(body), &e) != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
		return "", false
	}
	return e.Error.Code, true
}

// eachWire runs f for every wire of ws as a parallel subtest named by the
// wire.
func eachWire(t *testing.T, ws []wire, f func(t *testing.T, w wire)) {
	for _, w := range ws {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			f(t, w)
		})
	}
}

// aliasWithoutProtocol is a model alias of a test catalog that names no
// protocol (so OpenAI chat), up to its deployments.
var aliasWithoutProtocol = regexp.MustCompile(`(?m)^(  - alias: [^\n]+\n)(    deployments)`)

// catalog is template (written for OpenAI chat) for w: its chat endpoints
// speak w's upstream protocol and its chat aliases w's caller protocol.
func (w wire) catalog(template string) string {
	template = strings.ReplaceAll(template, "protocols: [openai.chat", "protocols: ["+string(w.upstream.protocol))
	return aliasWithoutProtocol.ReplaceAllString(template, "${1}    protocol: "+string(w.caller.protocol)+"\n${2}")
}

// wantUpstreamCalls checks that every call the simulated provider got on
// h's endpoints was of w's upstream protocol: the test exercised the wire
// it names.
func (w wire) wantUpstreamCalls(t *testing.T, h *harness) {
	t.Helper()
	for _, r := range append(h.simA.Requests(), h.simB.Requests()...) {
		if r.Path != w.upstream.path {
			t.Errorf("the provider was called at %s, want %s only (%s)", r.Path, w.upstream.path, w.name)
			return
		}
	}
}

// send posts body to c's path with key in c's headers and hdr. Safe from
// any goroutine: it reports with Errorf, and not at all when ctx ended.
func (h *harness) send(ctx context.Context, c *callerSide, key, body string, hdr map[string]string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url(c.path), strings.NewReader(body))
	if err != nil {
		h.t.Errorf("POST %s: %v", c.path, err)
		return nil
	}
	if key != "" {
		c.auth(req.Header, key)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			h.t.Errorf("POST %s: %v", c.path, err)
		}
		return nil
	}
	return resp
}

// ask sends one request of c's protocol for model and reads the whole
// answer; status 0 when it failed.
func (h *harness) ask(ctx context.Context, c *callerSide, key, model, text string, hdr map[string]string) (int, string) {
	h.t.Helper()
	resp := h.send(ctx, c, key, c.body(model, text, false), hdr)
	if resp == nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sseEvent is one server-sent event: its name ("" when it has none) and
// its data.
type sseEvent struct{ name, data string }

// readEvents reads an SSE answer to its end.
func readEvents(resp *http.Response) []sseEvent {
	var events []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			ev.name = name
		} else if data, ok := strings.CutPrefix(line, "data: "); ok {
			ev.data = data
		} else if line == "" && ev != (sseEvent{}) {
			events = append(events, ev)
			ev = sseEvent{}
		}
	}
	if ev != (sseEvent{}) {
		events = append(events, ev)
	}
	return events
}
