package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
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
	// path is where a request for model is posted: one path for most
	// protocols, the model's and the method's for Gemini.
	path func(model string, stream bool) string
	// body is a request for model whose one user message is text.
	body func(model, text string, stream bool) string
	// auth sets the headers that carry key, as the protocol's SDK does.
	auth func(h http.Header, key string)
	// user is the body member that names the end user in the protocol;
	// nil for a protocol without one, whose caller names it in
	// X-Sluice-User.
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

// upstreamSide is what a test needs of the protocol its endpoints speak,
// on the provider's own API or on a cloud that hosts it.
type upstreamSide struct {
	protocol sluice.Protocol
	// path matches every path where the simulated provider is called.
	path *regexp.Regexp
	// overloaded is the status the provider answers when it is overloaded:
	// Anthropic's own 529, Gemini's 503 UNAVAILABLE, a gateway's 502 for
	// OpenAI.
	overloaded int
	// billing is how the provider says the account cannot pay.
	billing failure
	// cooled is how long the tests' rate limit (a 429 asking for 500ms)
	// cools an account: what the provider's hint says, rounded up to
	// Anthropic's whole seconds, or, from Bedrock, which sends none, the
	// account's cooldown base (300ms in the accounts catalog).
	cooled time.Duration
	// cloud is the endpoint block that puts the test catalogs' endpoints
	// on a cloud hosting the protocol (`vertex: {…}`); "" for the
	// provider's own API. A cloud endpoint speaks this protocol only, so
	// the catalogs' embeddings alias is left out.
	cloud string
	// hosted matches every path where the cloud was called
	// (HostedRequests) when the simulator then serves the call at the
	// provider's own path (path); nil when the cloud's path is the one
	// recorded.
	hosted *regexp.Regexp
	// aws makes the catalogs' credentials AWS access keys (Bedrock): the
	// secret a credential names is its access key ID, whose secret is
	// awsTableSecret.
	aws bool
	// basePath follows the simulator's URL in the catalogs' base URLs
	// (the ChatGPT backend's /backend-api/codex); credentialHeaders are
	// the catalogs' credentials' headers (its chatgpt-account-id).
	basePath, credentialHeaders string
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
		path:     fixedPath("/v1/chat/completions"),
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
		path:     fixedPath("/v1/messages"),
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
		path:     fixedPath("/v1/responses"),
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
	// geminiCaller is Google's SDKs and Gemini CLI: the model and the
	// method in the path, the stream as server-sent events (?alt=sse; the
	// JSON-array framing is tested in gemini_test.go), no end user in the
	// body, errors and a broken stream's last event in Google's envelope.
	geminiCaller = &callerSide{
		protocol: sluice.ProtocolGemini,
		path: func(model string, stream bool) string {
			if stream {
				return "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
			}
			return "/v1beta/models/" + model + ":generateContent"
		},
		body: func(_, text string, _ bool) string {
			return `{"contents":[{"role":"user","parts":[{"text":` + strconv.Quote(text) + `}]}]}`
		},
		auth:      func(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) },
		answered:  `"candidates"`,
		errorCode: googleErrorCode,
		streamFailed: func(ev sseEvent) (string, bool) {
			if ev.name != "" {
				return "", false
			}
			return googleErrorCode(ev.data)
		},
		// Gemini sends no [DONE]: a complete stream's last chunk is the one
		// with a finishReason.
		streamDone: func(ev sseEvent) bool {
			var c geminiChunk
			return json.Unmarshal([]byte(ev.data), &c) == nil && len(c.Candidates) > 0 && c.Candidates[0].FinishReason != ""
		},
	}

	chatUpstream      = &upstreamSide{protocol: sluice.ProtocolOpenAIChat, path: regexp.MustCompile(`^/v1/chat/completions$`), overloaded: http.StatusBadGateway, billing: openAIBilling}
	messagesUpstream  = &upstreamSide{protocol: sluice.ProtocolAnthropic, path: regexp.MustCompile(`^/v1/messages$`), overloaded: 529, billing: anthropicBilling}
	responsesUpstream = &upstreamSide{protocol: sluice.ProtocolOpenAIResponses, path: regexp.MustCompile(`^/v1/responses$`), overloaded: http.StatusBadGateway, billing: openAIBilling}
	// geminiUpstream is called at the deployment's model, whole or
	// streamed (Sluice always asks for ?alt=sse, which is no part of the
	// path).
	geminiUpstream = &upstreamSide{protocol: sluice.ProtocolGemini, path: regexp.MustCompile(`^/v1beta/models/[^/:]+:(generateContent|streamGenerateContent)$`),
		overloaded: http.StatusServiceUnavailable, billing: geminiBilling}

	// The clouds' dialects of those protocols: Azure OpenAI (chat at the
	// deployment, with api-version and api-key), Vertex AI (Gemini and
	// Claude under the project's publisher models, the credential a
	// bearer token), Bedrock (Claude at InvokeModel and its event-stream
	// variant, SigV4-signed, errors named in x-amzn-ErrorType).
	azureUpstream = &upstreamSide{protocol: sluice.ProtocolOpenAIChat, path: chatUpstream.path, overloaded: http.StatusBadGateway, billing: openAIBilling,
		cooled: 500 * time.Millisecond, cloud: "azure: {api_version: 2024-10-21}", hosted: regexp.MustCompile(`^/openai/deployments/[^/]+/chat/completions$`)}
	vertexGeminiUpstream = &upstreamSide{protocol: sluice.ProtocolGemini, path: geminiUpstream.path, overloaded: http.StatusServiceUnavailable, billing: vertexBilling,
		cooled: 500 * time.Millisecond, cloud: vertexBlock, hosted: regexp.MustCompile(`^/v1/projects/proj-1/locations/us-east5/publishers/google/models/[^/:]+:(generateContent|streamGenerateContent)$`)}
	vertexClaudeUpstream = &upstreamSide{protocol: sluice.ProtocolAnthropic, path: messagesUpstream.path, overloaded: 529, billing: vertexBilling,
		cooled: time.Second, cloud: vertexBlock, hosted: regexp.MustCompile(`^/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/[^/:]+:(rawPredict|streamRawPredict)$`)}
	// codeAssistUpstream is Gemini on Code Assist: one URL per method, the
	// model and project in the body's envelope, the answers in theirs.
	codeAssistUpstream = &upstreamSide{protocol: sluice.ProtocolGemini, path: geminiUpstream.path, overloaded: http.StatusServiceUnavailable, billing: geminiBilling,
		cooled: 500 * time.Millisecond, cloud: "code_assist: {project: proj-1}", hosted: regexp.MustCompile(`^/v1internal:(generateContent|streamGenerateContent)$`)}
	bedrockUpstream = &upstreamSide{protocol: sluice.ProtocolAnthropic, path: regexp.MustCompile(`^/model/[^/]+/(invoke|invoke-with-response-stream)$`),
		overloaded: http.StatusServiceUnavailable, billing: bedrockBilling, cooled: 300 * time.Millisecond, cloud: "bedrock: {region: us-east-1}", aws: true}
	// chatgptUpstream is the ChatGPT backend: Responses under
	// /backend-api/codex, each credential naming its account, every call a
	// stream (a whole answer is gathered from it), and a usage limit's
	// reset said in whole seconds in its body alone.
	chatgptUpstream = &upstreamSide{protocol: sluice.ProtocolOpenAIResponses, path: regexp.MustCompile(`^/backend-api/codex/responses$`), overloaded: http.StatusBadGateway,
		billing: openAIBilling, cooled: time.Second, cloud: "chatgpt: {}", basePath: "/backend-api/codex", credentialHeaders: "headers: {chatgpt-account-id: acct-1}"}

	chatWire = wire{"openai.chat", chatCaller, chatUpstream}
	// callerWires pass each caller protocol through: the tests of what is
	// decided before an upstream is called (a key's, tenant's, end user's,
	// task type's and pool's limits, priority) depend on the caller's
	// protocol alone, so they run on these.
	callerWires = []wire{
		chatWire,
		{"anthropic.messages", messagesCaller, messagesUpstream},
		{"openai.responses", responsesCaller, responsesUpstream},
		{"gemini.generate", geminiCaller, geminiUpstream},
	}
	// wires are, for the tests of what an upstream does (capacity,
	// cooldowns with one probe, auth and billing failures, failover, the
	// breaker, usage): callerWires; an Anthropic caller translated to
	// OpenAI chat (Claude Code on an OpenAI-compatible model) and Gemini
	// translated both ways (Gemini CLI on an OpenAI-compatible model, an
	// OpenAI SDK on a Gemini model); two chained pairs, which meet only
	// through the chat hub (Claude Code on a Gemini model, Codex on a
	// Claude model); and each cloud dialect, passed through (the ChatGPT
	// backend translated from chat too: whole answers gathered from its
	// streams).
	wires = append(slices.Clip(callerWires),
		wire{"anthropic.messages-on-openai.chat", messagesCaller, chatUpstream},
		wire{"gemini.generate-on-openai.chat", geminiCaller, chatUpstream},
		wire{"openai.chat-on-gemini.generate", chatCaller, geminiUpstream},
		wire{"anthropic.messages-on-gemini.generate", messagesCaller, geminiUpstream},
		wire{"openai.responses-on-anthropic.messages", responsesCaller, messagesUpstream},
		wire{"openai.chat-on-azure", chatCaller, azureUpstream},
		wire{"gemini.generate-on-vertex", geminiCaller, vertexGeminiUpstream},
		wire{"anthropic.messages-on-vertex", messagesCaller, vertexClaudeUpstream},
		wire{"anthropic.messages-on-bedrock", messagesCaller, bedrockUpstream},
		wire{"gemini.generate-on-code-assist", geminiCaller, codeAssistUpstream},
		wire{"openai.responses-on-chatgpt", responsesCaller, chatgptUpstream},
		wire{"openai.chat-on-chatgpt", chatCaller, chatgptUpstream},
	)
)

// vertexBlock puts an endpoint on Vertex AI.
const vertexBlock = "vertex: {project: proj-1, location: us-east5}"

// openAIBilling is OpenAI's answer when the account's quota is spent,
// anthropicBilling Anthropic's when its credit is, geminiBilling Gemini's
// when its prepaid credits are.
var (
	openAIBilling = failure{http.StatusTooManyRequests,
		`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}
	anthropicBilling = failure{http.StatusBadRequest,
		`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`}
	geminiBilling = failure{http.StatusTooManyRequests,
		`{"error":{"code":429,"message":"Your prepayment credits are depleted. Please go to AI Studio at https://ai.studio/projects to manage your project and billing.","status":"RESOURCE_EXHAUSTED"}}`}
	// vertexBilling is Google Cloud's answer for a project whose billing
	// is off, before any model is called, whichever publisher's.
	vertexBilling = failure{http.StatusForbidden,
		`{"error":{"code":403,"message":"This API method requires billing to be enabled. Please enable billing on project #proj-1 by visiting https://console.developers.google.com/billing/enable?project=proj-1 then retry.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"BILLING_DISABLED","domain":"googleapis.com","metadata":{"consumer":"projects/proj-1","service":"aiplatform.googleapis.com"}}]}}`}
	// bedrockBilling is Bedrock's AccessDeniedException when the AWS
	// account has no valid payment method for the model's Marketplace
	// subscription: the simulator sends it as AWSError with this message.
	bedrockBilling = failure{http.StatusForbidden,
		"Model access is denied due to INVALID_PAYMENT_INSTRUMENT:A valid payment instrument must be provided.. Your AWS Marketplace subscription for this model cannot be completed at this time."}
)

// fixedPath is the path of a protocol that has one for every model.
func fixedPath(path string) func(string, bool) string {
	return func(string, bool) string { return path }
}

func streamField(stream bool) string {
	if stream {
		return `,"stream":true`
	}
	return ""
}

// withUser names name as the end user of a request of body (a JSON
// object) and Sluice headers hdr: in the body's member, or X-Sluice-User
// for a protocol without one.
func (c *callerSide) withUser(body string, hdr map[string]string, name string) (string, map[string]string) {
	if c.user == nil {
		named := maps.Clone(hdr)
		if named == nil {
			named = map[string]string{}
		}
		named["X-Sluice-User"] = name
		return body, named
	}
	return "{" + c.user(name) + "," + body[1:], hdr
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

// googleErrorCode reads Google's envelope, {"error":{"code","message",
// "status"}}, in which Sluice keeps its code as the reason of an ErrorInfo
// detail ("" when there is none: an upstream's error passed on).
func googleErrorCode(body string) (string, bool) {
	var e googleErr
	if json.Unmarshal([]byte(body), &e) != nil || e.Error.Code == 0 || e.Error.Message == "" || e.Error.Status == "" {
		return "", false
	}
	for _, d := range e.Error.Details {
		if d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			r, _ := d["reason"].(string)
			return r, true
		}
	}
	return "", true
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
// wire. (Running more wires at once than -parallel allows, from a
// goroutine each, made the breaker's, the priority queue's and the usage
// writer's timings miss under -race on two busy cores.)
func eachWire(t *testing.T, ws []wire, f func(t *testing.T, w wire)) {
	for _, w := range ws {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			f(t, w)
		})
	}
}

// eachWireBackend runs f for every wire of ws, as eachWire does, on the
// in-memory state, and for the callerWires among them on Redis too: the
// state holds accounts' claims and cooldowns, the same whatever protocol or
// cloud reaches the account.
func eachWireBackend(t *testing.T, ws []wire, f func(t *testing.T, w wire, state string)) {
	eachWire(t, ws, func(t *testing.T, w wire) {
		if slices.Contains(callerWires, w) {
			eachBackend(t, func(t *testing.T, state string) { f(t, w, state) })
			return
		}
		t.Run("memory", func(t *testing.T) { f(t, w, "{backend: memory}") })
	})
}

// aliasWithoutProtocol is a model alias of a test catalog that names no
// protocol (so OpenAI chat), up to its deployments.
var aliasWithoutProtocol = regexp.MustCompile(`(?m)^(  - alias: [^\n]+\n)(    deployments)`)

// The parts of the test catalogs a cloud changes: the chat endpoints'
// protocols (in a flow mapping, or a line of a block one), the embeddings
// alias, and a credential's secret.
var (
	flowProtocols    = regexp.MustCompile(`protocols: \[openai\.chat(?:, openai\.embeddings)?\]\}`)
	blockProtocols   = regexp.MustCompile(`(?m)^(\s+)protocols: \[openai\.chat(?:, openai\.embeddings)?\]$`)
	embedAlias       = regexp.MustCompile(`(?m)^  - alias: embed\n    protocol: openai\.embeddings\n    deployments:\n(?:      - [^\n]+\n)+`)
	credentialSecret = regexp.MustCompile(`secret_env: (\w+), endpoints:`)
)

// catalog is template (written for OpenAI chat) for w: its chat endpoints
// speak w's upstream protocol, on w's cloud, and its chat aliases w's
// caller protocol.
func (w wire) catalog(template string) string {
	u := w.upstream
	if u.cloud != "" {
		p := string(u.protocol)
		template = flowProtocols.ReplaceAllString(template, "protocols: ["+p+"], "+u.cloud+"}")
		template = blockProtocols.ReplaceAllString(template, "${1}protocols: ["+p+"]\n${1}"+u.cloud)
		template = embedAlias.ReplaceAllString(template, "")
	}
	if u.aws {
		template = credentialSecret.ReplaceAllString(template, "aws: {access_key_id_env: $1, secret_access_key_env: AWS_TABLE_SECRET}, endpoints:")
	}
	if u.credentialHeaders != "" {
		template = credentialSecret.ReplaceAllString(template, "secret_env: $1, "+u.credentialHeaders+", endpoints:")
	}
	template = strings.ReplaceAll(template, "base_url: %s", "base_url: %s"+u.basePath)
	template = strings.ReplaceAll(template, "protocols: [openai.chat", "protocols: ["+string(u.protocol))
	return aliasWithoutProtocol.ReplaceAllString(template, "${1}    protocol: "+string(w.caller.protocol)+"\n${2}")
}

// awsTableSecret is the secret access key of every AWS key of the table's
// catalogs.
const awsTableSecret = "aws-table-SECRET-4c1e9a"

func init() { testEnv["AWS_TABLE_SECRET"] = awsTableSecret }

// sim is opts for a simulator serving u: on a cloud, it knows every
// credential of the table's catalogs (a cloud takes only the access tokens
// it knows, and checks an AWS key's signature with the key's secret), with
// opts.Default's behaviour unless opts gives one.
func (u *upstreamSide) sim(opts simulator.Options) simulator.Options {
	if u.cloud == "" {
		return opts
	}
	secrets := []string{secretA1, secretA2, secretB1}
	for i := range 10 {
		secrets = append(secrets, upstreamKey(fmt.Sprintf("k%d", i)))
	}
	keys := maps.Clone(opts.Keys)
	if keys == nil {
		keys = map[string]simulator.Behavior{}
	}
	for _, s := range secrets {
		if _, ok := keys[s]; !ok {
			keys[s] = opts.Default
		}
		if u.aws {
			if opts.AWSKeys == nil {
				opts.AWSKeys = map[string]simulator.AWSKey{}
			}
			opts.AWSKeys[s] = simulator.AWSKey{Secret: awsTableSecret}
		}
	}
	opts.Keys = keys
	return opts
}

// harness starts a gateway on template made w's (catalog) in front of
// simulators serving w's upstream, simA from simA's options.
func (w wire) harness(t *testing.T, template, state string, simA simulator.Options) *harness {
	t.Helper()
	return newHarnessOn(t, w.catalog(template), state, w.upstream.sim(simA), w.upstream.sim(simulator.Options{}))
}

// fail is b failing as w's upstream says it does: with the status and
// body, or, from Bedrock, the status and its error's message.
func (u *upstreamSide) fail(b simulator.Behavior, f failure) simulator.Behavior {
	b.FailStatus, b.FailBody = f.status, f.body
	if u.aws {
		b.AWSError = "AccessDeniedException"
	}
	return b
}

// wantUpstreamCalls checks that every call the simulated provider got on
// h's endpoints was of w's upstream protocol, at w's cloud when it has
// one: the test exercised the wire it names.
func (w wire) wantUpstreamCalls(t *testing.T, h *harness) {
	t.Helper()
	u := w.upstream
	for _, sim := range []*simulator.Simulator{h.simA, h.simB} {
		calls := sim.Requests()
		for _, r := range calls {
			if !u.path.MatchString(r.Path) {
				t.Errorf("the provider was called at %s, want %s only (%s)", r.Path, u.path, w.name)
				return
			}
		}
		if u.hosted == nil {
			continue
		}
		hosted := sim.HostedRequests()
		if len(hosted) < len(calls) {
			t.Errorf("%d calls reached the provider, %d through the cloud; want every one through the cloud (%s)", len(calls), len(hosted), w.name)
		}
		for _, r := range hosted {
			if !u.hosted.MatchString(r.Path) {
				t.Errorf("the cloud was called at %s, want %s only (%s)", r.Path, u.hosted, w.name)
				return
			}
		}
	}
}

// send posts body, a request of c's protocol for model, to c's path with
// key in c's headers and hdr. Safe from any goroutine: it reports with
// Errorf, and not at all when ctx ended.
func (h *harness) send(ctx context.Context, c *callerSide, key, model string, stream bool, body string, hdr map[string]string) *http.Response {
	h.t.Helper()
	path := c.path(model, stream)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url(path), strings.NewReader(body))
	if err != nil {
		h.t.Errorf("POST %s: %v", path, err)
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
			h.t.Errorf("POST %s: %v", path, err)
		}
		return nil
	}
	return resp
}

// ask sends one request of c's protocol for model and reads the whole
// answer; status 0 when it failed.
func (h *harness) ask(ctx context.Context, c *callerSide, key, model, text string, hdr map[string]string) (int, string) {
	h.t.Helper()
	resp := h.send(ctx, c, key, model, false, c.body(model, text, false), hdr)
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
