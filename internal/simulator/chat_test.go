package simulator_test

import (
	"bufio"
	"context"
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

// completion is the JSON answer, with the fields a gateway relies on.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens *int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func complete(t *testing.T, base string, body string) completion {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d (%s), want 200", resp.StatusCode, raw)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	var c completion
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return c
}

func TestChatJSON(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	c := complete(t, srv.URL, chatBody)

	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Created == 0 || c.Model != "gpt-4o-mini" {
		t.Errorf("envelope = %+v, want chatcmpl- id, chat.completion, created, echoed model", c)
	}
	if len(c.Choices) != 1 {
		t.Fatalf("len(choices) = %d, want 1", len(c.Choices))
	}
	ch := c.Choices[0]
	if ch.Index != 0 || ch.Message.Role != "assistant" || ch.FinishReason != "stop" {
		t.Errorf("choice = %+v, want index 0, assistant, stop", ch)
	}
	if got := len(strings.Fields(ch.Message.Content)); got != 16 {
		t.Errorf("content has %d words, want the default 16: %q", got, ch.Message.Content)
	}
	// "Say hello to the world": 5 words + 3 for the message + 3.
	if c.Usage.PromptTokens != 11 || c.Usage.CompletionTokens != 16 || c.Usage.TotalTokens != 27 {
		t.Errorf("usage = %+v, want 11 + 16 = 27", c.Usage)
	}
	if c.Usage.PromptTokensDetails == nil || c.Usage.PromptTokensDetails.CachedTokens == nil ||
		c.Usage.CompletionTokensDetails == nil || c.Usage.CompletionTokensDetails.ReasoningTokens == nil {
		t.Errorf("usage = %+v, want cached_tokens and reasoning_tokens details", c.Usage)
	}
}

func TestChatDeterminism(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	base := complete(t, srv.URL, chatBody)
	tests := []struct {
		name string
		give string
		same bool
	}{
		{"same request", chatBody, true},
		{"re-encoded request", `{ "messages" : [ { "content" : "Say hello to the world", "role" : "user" } ], "model" : "gpt-4o-mini" }`, true},
		{"text parts", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"Say hello to the world"}]}]}`, true},
		{"other model", `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello to the world"}]}`, true},
		{"other text", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say goodbye to the world"}]}`, false},
		{"other role", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Say hello to the world"}]}`, false},
		{"more messages", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the world"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := complete(t, srv.URL, tt.give).Choices[0].Message.Content
			if same := got == base.Choices[0].Message.Content; same != tt.same {
				t.Errorf("content = %q, base %q: same = %v, want %v", got, base.Choices[0].Message.Content, same, tt.same)
			}
		})
	}
}

func TestChatMaxTokens(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	msg := `"messages":[{"role":"user","content":"count"}]`
	tests := []struct {
		name       string
		give       string
		wantTokens int
		wantFinish string
	}{
		{"max_tokens", `"max_tokens":5`, 5, "length"},
		{"max_completion_tokens", `"max_completion_tokens":7`, 7, "length"},
		{"max_completion_tokens wins", `"max_completion_tokens":3,"max_tokens":9`, 3, "length"},
		{"over the cap", `"max_tokens":100000`, simulator.MaxCompletionTokens, "stop"},
		{"none", `"max_tokens":null`, 16, "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := complete(t, srv.URL, `{"model":"gpt-4o-mini",`+msg+`,`+tt.give+`}`)
			if got := len(strings.Fields(c.Choices[0].Message.Content)); got != tt.wantTokens {
				t.Errorf("words = %d, want %d", got, tt.wantTokens)
			}
			if c.Usage.CompletionTokens != tt.wantTokens || c.Usage.TotalTokens != c.Usage.PromptTokens+tt.wantTokens {
				t.Errorf("usage = %+v, want completion_tokens %d", c.Usage, tt.wantTokens)
			}
			if got := c.Choices[0].FinishReason; got != tt.wantFinish {
				t.Errorf("finish_reason = %q, want %q", got, tt.wantFinish)
			}
		})
	}
}

// chunk is one streamed chunk. Usage is raw so null and absent differ.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// readEvents reads SSE data payloads until the body ends, and returns them
// with the error that ended the body (nil for a clean end).
func readEvents(t *testing.T, body io.Reader, stop func(events []string) bool) ([]string, error) {
	t.Helper()
	var events []string
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
			continue
		case strings.HasPrefix(line, "data: "):
			events = append(events, strings.TrimPrefix(line, "data: "))
			if blank, _ := r.ReadString('\n'); blank != "\n" {
				t.Errorf("event %q not followed by a blank line", line)
			}
			if stop != nil && stop(events) {
				return events, nil
			}
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
}

func startStream(t *testing.T, ctx context.Context, base, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	return resp
}

func TestChatSSE(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	want := complete(t, srv.URL, chatBody)
	tests := []struct {
		name      string
		give      string
		wantUsage bool
	}{
		{"without usage", `"stream":true`, false},
		{"include_usage false", `"stream":true,"stream_options":{"include_usage":false}`, false},
		{"include_usage", `"stream":true,"stream_options":{"include_usage":true}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := strings.Replace(chatBody, `{"model"`, `{`+tt.give+`,"model"`, 1)
			resp := startStream(t, t.Context(), srv.URL, "k", body)
			if got := resp.Header.Get("Content-Type"); got != "text/event-stream; charset=utf-8" {
				t.Errorf("Content-Type = %q, want text/event-stream", got)
			}
			events, err := readEvents(t, resp.Body, nil)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("stream ended with %v", err)
			}
			if last := events[len(events)-1]; last != "[DONE]" {
				t.Fatalf("last event = %q, want [DONE]", last)
			}
			events = events[:len(events)-1]

			var chunks []chunk
			for _, e := range events {
				var c chunk
				if err := json.Unmarshal([]byte(e), &c); err != nil {
					t.Fatalf("chunk %s: %v", e, err)
				}
				if c.ID != events0ID(t, events) || c.Object != "chat.completion.chunk" || c.Model != "gpt-4o-mini" || c.Created == 0 {
					t.Errorf("chunk envelope %s, want one id, chat.completion.chunk, the model, created", e)
				}
				chunks = append(chunks, c)
			}

			// Role chunk, 16 words, finish chunk, then usage when asked for.
			wantChunks := 1 + 16 + 1
			if tt.wantUsage {
				wantChunks++
			}
			if len(chunks) != wantChunks {
				t.Fatalf("%d chunks, want %d", len(chunks), wantChunks)
			}
			if d := chunks[0].Choices[0].Delta; d.Role == nil || *d.Role != "assistant" || d.Content == nil || *d.Content != "" {
				t.Errorf("first chunk %s, want delta role assistant and content \"\"", events[0])
			}
			var content strings.Builder
			for i, c := range chunks[1:17] {
				if len(c.Choices) != 1 || c.Choices[0].Delta.Content == nil || c.Choices[0].FinishReason != nil {
					t.Fatalf("content chunk %d = %s", i, events[i+1])
				}
				content.WriteString(*c.Choices[0].Delta.Content)
			}
			if got := content.String(); got != want.Choices[0].Message.Content {
				t.Errorf("streamed content = %q, want the JSON answer %q", got, want.Choices[0].Message.Content)
			}
			if fr := chunks[17].Choices[0].FinishReason; fr == nil || *fr != "stop" {
				t.Errorf("finish chunk = %s, want finish_reason stop", events[17])
			}
			for i, c := range chunks[:18] {
				if got, want := string(c.Usage), map[bool]string{true: "null", false: ""}[tt.wantUsage]; got != want {
					t.Errorf("chunk %d usage = %q, want %q", i, got, want)
				}
			}
			if !tt.wantUsage {
				return
			}
			u := chunks[18]
			if u.Choices == nil || len(u.Choices) != 0 {
				t.Errorf("usage chunk choices = %v, want []", u.Choices)
			}
			var got usage
			if err := json.Unmarshal(u.Usage, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Usage, got); diff != "" {
				t.Errorf("stream usage (-json +stream):\n%s", diff)
			}
		})
	}
}

func events0ID(t *testing.T, events []string) string {
	t.Helper()
	var c chunk
	if err := json.Unmarshal([]byte(events[0]), &c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func TestStreamMaxTokens(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	resp := startStream(t, t.Context(), srv.URL, "k", `{"model":"m","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"x"}]}`)
	events, err := readEvents(t, resp.Body, nil)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// role, 3 words, finish, [DONE]
	if len(events) != 6 || !strings.Contains(events[4], `"finish_reason":"length"`) {
		t.Errorf("events = %q, want 3 words and finish_reason length", events)
	}
}

func TestChunkDelay(t *testing.T) {
	_, srv := start(t, simulator.Options{Default: simulator.Behavior{ChunkDelay: 10 * time.Millisecond}})
	begin := time.Now()
	resp := startStream(t, t.Context(), srv.URL, "k", `{"model":"m","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"x"}]}`)
	readAll(t, resp)
	// Six events, so five delays between them.
	if got := time.Since(begin); got < 50*time.Millisecond {
		t.Errorf("stream took %v, want at least 5 chunk delays of 10ms", got)
	}
}

func TestCutAfter(t *testing.T) {
	tests := []struct {
		name       string
		cutAfter   int
		wantEvents int // role chunk + content events
	}{
		{"mid answer", 3, 4},
		{"longer than the answer", 100, 17},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, srv := start(t, simulator.Options{Default: simulator.Behavior{CutAfter: tt.cutAfter}})
			resp := startStream(t, t.Context(), srv.URL, "k", strings.Replace(chatBody, `{`, `{"stream":true,`, 1))
			events, err := readEvents(t, resp.Body, nil)
			resp.Body.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("stream ended with %v, want unexpected EOF", err)
			}
			if len(events) != tt.wantEvents {
				t.Errorf("got %d events before the cut, want %d: %q", len(events), tt.wantEvents, events)
			}
			if rec := sim.Requests()[0]; rec.Status != 200 || rec.Cancelled {
				t.Errorf("record status %d cancelled %v, want 200 false: the simulator cut it", rec.Status, rec.Cancelled)
			}
		})
	}
}

func TestCutAfterHTTP2(t *testing.T) {
	sim := simulator.New(simulator.Options{Default: simulator.Behavior{CutAfter: 2}})
	srv := httptest.NewUnstartedServer(sim)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)

	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/chat/completions", strings.NewReader(strings.Replace(chatBody, `{`, `{"stream":true,`, 1)))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	events, err := readEvents(t, resp.Body, nil)
	if err == nil || len(events) != 3 {
		t.Errorf("read %d events, %v; want 3 and a stream reset", len(events), err)
	}
}

func TestErrorAfter(t *testing.T) {
	_, srv := start(t, simulator.Options{Default: simulator.Behavior{ErrorAfter: 2}})
	resp := startStream(t, t.Context(), srv.URL, "k", strings.Replace(chatBody, `{`, `{"stream":true,`, 1))
	events, err := readEvents(t, resp.Body, nil)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("stream ended with %v, want a clean end after the error event", err)
	}
	if len(events) != 4 {
		t.Fatalf("events = %q, want role, 2 words, error", events)
	}
	var c chunk
	if err := json.Unmarshal([]byte(events[3]), &c); err != nil || !strings.Contains(string(c.Error), `"type":"server_error"`) {
		t.Errorf("last event = %s, want an error object", events[3])
	}
}

func TestStallAfterThenClientCancels(t *testing.T) {
	sim, srv := start(t, simulator.Options{Default: simulator.Behavior{StallAfter: 2}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := startStream(t, ctx, srv.URL, "k", strings.Replace(chatBody, `{`, `{"stream":true,`, 1))
	events, err := readEvents(t, resp.Body, func(ev []string) bool { return len(ev) == 3 })
	if err != nil || len(events) != 3 {
		t.Fatalf("read %q, %v; want role and 2 words", events, err)
	}
	if got := sim.InFlight(); got != 1 {
		t.Errorf("InFlight() while stalled = %d, want 1", got)
	}
	cancel()
	resp.Body.Close()
	eventually(t, "Cancelled() == 1", func() bool { return sim.Cancelled() == 1 && sim.InFlight() == 0 })
	if rec := sim.Requests()[0]; rec.Status != 200 || !rec.Cancelled {
		t.Errorf("record status %d cancelled %v, want 200 true", rec.Status, rec.Cancelled)
	}
}

func TestCloseEndsStalledStreams(t *testing.T) {
	sim, srv := start(t, simulator.Options{Default: simulator.Behavior{StallAfter: 1}})
	resp := startStream(t, t.Context(), srv.URL, "k", strings.Replace(chatBody, `{`, `{"stream":true,`, 1))
	defer resp.Body.Close()
	if events, err := readEvents(t, resp.Body, func(ev []string) bool { return len(ev) == 2 }); err != nil {
		t.Fatalf("read %q: %v", events, err)
	}
	sim.Close()
	if _, err := readEvents(t, resp.Body, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("after Close the stream ended with %v, want unexpected EOF", err)
	}
	if got := sim.Cancelled(); got != 0 {
		t.Errorf("Cancelled() = %d, want 0: the simulator ended it", got)
	}
}
