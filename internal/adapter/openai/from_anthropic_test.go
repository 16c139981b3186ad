package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
)

const fromAnthropicGolden = "testdata/from_anthropic"

func fromAnthropicFile(t *testing.T, name string) []byte {
	t.Helper()
	return adaptertest.Read(t, filepath.Join(fromAnthropicGolden, name))
}

func fromAnthropicRequest(t *testing.T, body string) (*FromAnthropic, []byte, error) {
	t.Helper()
	tr := NewFromAnthropic()
	out, err := tr.Request(&sluice.Request{Body: []byte(body)}, "deepseek-chat")
	return tr, out, err
}

func TestFromAnthropicGolden(t *testing.T) {
	t.Run("Request", func(t *testing.T) {
		_, out, err := fromAnthropicRequest(t, string(fromAnthropicFile(t, "request.json")))
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, filepath.Join(fromAnthropicGolden, "request.want.json"), out)
	})
	t.Run("Stream", func(t *testing.T) {
		tr := NewFromAnthropic()
		out, err := adaptertest.Stream(tr, adaptertest.Parse(fromAnthropicFile(t, "stream.sse")))
		if err != nil || !adaptertest.Ends(out, "message_stop") {
			t.Fatalf("Stream = %v, ending %s; want nil, ending message_stop", err, adaptertest.Format(out[len(out)-1:]))
		}
		adaptertest.GoldenEvents(t, filepath.Join(fromAnthropicGolden, "stream.want.sse"), out)
		if err := checkMessagesStream(out); err != nil {
			t.Error(err)
		}
	})
	t.Run("Response", func(t *testing.T) {
		tr := NewFromAnthropic()
		out, err := tr.Response(fromAnthropicFile(t, "response.json"))
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, filepath.Join(fromAnthropicGolden, "response.want.json"), out)
	})
	t.Run("Error", func(t *testing.T) {
		adaptertest.GoldenJSON(t, filepath.Join(fromAnthropicGolden, "error.want.json"), NewFromAnthropic().Error(429, fromAnthropicFile(t, "error.json")))
	})
}

// TestFromAnthropicRequest checks the request rules one at a time: each
// case names the field of the chat request it looks at.
func TestFromAnthropicRequest(t *testing.T) {
	tests := []struct {
		name  string
		give  string // members added to a Messages request (a later "messages" replaces the first)
		field string
		want  string
	}{
		{"NoStreamNoUsageOption", ``, "stream_options", ``},
		{"BigBudgetIsHigh", `,"thinking":{"type":"enabled","budget_tokens":20000}`, "reasoning_effort", `"high"`},
		{"SmallBudgetIsLow", `,"thinking":{"type":"enabled","budget_tokens":1024}`, "reasoning_effort", `"low"`},
		{"AdaptiveTakesTheEffort", `,"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}`, "reasoning_effort", `"max"`},
		{"DisabledAsksNoEffort", `,"thinking":{"type":"disabled"},"output_config":{"effort":"high"}`, "reasoning_effort", ``},
		{"EffortWithoutThinkingAsksNone", `,"output_config":{"effort":"high"}`, "reasoning_effort", ``},
		{"AdaptiveWithoutEffortAsksNone", `,"thinking":{"type":"adaptive"}`, "reasoning_effort", ``},
		{"WithoutThinkingCapIsMaxTokens", ``, "max_tokens", `100`},
		{"WithoutThinkingNoCompletionCap", ``, "max_completion_tokens", ``},
		{"ThinkingCapIsMaxCompletionTokens", `,"thinking":{"type":"enabled","budget_tokens":1024}`, "max_completion_tokens", `100`},
		{"ThinkingNoMaxTokens", `,"thinking":{"type":"enabled","budget_tokens":1024}`, "max_tokens", ``},
		{"AdaptiveCapIsMaxCompletionTokens", `,"thinking":{"type":"adaptive"}`, "max_completion_tokens", `100`},
		{"ToolChoiceWithoutTools", `,"tool_choice":{"type":"auto"}`, "tool_choice", ``},
		{"ToolChoiceAny", `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}`, "tool_choice", `"required"`},
		{"ToolChoiceNone", `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"}`, "tool_choice", `"none"`},
		{"ToolChoiceNamed", `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}`, "tool_choice", `{"type":"function","function":{"name":"f"}}`},
		{"JSONSchema", `,"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}`, "response_format", `{"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object"},"strict":true}}`},
		{"SystemRoleTurn", `,"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]`, "messages", `[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"hi"}]}]`},
		{"StringSystem", `,"system":"Be brief."`, "messages", `[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"hi"}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := fromAnthropicRequest(t, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]`+tt.give+`}`)
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(out, &fields); err != nil {
				t.Fatal(err)
			}
			if got := string(fields[tt.field]); got != tt.want {
				t.Errorf("%s = %s, want %s", tt.field, got, tt.want)
			}
		})
	}
}

// TestFromAnthropicRefuses checks that what OpenAI chat cannot express is
// a clear invalid_request, not dropped.
func TestFromAnthropicRefuses(t *testing.T) {
	user := func(block string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[` + block + `]}]}`
	}
	tests := []struct {
		name string
		give string
		want string // in the message
	}{
		{"ServerTool", `{"model":"m","max_tokens":10,"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "web_search_20250305"},
		{"MCPServers", `{"model":"m","max_tokens":10,"messages":[],"mcp_servers":[{"type":"url","url":"https://mcp.example.org","name":"x"}]}`, "mcp_servers"},
		{"FiveStops", `{"model":"m","max_tokens":10,"messages":[],"stop_sequences":["a","b","c","d","e"]}`, "stop_sequences"},
		{"TextDocument", user(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}`), "PDF"},
		{"FileImage", user(`{"type":"image","source":{"type":"file","file_id":"file_1"}}`), "messages[0]: image sources"},
		{"DocumentInToolResult", user(`{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"x"}}]}`), `"document"`},
		{"ServerToolUseReplayed", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`, "server_tool_use"},
		{"NotJSON", `{"model":`, "not a valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := fromAnthropicRequest(t, tt.give)
			e, ok := errors.AsType[*sluice.Error](err)
			if !ok || e.Code != sluice.CodeInvalidRequest || !strings.Contains(e.Msg, tt.want) {
				t.Errorf("Request error = %v, want invalid_request mentioning %q", err, tt.want)
			}
		})
	}
}

// TestFromAnthropicStreamError checks that an error chunk mid-stream
// reaches the caller as Anthropic's error event and fails the execution.
func TestFromAnthropicStreamError(t *testing.T) {
	out, err := adaptertest.Stream(NewFromAnthropic(), adaptertest.Parse([]byte(
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"+
			"data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n")))
	if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeUpstreamStreamFailed {
		t.Fatalf("Stream = %v; want upstream_stream_failed", err)
	}
	last := out[len(out)-1]
	if want := `{"type":"error","error":{"type":"api_error","message":"The server had an error"}}`; last.Name != "error" || string(last.Data) != want {
		t.Errorf("last event = %s %s, want error %s", last.Name, last.Data, want)
	}
}

// TestFromAnthropicKeepAlive checks that a comment-only event (no data),
// which OpenAI-compatible servers send while they think, passes without
// an event or an error.
func TestFromAnthropicKeepAlive(t *testing.T) {
	err := NewFromAnthropic().Event(adapter.Event{}, func(ev adapter.Event) error {
		t.Errorf("emitted %s for a keep-alive", ev.Data)
		return nil
	})
	if err != nil {
		t.Errorf("Event = %v; want nil", err)
	}
}

// TestFromAnthropicStreamReusedIndex checks a server that sends every
// tool call at index 0, told apart by their ids: each gets its own block.
func TestFromAnthropicStreamReusedIndex(t *testing.T) {
	out, err := adaptertest.Stream(NewFromAnthropic(), adaptertest.Parse([]byte(
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n"+
			"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n"+
			"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"+
			"data: [DONE]\n\n")))
	if err != nil || !adaptertest.Ends(out, "message_stop") {
		t.Fatalf("Stream = %v; want nil, ending message_stop", err)
	}
	if err := checkMessagesStream(out); err != nil {
		t.Error(err)
	}
	starts := 0
	for _, ev := range out {
		if ev.Name == "content_block_start" {
			starts++
		}
	}
	if starts != 2 {
		t.Errorf("%d blocks started, want 2:\n%s", starts, adaptertest.Format(out))
	}
}

// checkMessagesStream checks a caller's stream the way Anthropic's SDK
// accumulates one: message_start first, then blocks whose indices count
// up from 0, each started once, written and stopped only while open, then
// message_delta and message_stop last, every event's data a JSON object
// whose type is the event's name.
// streamUsage is the usage of a Messages stream's message_delta.
func streamUsage(t *testing.T, evs []adapter.Event) (u anthropic.Usage) {
	t.Helper()
	for _, ev := range evs {
		var e anthropic.StreamEvent
		if ev.Name == "message_delta" && json.Unmarshal(ev.Data, &e) == nil && json.Unmarshal(e.Usage, &u) != nil {
			t.Fatalf("message_delta usage: %s", ev.Data)
		}
	}
	return u
}

func checkMessagesStream(evs []adapter.Event) error {
	open := map[int]bool{}
	blocks := 0
	for i, ev := range evs {
		var e anthropic.StreamEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return fmt.Errorf("event #%d: %v: %s", i, err, ev.Data)
		}
		if e.Type != ev.Name {
			return fmt.Errorf("event #%d is named %q but its type is %q", i, ev.Name, e.Type)
		}
		switch {
		case (i == 0) != (e.Type == "message_start"):
			return fmt.Errorf("event #%d is %s; message_start comes first, once", i, e.Type)
		case (i == len(evs)-1) != (e.Type == "message_stop"):
			return fmt.Errorf("event #%d is %s; message_stop comes last, once", i, e.Type)
		case e.Type == "message_start" && (e.Message == nil || e.Message.Content == nil):
			return fmt.Errorf("message_start without a message and its content: %s", ev.Data)
		case e.Type == "content_block_start" && (e.Index != blocks || e.ContentBlock == nil):
			return fmt.Errorf("event #%d starts block %d, want block %d: %s", i, e.Index, blocks, ev.Data)
		case (e.Type == "content_block_delta" || e.Type == "content_block_stop") && !open[e.Index]:
			return fmt.Errorf("event #%d: %s of block %d, which is not open", i, e.Type, e.Index)
		case e.Type == "message_delta" && (len(open) > 0 || i != len(evs)-2):
			return fmt.Errorf("event #%d: message_delta with blocks %v open, or not just before message_stop", i, open)
		}
		switch e.Type {
		case "content_block_start":
			open[e.Index] = true
			blocks++
		case "content_block_stop":
			delete(open, e.Index)
		}
	}
	return nil
}

// FuzzFromAnthropicEvent feeds arbitrary chunks (raw) and valid chat
// streams (built from ops): the translator must never panic, every event
// it emits is a named JSON event, and a valid stream becomes one that
// Anthropic's SDK accepts, with its usage.
func FuzzFromAnthropicEvent(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join(fromAnthropicGolden, "stream.sse"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, []byte{})
	f.Add([]byte("data: [DONE]\n\n"), []byte{0, 2, 3, 2, 3, 8, 4, 1})
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}],\"refusal\":\"no\"}}]}\n\ndata: [DONE]\n\n"), []byte{4, 4, 0, 2, 2, 3, 8, 13})
	f.Fuzz(func(t *testing.T, raw, ops []byte) {
		out, err := adaptertest.Stream(NewFromAnthropic(), adaptertest.Parse(raw))
		for i, ev := range out {
			if ev.Name == "" || !json.Valid(ev.Data) {
				t.Fatalf("event #%d = %q %s; want a named JSON event", i, ev.Name, ev.Data)
			}
		}
		if adaptertest.Ends(out, "message_stop") && err == nil {
			if err := checkMessagesStream(out); err != nil {
				t.Fatalf("%v\n%s", err, adaptertest.Format(out))
			}
		}
		out, err = adaptertest.Stream(NewFromAnthropic(), adaptertest.ChatStream(ops))
		if err != nil || !adaptertest.Ends(out, "message_stop") {
			t.Fatalf("valid stream: %v; want nil, ending message_stop\n%s", err, adaptertest.Format(out))
		}
		if err := checkMessagesStream(out); err != nil {
			t.Fatalf("%v\n%s", err, adaptertest.Format(out))
		}
		if u := streamUsage(t, out); u.InputTokens != 9 || u.OutputTokens != 5 {
			t.Fatalf("usage = %+v, want the stream's 9 input and 5 output tokens", u)
		}
	})
}

// BenchmarkFromAnthropicEvent measures the translation of one streamed
// chunk, averaged over a typical stream (reasoning, text, two tool calls,
// usage).
func BenchmarkFromAnthropicEvent(b *testing.B) {
	stream, err := os.ReadFile(filepath.Join(fromAnthropicGolden, "stream.sse"))
	if err != nil {
		b.Fatal(err)
	}
	evs := adaptertest.Parse(stream)
	emit := func(adapter.Event) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		tr := NewFromAnthropic()
		for _, ev := range evs {
			if err := tr.Event(ev, emit); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
