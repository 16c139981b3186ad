package simulator_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/simulator"
)

// message is an Anthropic Messages answer.
type message struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Role       string         `json:"role"`
	Model      string         `json:"model"`
	Content    []contentBlock `json:"content"`
	StopReason *string        `json:"stop_reason"`
	Usage      anthropicUsage `json:"usage"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// anthropicErr is Anthropic's error envelope.
type anthropicErr struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

const weatherTool = `"tools":[{"name":"get_weather","description":"Current weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}]`

// anthropicPost sends a Messages request with x-api-key and
// anthropic-version, as the SDK does.
func anthropicPost(t *testing.T, srv *httptest.Server, key, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+path, strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", "interleaved-thinking-2025-05-14")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func createMessage(t *testing.T, srv *httptest.Server, body string) message {
	t.Helper()
	resp := anthropicPost(t, srv, "sk-ant", "/v1/messages", body)
	raw := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d (%s), want 200", resp.StatusCode, raw)
	}
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

func messagesBody(extra string, messages string) string {
	if messages == "" {
		messages = `[{"role":"user","content":"Say hello to the world"}]`
	}
	body := `{"model":"claude-sonnet-4-6","max_tokens":1024,"messages":` + messages
	if extra != "" {
		body += "," + extra
	}
	return body + "}"
}

func TestMessagesJSON(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	toolTurn := `[{"role":"user","content":"weather? use_tool"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Oslo","days":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"4 C"}]}]`
	tests := []struct {
		name       string
		give       string // body
		wantBlocks []string
		wantStop   string
		wantOutput int
		wantCached bool
	}{
		{"text", messagesBody("", ""), []string{"text"}, "end_turn", 16, false},
		{"max_tokens cuts", `{"model":"claude-sonnet-4-6","max_tokens":5,"messages":[{"role":"user","content":"Say hello to the world"}]}`, []string{"text"}, "max_tokens", 5, false},
		{"cache_control", messagesBody(`"system":[{"type":"text","text":"Be brief and kind.","cache_control":{"type":"ephemeral"}}]`, ""), []string{"text"}, "end_turn", 16, true},
		{"thinking", messagesBody(`"thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2048`, ""), []string{"thinking", "text"}, "end_turn", 8 + 16, false},
		{"tool asked by the word", messagesBody(weatherTool, `[{"role":"user","content":"What is the weather? use_tool"}]`), []string{"tool_use"}, "tool_use", 0, false},
		{"tool forced", messagesBody(weatherTool+`,"tool_choice":{"type":"any"}`, ""), []string{"tool_use"}, "tool_use", 0, false},
		{"tool named", messagesBody(weatherTool+`,"tool_choice":{"type":"tool","name":"get_weather"}`, ""), []string{"tool_use"}, "tool_use", 0, false},
		{"tool_choice none wins", messagesBody(weatherTool+`,"tool_choice":{"type":"none"}`, `[{"role":"user","content":"use_tool"}]`), []string{"text"}, "end_turn", 16, false},
		{"word without tools", messagesBody("", `[{"role":"user","content":"use_tool"}]`), []string{"text"}, "end_turn", 16, false},
		{"answer to a tool result", messagesBody(weatherTool, toolTurn), []string{"text"}, "end_turn", 16, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := createMessage(t, srv, tt.give)
			if !strings.HasPrefix(m.ID, "msg_01") || m.Type != "message" || m.Role != "assistant" || m.Model != "claude-sonnet-4-6" {
				t.Errorf("envelope = %+v, want msg_01 id, message, assistant, the model", m)
			}
			var kinds []string
			for _, b := range m.Content {
				kinds = append(kinds, b.Type)
			}
			if diff := cmp.Diff(tt.wantBlocks, kinds); diff != "" {
				t.Errorf("content blocks (-want +got):\n%s", diff)
			}
			if m.StopReason == nil || *m.StopReason != tt.wantStop {
				t.Errorf("stop_reason = %v, want %s", m.StopReason, tt.wantStop)
			}
			u := m.Usage
			if tt.wantOutput > 0 && u.OutputTokens != tt.wantOutput {
				t.Errorf("output_tokens = %d, want %d", u.OutputTokens, tt.wantOutput)
			}
			if cached := u.CacheReadInputTokens > 0 && u.CacheCreationInputTokens > 0; cached != tt.wantCached || u.InputTokens < 1 {
				t.Errorf("usage = %+v, want cache tokens %v and input tokens", u, tt.wantCached)
			}
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if n := len(strings.Fields(b.Text)); n != tt.wantOutput && tt.wantBlocks[0] == "text" {
						t.Errorf("text has %d words, want %d", n, tt.wantOutput)
					}
				case "thinking":
					if b.Thinking == "" || b.Signature == "" {
						t.Errorf("thinking block %+v lacks thinking or signature", b)
					}
				case "tool_use":
					if !strings.HasPrefix(b.ID, "toolu_01") || b.Name != "get_weather" {
						t.Errorf("tool_use %+v, want toolu_01 id and get_weather", b)
					}
					var in struct {
						City string `json:"city"`
						Days *int   `json:"days"`
					}
					if err := json.Unmarshal(b.Input, &in); err != nil || in.City == "" || in.Days == nil {
						t.Errorf("tool input %s, want city and days from the schema", b.Input)
					}
				}
			}
		})
	}
}

// TestMessagesAnswerLikeChat checks one conversation gets the same words in
// either protocol, so translation tests can compare answers.
func TestMessagesAnswerLikeChat(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	chat := complete(t, srv.URL, `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the world"}]}`)
	m := createMessage(t, srv, messagesBody(`"system":"Be brief."`, ""))
	if got, want := m.Content[0].Text, chat.Choices[0].Message.Content; got != want {
		t.Errorf("Messages text = %q, chat content %q: want the same", got, want)
	}
	if got := m.Usage.InputTokens; got != chat.Usage.PromptTokens {
		t.Errorf("input_tokens = %d, chat prompt_tokens %d", got, chat.Usage.PromptTokens)
	}
}

// namedEvent is one SSE event with an event line.
type namedEvent struct {
	name string
	data string
}

// readNamedEvents reads `event:` + `data:` events until the body ends, and
// returns them with the error that ended the body (nil for a clean end).
func readNamedEvents(t *testing.T, body io.Reader) ([]namedEvent, error) {
	t.Helper()
	var events []namedEvent
	var cur namedEvent
	r := bufio.NewReader(body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return events, nil
			}
			return events, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if cur.name == "" || cur.data == "" {
				t.Errorf("event %+v lacks a name or data", cur)
			}
			events = append(events, cur)
			cur = namedEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
}

// streamEvent is the union of the Messages stream events' fields.
type streamEvent struct {
	Type    string   `json:"type"`
	Message *message `json:"message"`
	Index   int      `json:"index"`
	Block   *struct {
		Type string `json:"type"`
		Name string `json:"name"`
		ID   string `json:"id"`
	} `json:"content_block"`
	Delta struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		Thinking    string  `json:"thinking"`
		Signature   string  `json:"signature"`
		PartialJSON *string `json:"partial_json"`
		StopReason  string  `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
}

func streamMessage(t *testing.T, srv *httptest.Server, key, body string) ([]namedEvent, error) {
	t.Helper()
	resp := anthropicPost(t, srv, key, "/v1/messages?beta=true", strings.Replace(body, "{", `{"stream":true,`, 1))
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("stream answer %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return readNamedEvents(t, resp.Body)
}

func TestMessagesSSE(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	tests := []struct {
		name string
		give string
	}{
		{"text", messagesBody("", "")},
		{"thinking and text", messagesBody(`"thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2048`, "")},
		{"thinking and tool", messagesBody(`"thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2048,`+weatherTool, `[{"role":"user","content":"use_tool"}]`)},
		{"cached", messagesBody(`"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}]`, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := createMessage(t, srv, tt.give)
			events, err := streamMessage(t, srv, "sk-ant", tt.give)
			if err != nil {
				t.Fatalf("stream ended with %v", err)
			}
			// Rebuild the message from the events, as the SDK accumulates.
			var got message
			var stop string
			var names []string
			var final anthropicUsage
			for i, e := range events {
				var ev streamEvent
				if err := json.Unmarshal([]byte(e.data), &ev); err != nil || ev.Type != e.name {
					t.Fatalf("event %d %s: type %q, %v; want the event name", i, e.data, ev.Type, err)
				}
				if e.name != "ping" && e.name != "content_block_delta" {
					names = append(names, e.name)
				}
				switch e.name {
				case "message_start":
					got = *ev.Message
				case "content_block_start":
					if ev.Index != len(got.Content) {
						t.Errorf("block %d starts at index %d", len(got.Content), ev.Index)
					}
					got.Content = append(got.Content, contentBlock{Type: ev.Block.Type, Name: ev.Block.Name, ID: ev.Block.ID})
				case "content_block_delta":
					b := &got.Content[ev.Index]
					switch ev.Delta.Type {
					case "text_delta":
						b.Text += ev.Delta.Text
					case "thinking_delta":
						b.Thinking += ev.Delta.Thinking
					case "signature_delta":
						b.Signature = ev.Delta.Signature
					case "input_json_delta":
						b.Input = append(b.Input, *ev.Delta.PartialJSON...)
					}
				case "message_delta":
					stop = ev.Delta.StopReason
					final = *ev.Usage
				}
			}
			wantNames := []string{"message_start"}
			for range want.Content {
				wantNames = append(wantNames, "content_block_start", "content_block_stop")
			}
			wantNames = append(wantNames, "message_delta", "message_stop")
			if diff := cmp.Diff(wantNames, names); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if events[2].name != "ping" {
				t.Errorf("third event %s, want a ping after the first block starts", events[2].name)
			}
			if got.StopReason != nil || got.Usage.OutputTokens != 1 || got.Usage.InputTokens != want.Usage.InputTokens {
				t.Errorf("message_start = %+v, want null stop_reason, output 1 and the input usage", got)
			}
			for i := range want.Content {
				w, g := want.Content[i], got.Content[i]
				w.ID, g.ID = "", "" // ids differ per request
				if w.Type == "tool_use" && json.Valid(g.Input) {
					w.Input, g.Input = compactJSON(t, w.Input), compactJSON(t, g.Input)
				}
				if diff := cmp.Diff(w, g); diff != "" {
					t.Errorf("block %d (-json +stream):\n%s", i, diff)
				}
			}
			if stop != *want.StopReason || final != want.Usage {
				t.Errorf("message_delta = %s %+v, want %s %+v", stop, final, *want.StopReason, want.Usage)
			}
		})
	}
}

func compactJSON(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return b
}

func TestMessagesStreamMisbehaviours(t *testing.T) {
	tests := []struct {
		name      string
		give      simulator.Behavior
		wantErr   error
		wantLast  string // name of the last event
		wantInAny string
	}{
		{"error after", simulator.Behavior{ErrorAfter: 2}, nil, "error", `"overloaded_error"`},
		{"cut after", simulator.Behavior{CutAfter: 2}, io.ErrUnexpectedEOF, "content_block_delta", ""},
		{"garbled", simulator.Behavior{GarbleAfter: 1}, nil, "message_stop", `"text":"` + "\n"},
		{"echo", simulator.Behavior{EchoAuth: true}, nil, "message_stop", "sk-ant-echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{"sk-ant-echo": tt.give}})
			resp := anthropicPost(t, srv, "sk-ant-echo", "/v1/messages", strings.Replace(messagesBody("", ""), "{", `{"stream":true,`, 1))
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("read error %v, want %v", err, tt.wantErr)
			}
			body := string(raw)
			lastEvent := body[strings.LastIndex(body, "event: ")+len("event: "):]
			lastEvent, _, _ = strings.Cut(lastEvent, "\n")
			if lastEvent != tt.wantLast || !strings.Contains(body, tt.wantInAny) {
				t.Errorf("stream ends with %q; want %q and %q in:\n%s", lastEvent, tt.wantLast, tt.wantInAny, body)
			}
		})
	}
}

func TestMessagesErrors(t *testing.T) {
	_, srv := start(t, simulator.Options{
		Models: []string{"claude-sonnet-4-6"},
		Keys: map[string]simulator.Behavior{
			"good":     {},
			"revoked":  {Invalid: true},
			"busy":     {FailStatus: 529},
			"broken":   {FailStatus: 500},
			"denied":   {FailStatus: 403},
			"limited":  {FailStatus: 429, RetryAfter: 2500 * time.Millisecond},
			"echo":     {FailStatus: 400, EchoAuth: true},
			"timedout": {FailStatus: 504},
		},
		RejectUnknownKeys: true,
	})
	ok := messagesBody("", "")
	tests := []struct {
		name       string
		key        string
		noVersion  bool
		path, body string
		wantStatus int
		wantType   string
		wantInMsg  string
	}{
		{"no key", "", false, "/v1/messages", ok, 401, "authentication_error", "x-api-key"},
		{"invalid key", "revoked", false, "/v1/messages", ok, 401, "authentication_error", "invalid"},
		{"no anthropic-version", "good", true, "/v1/messages", ok, 400, "invalid_request_error", "anthropic-version"},
		{"no max_tokens", "good", false, "/v1/messages", `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens"},
		{"no messages", "good", false, "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":10}`, 400, "invalid_request_error", "messages"},
		{"not json", "good", false, "/v1/messages", `{"model":`, 400, "invalid_request_error", "parsing"},
		{"thinking budget over max_tokens", "good", false, "/v1/messages", messagesBody(`"thinking":{"type":"enabled","budget_tokens":2048}`, ""), 400, "invalid_request_error", "budget_tokens"},
		{"unknown model", "good", false, "/v1/messages", `{"model":"claude-9","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error", "claude-9"},
		{"overloaded", "busy", false, "/v1/messages", ok, 529, "overloaded_error", "Overloaded"},
		{"api error", "broken", false, "/v1/messages", ok, 500, "api_error", ""},
		{"permission", "denied", false, "/v1/messages", ok, 403, "permission_error", ""},
		{"timeout", "timedout", false, "/v1/messages", ok, 504, "timeout_error", ""},
		{"rate limited", "limited", false, "/v1/messages", ok, 429, "rate_limit_error", "rate limit"},
		{"echo", "echo", false, "/v1/messages", ok, 400, "invalid_request_error", "echo"},
		{"count_tokens no key", "", false, "/v1/messages/count_tokens", ok, 401, "authentication_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+tt.path, strings.NewReader(tt.body))
			if tt.key != "" {
				req.Header.Set("X-Api-Key", tt.key)
			}
			if !tt.noVersion {
				req.Header.Set("Anthropic-Version", "2023-06-01")
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d (%s), want %d", resp.StatusCode, body, tt.wantStatus)
			}
			var e anthropicErr
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if e.Type != "error" || e.Error.Type != tt.wantType || !strings.Contains(e.Error.Message, tt.wantInMsg) {
				t.Errorf("error = %+v, want type %s and %q in the message", e, tt.wantType, tt.wantInMsg)
			}
			if id := resp.Header.Get("Request-Id"); id == "" || e.RequestID != id {
				t.Errorf("request_id %q, request-id header %q: want the same id", e.RequestID, id)
			}
		})
	}
}

func TestMessagesRateLimitHeaders(t *testing.T) {
	sim, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{
		"capped": {MaxInflight: 1, Latency: time.Minute, RetryAfter: 3 * time.Second},
		"room":   {MaxInflight: 4},
	}})
	release := hold(t, sim, srv, "capped")
	defer release()

	resp := anthropicPost(t, srv, "capped", "/v1/messages", messagesBody("", ""))
	readAll(t, resp)
	if resp.StatusCode != 429 {
		t.Fatalf("status over the cap = %d, want 429", resp.StatusCode)
	}
	for k, want := range map[string]string{
		"Retry-After":                            "3",
		"Anthropic-Ratelimit-Requests-Limit":     "1",
		"Anthropic-Ratelimit-Requests-Remaining": "0",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if reset, err := time.Parse(time.RFC3339, resp.Header.Get("Anthropic-Ratelimit-Requests-Reset")); err != nil || time.Until(reset) < time.Second {
		t.Errorf("anthropic-ratelimit-requests-reset = %q, want an RFC 3339 time about 3s ahead", resp.Header.Get("Anthropic-Ratelimit-Requests-Reset"))
	}
	if resp.Header.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Error("OpenAI's x-ratelimit headers on an Anthropic answer")
	}

	resp = anthropicPost(t, srv, "room", "/v1/messages", messagesBody("", ""))
	readAll(t, resp)
	if got := resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining"); resp.StatusCode != 200 || got != "3" {
		t.Errorf("answer %d with remaining %q, want 200 and 3", resp.StatusCode, got)
	}
}

func TestMessagesCredentialsAndRecords(t *testing.T) {
	sim, srv := start(t, simulator.Options{})
	readAll(t, anthropicPost(t, srv, "sk-ant-x", "/v1/messages?beta=true", messagesBody("", "")))
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/messages", strings.NewReader(messagesBody("", "")))
	req.Header.Set("Authorization", "Bearer sk-ant-bearer")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)

	recs := sim.Requests()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for i, want := range []string{"sk-ant-x", "sk-ant-bearer"} {
		if r := recs[i]; r.Key != want || r.Status != 200 || r.Model != "claude-sonnet-4-6" || r.Path != "/v1/messages" {
			t.Errorf("record %d = %s %d %s %s, want %s 200 claude-sonnet-4-6 /v1/messages", i, r.Key, r.Status, r.Model, r.Path, want)
		}
	}
	if got := recs[0].Header.Get("Anthropic-Beta"); got != "interleaved-thinking-2025-05-14" {
		t.Errorf("recorded anthropic-beta = %q", got)
	}
}

func TestCountTokens(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	body := messagesBody(`"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}]`, "")
	m := createMessage(t, srv, body)
	resp := anthropicPost(t, srv, "sk-ant", "/v1/messages/count_tokens", strings.Replace(body, `"max_tokens":1024,`, "", 1))
	raw := readAll(t, resp)
	var got struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("count_tokens = %d %s, %v", resp.StatusCode, raw, err)
	}
	if want := m.Usage.InputTokens + m.Usage.CacheReadInputTokens + m.Usage.CacheCreationInputTokens; got.InputTokens != want {
		t.Errorf("input_tokens = %d, want the message's whole prompt %d", got.InputTokens, want)
	}
}
