package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

func TestChatGPTURLAndPresentation(t *testing.T) {
	ep := &sluice.Endpoint{BaseURL: "https://chatgpt.com/backend-api/codex/", Host: sluice.Host{Cloud: sluice.CloudChatGPT}}
	for _, tt := range []struct {
		req  sluice.Request
		want string
	}{
		{sluice.Request{}, "https://chatgpt.com/backend-api/codex/responses"},
		{sluice.Request{Stream: true}, "https://chatgpt.com/backend-api/codex/responses"},
		{sluice.Request{Compact: true}, "https://chatgpt.com/backend-api/codex/responses/compact"},
		{sluice.Request{CountTokens: true}, ""}, // estimated by Sluice
	} {
		if got := ChatGPTResponses.target(&tt.req, ep, "gpt-5"); got != tt.want {
			t.Errorf("target(%+v) = %q, want %q", tt.req, got, tt.want)
		}
	}

	cr := &sluice.Credential{Headers: http.Header{"Chatgpt-Account-Id": {"acct-1"}}}
	h := http.Header{}
	ChatGPTResponses.presentToken(h, nil, cr, "tok")
	if h.Get("Authorization") != "Bearer tok" || h.Get("Chatgpt-Account-Id") != "acct-1" || h.Get("Originator") != "codex_cli_rs" ||
		h.Get("Openai-Beta") != "responses=experimental" {
		t.Errorf("a translated caller's request: %v", h)
	}
	// Codex's own headers, passed on (passOn) before the credential is
	// presented, stay; its account does not.
	caller := http.Header{"Originator": {"codex_vscode"}, "Session_id": {"s-1"}, "Chatgpt-Account-Id": {"acct-caller"}, "User-Agent": {"codex_vscode/0.1"}}
	h = http.Header{}
	passOn(h, caller, ChatGPTResponses.Pass, &sluice.HeaderRules{})
	ChatGPTResponses.presentToken(h, caller, cr, "tok")
	if h.Get("Originator") != "codex_vscode" || h.Get("Session_id") != "s-1" || h.Get("User-Agent") != "codex_vscode/0.1" || h.Get("Chatgpt-Account-Id") != "acct-1" {
		t.Errorf("a passthrough caller's request: %v", h)
	}
}

func TestChatGPTBody(t *testing.T) {
	for _, tt := range []struct {
		name    string
		compact bool
		give    string
		want    string
	}{
		{"whole answer asked", false, `{"model":"gpt-5","input":[{"role":"user","content":"hi"}],"stream":false,"store":true,"instructions":"be brief"}`,
			`{"model":"gpt-5","input":[{"role":"user","content":"hi"}],"instructions":"be brief","stream":true,"store":false}`},
		{"instructions added", false, `{"model":"gpt-5","instructions":null,"input":[]}`,
			`{"model":"gpt-5","input":[],"instructions":"","stream":true,"store":false}`},
		{"unsupported members dropped", false, `{"model":"gpt-5","max_output_tokens":16,"temperature":0.2,"top_p":1,"user":"u","truncation":"auto","safety_identifier":"s","prompt_cache_retention":"24h","stream_options":{},"context_management":[],"reasoning":{"effort":"low"},"instructions":"x"}`,
			`{"model":"gpt-5","reasoning":{"effort":"low"},"instructions":"x","stream":true,"store":false}`},
		{"string input", false, `{"model":"gpt-5","input":"hi \"there\"","instructions":"x"}`,
			`{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi \"there\""}]}],"instructions":"x","stream":true,"store":false}`},
		{"system messages", false, `{"model":"gpt-5","input":[{"role":"system","content":"sys"}, {"type":"message","role":"user","content":"the word \"system\""}],"instructions":"x"}`,
			`{"model":"gpt-5","input":[{"role":"developer","content":"sys"},{"type":"message","role":"user","content":"the word \"system\""}],"instructions":"x","stream":true,"store":false}`},
		{"compaction", true, `{"model":"gpt-5","input":"hi","store":true,"temperature":1}`,
			`{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"instructions":""}`},
	} {
		got, err := chatgptBody(&sluice.Request{Compact: tt.compact}, nil, "", []byte(tt.give))
		if err != nil || string(got) != tt.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", tt.name, got, err, tt.want)
		}
		if err == nil && !json.Valid(got) {
			t.Errorf("%s: %s is not JSON", tt.name, got)
		}
	}
}

func TestGatherResponse(t *testing.T) {
	const item0 = `{"type":"reasoning","id":"rs_1","summary":[]}`
	const item1 = `{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"hi"}]}`
	usage := `"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}`
	for _, tt := range []struct {
		name, stream, want string
		wantErr            error
	}{
		{"output kept", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"output\":[]}}\n\n" +
			"data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":" + item0 + "}\n\n" +
			"data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"output\":[" + item1 + "]," + usage + "}}\n\n",
			`{"id":"r","output":[` + item1 + `],` + usage + `}`, nil},
		{"empty output filled in order", "data: {\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":" + item1 + "}\n\n" +
			"data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":" + item0 + "}\n\n" +
			"data: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"r\",\"status\":\"incomplete\",\"output\":[ ]," + usage + "}}\n\n",
			`{"id":"r","status":"incomplete","output":[` + item0 + `,` + item1 + `],` + usage + `}`, nil},
		{"cut short", "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n", "", errStreamTruncated},
	} {
		got, err := gatherResponse(strings.NewReader(tt.stream))
		if string(got) != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("%s:\n got %s, %v\nwant %s, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}

	// A failure event is the failure it carries, classified as an error
	// answer with that body would be.
	for _, tt := range []struct {
		event string
		want  Class
	}{
		{`{"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached"}}}`, ClassRate},
		{`{"type":"error","code":"insufficient_quota","message":"You exceeded your current quota"}`, ClassBilling},
		{`{"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"An error occurred"}}}`, ClassEndpoint},
	} {
		_, err := gatherResponse(strings.NewReader("data: " + tt.event + "\n\n"))
		fe, ok := errors.AsType[*FailedEvent](err)
		if !ok {
			t.Errorf("%s: %v, want a FailedEvent", tt.event, err)
			continue
		}
		if got := Classify(http.StatusInternalServerError, fe.Data); got != tt.want {
			t.Errorf("%s: classified %s, want %s", tt.event, got, tt.want)
		}
	}
}

func TestChatGPTRejection(t *testing.T) {
	status, body := chatgptRejection(400, http.Header{}, []byte(`{"detail":"Unsupported parameter: foo"}`))
	var e struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || status != 400 || e.Error.Message != "Unsupported parameter: foo" || e.Error.Type != "invalid_request_error" {
		t.Errorf("detail rewritten as %d %s, want OpenAI's envelope", status, body)
	}
	if got := Classify(status, body); got != ClassRequest {
		t.Errorf("a refused body is %s, want request", got)
	}

	limit := []byte(`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_in_seconds":3600}}`)
	h := http.Header{}
	if status, body := chatgptRejection(429, h, limit); status != 429 || string(body) != string(limit) || h.Get("Retry-After") != "3600" {
		t.Errorf("usage limit: %d %s, Retry-After %q; want the body as it is and Retry-After 3600", status, body, h.Get("Retry-After"))
	}
	if got := Classify(429, limit); got != ClassRate {
		t.Errorf("a usage limit is %s, want rate", got)
	}
	at := time.Now().Add(2 * time.Hour).Unix()
	h = http.Header{}
	chatgptRejection(429, h, []byte(`{"error":{"type":"usage_limit_reached","resets_at":`+jsonInt(at)+`,"resets_in_seconds":60}}`))
	if got := RetryAfter(h, time.Now()); got < 119*time.Minute || got > 2*time.Hour {
		t.Errorf("resets_at two hours ahead: Retry-After %s", got)
	}
	h = http.Header{"Retry-After": {"7"}}
	chatgptRejection(429, h, limit)
	if h.Get("Retry-After") != "7" {
		t.Errorf("the backend's own Retry-After was replaced: %v", h)
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestChatGPTWholeAnswerFromStream runs a Responses caller that asked for
// a whole answer on the simulator's ChatGPT backend: the request goes as a
// stream, and the caller gets the completed response as JSON, with its
// usage measured; a streaming caller gets the stream.
func TestChatGPTWholeAnswerFromStream(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	protocols := &Protocols{
		Dialects: testProtocols.Dialects, Endings: testProtocols.Endings,
		Hosted: map[HostedKey]*Dialect{{sluice.CloudChatGPT, sluice.ProtocolOpenAIResponses}: ChatGPTResponses},
	}
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), protocols, func(string) BreakerSettings {
		return BreakerSettings{Failures: 5, Open: time.Second}
	}, nil)
	t.Cleanup(c.Close)
	edge := &sluice.Edge{
		Protocol: sluice.ProtocolOpenAIResponses, ID: "k/chatgpt/gpt-5",
		Credential: &sluice.Credential{ID: "k", Secret: "tok", Headers: http.Header{"Chatgpt-Account-Id": {"acct-1"}}},
		Account:    &sluice.Account{ID: "k"},
		Endpoint:   &sluice.Endpoint{ID: "chatgpt", BaseURL: srv.URL + "/backend-api/codex", Host: sluice.Host{Cloud: sluice.CloudChatGPT}},
		Model:      "gpt-5",
	}
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","input":"hi","max_output_tokens":50,"stream":` + strconv.FormatBool(stream) + `}`
		w := httptest.NewRecorder()
		a := c.Execute(t.Context(), w, &sluice.Request{ID: "r", Protocol: sluice.ProtocolOpenAIResponses, Model: "m", Stream: stream, Body: []byte(body)}, edge, time.Now(), Hooks{})
		if a.Err != nil || w.Code != 200 || !a.Exec.Usage.Measured || a.Exec.Usage.CompletionTokens == 0 {
			t.Fatalf("stream %v: %v, %d %s, usage %+v", stream, a.Err, w.Code, w.Body, a.Exec.Usage)
		}
		got := sim.Requests()[len(sim.Requests())-1]
		var sent map[string]any
		json.Unmarshal(got.Body, &sent)
		if got.Path != "/backend-api/codex/responses" || got.Header.Get("Accept") != "text/event-stream" ||
			sent["stream"] != true || sent["store"] != false || sent["max_output_tokens"] != nil {
			t.Errorf("stream %v: the backend got %s %s, Accept %q", stream, got.Path, got.Body, got.Header.Get("Accept"))
		}
		if stream {
			if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") || !strings.Contains(w.Body.String(), "response.completed") {
				t.Errorf("a streaming caller got %s %s", w.Header().Get("Content-Type"), w.Body)
			}
			continue
		}
		var answer struct {
			Object string `json:"object"`
			Status string `json:"status"`
			Output []struct {
				Type string `json:"type"`
			} `json:"output"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || w.Header().Get("Content-Type") != "application/json" ||
			answer.Object != "response" || answer.Status != "completed" || len(answer.Output) == 0 {
			t.Errorf("a whole-answer caller got %s %s (%v)", w.Header().Get("Content-Type"), w.Body, err)
		}
	}
}

// FuzzChatGPTBody checks that any JSON object becomes a JSON object the
// backend takes: streamed and not stored (but for a compaction), with
// instructions, and without the members it refuses.
func FuzzChatGPTBody(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi","max_output_tokens":5,"instructions":null}`), false)
	f.Add([]byte(`{"input":[{"role":"system","content":"s"}, "system", 1, {"role":"user"}],"stream":false}`), true)
	f.Add([]byte(`{}`), false)
	f.Fuzz(func(t *testing.T, body []byte, compact bool) {
		if !json.Valid(body) || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
			return // the ingress and the translators make only JSON objects
		}
		out, err := chatgptBody(&sluice.Request{Compact: compact}, nil, "", body)
		if err != nil {
			t.Fatalf("chatgptBody(%s) = %v", body, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("chatgptBody(%s) = %s, not a JSON object: %v", body, out, err)
		}
		if _, ok := m["instructions"]; !ok || string(m["instructions"]) == "null" {
			t.Errorf("chatgptBody(%s) = %s: no instructions", body, out)
		}
		if !compact && (string(m["stream"]) != "true" || string(m["store"]) != "false") {
			t.Errorf("chatgptBody(%s) = %s: not a stream that is not stored", body, out)
		}
		if bytes.IndexByte(body, '\\') < 0 { // a member spelled with escapes is passed on as it is
			for name := range chatgptDropped {
				if _, ok := m[name]; ok {
					t.Errorf("chatgptBody(%s) = %s: %s was not left out", body, out, name)
				}
			}
		}
	})
}

// FuzzGatherResponse checks that any stream either gathers into a JSON
// object or fails, and never panics.
func FuzzGatherResponse(f *testing.F) {
	f.Add([]byte("data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"message\"}}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[]}}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"x\"}}}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.output_item.done\",\"output_index\":99999,\"item\":{}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		answer, err := gatherResponse(bytes.NewReader(stream))
		if err == nil && !json.Valid(answer) {
			t.Fatalf("gatherResponse(%q) = %s, not JSON", stream, answer)
		}
	})
}
