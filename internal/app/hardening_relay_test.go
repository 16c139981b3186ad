package app_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jsonvalid"
	"github.com/sluicehq/sluice/internal/simulator"
)

// callerProtocols are the four protocols a caller speaks, by the short
// name the relay catalog's aliases use ("msg-on-chat": an Anthropic
// Messages caller on an OpenAI chat endpoint).
var callerProtocols = []string{"chat", "msg", "resp", "gem"}

// relayCatalog puts every caller protocol on an endpoint of every
// protocol of one hostile upstream (HOSTILE), with a static credential,
// and the chat and Messages callers on a chat endpoint of it with an
// OAuth credential (oauth-chat-on-chat, oauth-msg-on-chat).
const relayCatalog = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  secret_key_file: DIR/secret-key
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 120s}
database: {url: "sqlite://DIR/sluice.db"}
endpoints:
  - {id: chat, base_url: HOSTILE, protocols: [openai.chat]}
  - {id: msg, base_url: HOSTILE, protocols: [anthropic.messages]}
  - {id: resp, base_url: HOSTILE, protocols: [openai.responses]}
  - {id: gem, base_url: HOSTILE, protocols: [gemini.generate]}
  - {id: oauth, base_url: HOSTILE, protocols: [openai.chat]}
credentials:
  - {id: static, secret_env: UP_A1, endpoints: [chat, msg, resp, gem]}
  - id: token
    oauth: {token_url: HOSTILE/oauth/token, client_id: sluice-test, refresh_token_file: DIR/refresh-token}
    endpoints: [oauth]
models:
MODELS
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

var protocolNames = map[string]string{"chat": "openai.chat", "msg": "anthropic.messages", "resp": "openai.responses", "gem": "gemini.generate"}

// hostile is an upstream that answers as its test says, for every
// protocol; it passes the OAuth token exchange to a simulator.
type hostile struct {
	sim *simulator.Simulator
	mu  sync.Mutex
	// answer writes the answer to r, the secret it was sent, for the
	// upstream protocol its path names.
	answer func(w http.ResponseWriter, r *http.Request, protocol, secret string)
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == simulator.OAuthTokenPath {
		h.sim.ServeHTTP(w, r)
		return
	}
	io.Copy(io.Discard, r.Body)
	secret := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	for _, v := range []string{r.Header.Get("X-Api-Key"), r.Header.Get("X-Goog-Api-Key"), r.URL.Query().Get("key")} {
		if v != "" {
			secret = v
		}
	}
	protocol := "chat"
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages"):
		protocol = "msg"
	case strings.HasSuffix(r.URL.Path, "/responses"):
		protocol = "resp"
	case strings.Contains(r.URL.Path, ":"):
		protocol = "gem"
	}
	h.mu.Lock()
	answer := h.answer
	h.mu.Unlock()
	answer(w, r, protocol, secret)
}

func (h *hostile) set(answer func(w http.ResponseWriter, r *http.Request, protocol, secret string)) {
	h.mu.Lock()
	h.answer = answer
	h.mu.Unlock()
}

// relayGateway is a gateway in front of a hostile upstream.
type relayGateway struct {
	*harness
	up *hostile
}

func startRelayGateway(t *testing.T) *relayGateway {
	t.Helper()
	up := &hostile{sim: simulator.New(simulator.Options{})}
	srv := httptest.NewServer(up)
	t.Cleanup(func() { up.sim.Close(); srv.Close() })
	var models strings.Builder
	for _, caller := range callerProtocols {
		for _, upstream := range callerProtocols {
			fmt.Fprintf(&models, "  - alias: %s-on-%s\n    protocol: %s\n    deployments: [{model: m, endpoints: [%s]}]\n", caller, upstream, protocolNames[caller], upstream)
		}
		fmt.Fprintf(&models, "  - alias: oauth-%s-on-chat\n    protocol: %s\n    deployments: [{model: m, endpoints: [oauth]}]\n", caller, protocolNames[caller])
	}
	dir := t.TempDir()
	catalog := strings.NewReplacer("DIR", dir, "HOSTILE", srv.URL, "MODELS\n", models.String()).Replace(relayCatalog)
	writeFiles(t, dir, map[string]string{
		"secret-key":    testSecretKey,
		"refresh-token": up.sim.NewRefreshToken(simulator.Behavior{}, time.Hour) + "\n",
		"catalog.yaml":  catalog,
	})
	g := &relayGateway{harness: &harness{t: t, logs: &syncBuffer{}, cfgPath: filepath.Join(dir, "catalog.yaml")}, up: up}
	g.startGateway()
	eventually(t, 5*time.Second, "the first access token", func() bool { return up.sim.Refreshes() == 1 })
	return g
}

// call sends a request of caller's protocol for alias (streamed or not)
// and returns the answer, read whole.
func (g *relayGateway) call(t *testing.T, caller, alias string, stream bool) (int, http.Header, string) {
	t.Helper()
	var path, body string
	header := http.Header{"Content-Type": {"application/json"}}
	switch caller {
	case "chat":
		path, body = "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, alias, stream)
		header.Set("Authorization", "Bearer "+keyWeb)
	case "msg":
		path, body = "/v1/messages", fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, alias, stream)
		header.Set("X-Api-Key", keyWeb)
		header.Set("Anthropic-Version", "2023-06-01")
	case "resp":
		path, body = "/v1/responses", fmt.Sprintf(`{"model":%q,"stream":%v,"input":"hi"}`, alias, stream)
		header.Set("Authorization", "Bearer "+keyWeb)
	case "gem":
		path, body = "/v1beta/models/"+alias+":generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`
		if stream {
			path = "/v1beta/models/" + alias + ":streamGenerateContent?alt=sse"
		}
		header.Set("X-Goog-Api-Key", keyWeb)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url(path), strings.NewReader(body))
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// errorBody is a request error of protocol carrying message.
func errorBody(protocol, message string) string {
	m, _ := json.Marshal(message)
	switch protocol {
	case "msg":
		return `{"type":"error","error":{"type":"invalid_request_error","message":` + string(m) + `}}`
	case "gem":
		return `{"error":{"code":400,"message":` + string(m) + `,"status":"INVALID_ARGUMENT"}}`
	}
	return `{"error":{"message":` + string(m) + `,"type":"invalid_request_error","param":null,"code":null}}`
}

// TestEncodedSecretEchoIsMasked (issue #24 item 2): an upstream's 400 that
// echoes the secret it was sent — a static key or an OAuth access token —
// in a form the caller's client (or Sluice's translator) decodes reaches
// no caller, passed through or translated, in any encoding: the error's
// words around it still do.
func TestEncodedSecretEchoIsMasked(t *testing.T) {
	g := startRelayGateway(t)
	escapeAll := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	encodings := map[string]func(secret string) string{
		"JSON escapes": func(s string) string { return escapeAll(s) },
		"one escape":   func(s string) string { return strings.Replace(s, "k", `\u006b`, 1) },
		"percent":      func(s string) string { return percentEncoded(s) },
		"base64":       func(s string) string { return base64.StdEncoding.EncodeToString([]byte(`{"tok":"` + s + `"}`)) },
		"base64url":    func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(`{"token":"` + s + `"}`)) },
	}
	for name, encode := range encodings {
		t.Run(name, func(t *testing.T) {
			var seen sync.Map // the secrets the upstream was sent
			g.up.set(func(w http.ResponseWriter, r *http.Request, protocol, secret string) {
				seen.Store(secret, true)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				// The message is raw JSON text: its escapes stay as written.
				body := errorBody(protocol, "MARK")
				io.WriteString(w, strings.Replace(body, "MARK", "credential "+encode(secret)+" is refused (ref 42)", 1))
			})
			for _, caller := range callerProtocols {
				aliases := []string{"oauth-" + caller + "-on-chat"}
				for _, up := range callerProtocols {
					aliases = append(aliases, caller+"-on-"+up)
				}
				for _, alias := range aliases {
					status, header, body := g.call(t, caller, alias, false)
					if status != http.StatusBadRequest || !strings.Contains(body, "is refused (ref 42)") {
						t.Errorf("%s: answer %d %s; want the upstream's 400", alias, status, body)
					}
					seen.Range(func(k, _ any) bool {
						secret := k.(string)
						if revealsSecret(body, secret) {
							t.Errorf("%s: the caller can decode the secret from %s", alias, body)
						}
						for k, v := range header {
							if revealsSecret(strings.Join(v, " "), secret) {
								t.Errorf("%s: header %s = %q reveals the secret", alias, k, v)
							}
						}
						return true
					})
				}
			}
			if _, ok := seen.Load(secretA1); !ok {
				t.Errorf("the upstream never saw the static secret")
			}
		})
	}
}

func percentEncoded(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02x", s[i])
	}
	return b.String()
}

// base64Run is a run of text that may be base64, in either alphabet.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/_\-]{8,}`)

// revealsSecret reports whether any decoding a client might apply to s —
// JSON strings (nested too), percent-decoding, base64 at any alignment —
// yields secret.
func revealsSecret(s, secret string) bool {
	texts := []string{s}
	for i := 0; i < len(texts) && i < 64; i++ {
		t := texts[i]
		if strings.Contains(t, secret) {
			return true
		}
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			texts = append(texts, jsonStrings(v)...)
		} else if q, err := strconv.Unquote(`"` + t + `"`); err == nil && q != t {
			texts = append(texts, q)
		}
		if u, err := url.PathUnescape(t); err == nil && u != t {
			texts = append(texts, u)
		}
		for _, run := range base64Run.FindAllString(t, -1) {
			for from := range 4 {
				for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
					r := run[from:]
					r = r[:len(r)/4*4]
					if d, err := enc.DecodeString(r); err == nil && bytes.Contains(d, []byte(secret)) {
						return true
					}
				}
			}
		}
	}
	return false
}

func jsonStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, jsonStrings(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, jsonStrings(e)...)
		}
		return out
	}
	return nil
}

// firstEvents is a valid first stream event of each upstream protocol, as
// it is written.
var firstEvents = map[string]string{
	"chat": `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}` + "\n\n",
	"msg": "event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n",
	"resp": "event: response.created\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}` + "\n\n",
	"gem":  `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"index":0}],"modelVersion":"m","responseId":"r"}` + "\n\n",
}

// streamAnswer answers a stream of text/event-stream whose events are
// each protocol's first ones, then then.
func streamAnswer(then func(protocol string) string) func(w http.ResponseWriter, r *http.Request, protocol, secret string) {
	return func(w http.ResponseWriter, r *http.Request, protocol, _ string) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, firstEvents[protocol])
		w.(http.Flusher).Flush()
		io.WriteString(w, then(protocol))
	}
}

// streamEndings is what ends a stream that failed after it began, in each
// caller protocol: an error event.
var streamEndings = map[string]string{"chat": `"code":"upstream_stream_failed"`, "msg": "event: error", "resp": "event: error", "gem": `"reason":"upstream_stream_failed"`}

// TestJunkEventNeverReachesTheCaller (issue #24 item 15): a stream event
// that is shaped like a JSON object but is not JSON, after the stream
// began, reaches no caller — passed through or translated — whose SDK
// would fail to parse it: the stream ends with the caller protocol's error
// event instead, and nothing after the junk is relayed.
func TestJunkEventNeverReachesTheCaller(t *testing.T) {
	g := startRelayGateway(t)
	g.up.set(streamAnswer(func(protocol string) string {
		junk := "data: {not json, \"after\": 1}\n\n"
		if protocol == "msg" || protocol == "resp" {
			junk = "event: content_block_delta\n" + junk
		}
		return junk + firstEvents[protocol]
	}))
	for _, caller := range callerProtocols {
		for _, up := range callerProtocols {
			alias := caller + "-on-" + up
			status, _, body := g.call(t, caller, alias, true)
			if status != http.StatusOK || strings.Contains(body, "not json") || !strings.Contains(body, streamEndings[caller]) {
				t.Errorf("%s: stream %d %s; want it ended with its error event, without the junk", alias, status, body)
			}
		}
	}
}

// TestToolArgumentsStayJSONForAnthropicCallers (issue #24 item 15): an
// Anthropic caller on a chat upstream whose tool call's arguments turn out
// not to be JSON gets no partial_json that would make them invalid: what
// its SDK joins stays the start of a JSON object, and the stream ends
// with the error event. Arguments that stop short of a whole object fail
// the same way when the call ends.
func TestToolArgumentsStayJSONForAnthropicCallers(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	call := chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "null")
	args := func(a string) string {
		return chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+strconv.Quote(a)+`}}]}`, "null")
	}
	end := chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n"
	tests := map[string]string{
		"invalid":    call + args(`{"city": "Oslo"`) + args(`]`) + args(`}`) + end,
		"cut short":  call + args(`{"city": "Oslo"`) + end,
		"not object": call + args(`"Oslo"`) + end,
	}
	g := startRelayGateway(t)
	for name, stream := range tests {
		t.Run(name, func(t *testing.T) {
			g.up.set(streamAnswer(func(string) string { return stream }))
			status, _, body := g.call(t, "msg", "msg-on-chat", true)
			var joined jsonvalid.Object
			for _, line := range strings.Split(body, "\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				var ev struct {
					Delta struct {
						PartialJSON *string `json:"partial_json"`
					}
				}
				if !ok || json.Unmarshal([]byte(data), &ev) != nil || ev.Delta.PartialJSON == nil {
					continue
				}
				if err := joined.Write([]byte(*ev.Delta.PartialJSON)); err != nil {
					t.Errorf("the caller's partial_json adds up to invalid JSON (%v): %s", err, body)
				}
			}
			if status != http.StatusOK || !strings.Contains(body, "event: error") || strings.Contains(body, "event: message_stop") {
				t.Errorf("stream %d %s; want it ended with the error event", status, body)
			}
		})
	}
}

// TestLongTranslatedStreamIsBounded (issue #24 item 5): a chat upstream
// streaming more text than Sluice holds for a translated stream's final
// events fails a Responses caller's stream once the text passes the
// limit (output_too_long), instead of the gateway holding, and sending
// again, the whole output; Anthropic and Gemini callers, whose streams
// hold nothing, get it all.
func TestLongTranslatedStreamIsBounded(t *testing.T) {
	const total, piece = 6 << 20, 16 << 10
	g := startRelayGateway(t)
	g.up.set(streamAnswer(func(string) string {
		var b strings.Builder
		delta := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` +
			strings.Repeat("a", piece) + `"},"finish_reason":null}]}` + "\n\n"
		for range total / piece {
			b.WriteString(delta)
		}
		b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
		return b.String()
	}))
	status, _, body := g.call(t, "resp", "resp-on-chat", true)
	if status != http.StatusOK || !strings.Contains(body, `"code":"output_too_long"`) || strings.Contains(body, "response.completed") || len(body) > total {
		t.Errorf("Responses caller: stream %d of %d bytes ending %.300q; want it cut with output_too_long", status, len(body), body[max(len(body)-300, 0):])
	}
	for caller, end := range map[string]string{"msg": "event: message_stop", "gem": `"finishReason":"STOP"`} {
		status, _, body := g.call(t, caller, caller+"-on-chat", true)
		if status != http.StatusOK || !strings.Contains(body, end) || strings.Count(body, "a") < total {
			t.Errorf("%s caller: stream %d of %d bytes; want all the text, then %s", caller, status, len(body), end)
		}
	}
}
