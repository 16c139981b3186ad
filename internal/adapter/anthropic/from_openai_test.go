package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

const golden = "testdata/from_openai"

// newTranslator returns a translator whose clock is fixed, so answers are
// the same on every run.
func newTranslator() *FromOpenAI {
	t := NewFromOpenAI()
	t.now = func() time.Time { return time.Unix(1767225600, 0) }
	return t
}

// translated runs a request body through a fresh translator.
func translated(t *testing.T, body string) (*FromOpenAI, []byte, error) {
	t.Helper()
	tr := newTranslator()
	out, err := tr.Request(&sluice.Request{Body: []byte(body)}, "claude-sonnet-4-6")
	return tr, out, err
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	return adaptertest.Read(t, filepath.Join(golden, name))
}

func TestFromOpenAIGolden(t *testing.T) {
	t.Run("Request", func(t *testing.T) {
		_, out, err := translated(t, string(readFile(t, "request.json")))
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, filepath.Join(golden, "request.want.json"), out)
	})
	t.Run("Stream", func(t *testing.T) {
		tr, _, err := translated(t, string(readFile(t, "request.json")))
		if err != nil {
			t.Fatal(err)
		}
		out, err := adaptertest.Stream(tr, adaptertest.Parse(readFile(t, "stream.sse")))
		if err != nil || !adaptertest.Ends(out, "") {
			t.Fatalf("Run = %v; want nil, ending [DONE]", err)
		}
		adaptertest.GoldenEvents(t, filepath.Join(golden, "stream.want.sse"), out)
	})
	t.Run("Response", func(t *testing.T) {
		tr := newTranslator()
		out, err := tr.Response(readFile(t, "response.json"))
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, filepath.Join(golden, "response.want.json"), out)
	})
	t.Run("Error", func(t *testing.T) {
		adaptertest.GoldenJSON(t, filepath.Join(golden, "error.want.json"), newTranslator().Error(429, readFile(t, "error.json")))
	})
}

// TestFromOpenAIRequest checks the request rules one at a time: each case
// names the field of the Anthropic request it looks at.
func TestFromOpenAIRequest(t *testing.T) {
	tests := []struct {
		name  string
		give  string // members added to a chat request (a later "messages" replaces the first)
		field string
		want  string
	}{
		{"NoCapIsTheDefault", ``, "max_tokens", `8192`},
		{"MaxTokensWhenNoCompletionCap", `,"max_tokens":300`, "max_tokens", `300`},
		{"BudgetOnTopOfTheDefault", `,"reasoning_effort":"high"`, "max_tokens", `24576`},
		{"BudgetShrinksUnderTheCap", `,"reasoning_effort":"high","max_completion_tokens":5000`, "thinking", `{"type":"enabled","budget_tokens":4999}`},
		{"ForcedToolKeepsThinkingOff", `,"reasoning_effort":"high","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"`, "thinking", ``},
		{"NoThinkingInAToolLoop", `,"reasoning_effort":"high","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]`, "thinking", ``},
		{"ThinkingLeavesTemperatureOut", `,"reasoning_effort":"low","temperature":0.2`, "temperature", ``},
		{"EffortNoneDisablesThinking", `,"reasoning_effort":"none"`, "thinking", `{"type":"disabled"}`},
		{"TemperatureClampedToOne", `,"temperature":2`, "temperature", `1`},
		{"TemperatureKeptInRange", `,"temperature":0.3`, "temperature", `0.3`},
		{"StopList", `,"stop":["a","b"]`, "stop_sequences", `["a","b"]`},
		{"ToolChoiceWithoutTools", `,"tool_choice":"none"`, "tool_choice", ``},
		{"ToolChoiceAuto", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"`, "tool_choice", `{"type":"auto"}`},
		{"ToolChoiceNone", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"`, "tool_choice", `{"type":"none"}`},
		{"ToolChoiceNamed", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}`, "tool_choice", `{"type":"tool","name":"f"}`},
		{"ParallelOffWithoutChoice", `,"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false`, "tool_choice", `{"type":"auto","disable_parallel_tool_use":true}`},
		{"JSONObject", `,"response_format":{"type":"json_object"}`, "output_config", `{"format":{"type":"json_schema","schema":{"type":"object"}}}`},
		{"TextFormatIsNone", `,"response_format":{"type":"text"}`, "output_config", ``},
		{"LegacyUser", `,"user":"u-1"`, "metadata", `{"user_id":"u-1"}`},
		{"NoSystem", ``, "system", ``},
		{"SystemCached", `,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]`, "system", `[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]`},
		{"LastToolCached", `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}]`,
			"tools", `[{"name":"f","input_schema":{"type":"object","properties":{}}},{"name":"g","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}]`},
		{"EmptyMessageLeftOut", `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""},{"role":"user","content":"again"}]`,
			"messages", `[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"again","cache_control":{"type":"ephemeral"}}]}]`},
		{"EmptyTextPartLeftOut", `,"messages":[{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"hi"}]}]`, "messages", `[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]`},
		{"EmptyToolResult", `,"messages":[{"role":"tool","tool_call_id":"c1","content":""}]`, "messages", `[{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","cache_control":{"type":"ephemeral"}}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := translated(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]`+tt.give+`}`)
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

// TestFromOpenAIRefuses checks that what Anthropic cannot express is a
// clear invalid_request, not dropped.
func TestFromOpenAIRefuses(t *testing.T) {
	tests := []struct {
		name string
		give string // the whole chat request
		want string // in the message
	}{
		{"N", `{"model":"m","n":2,"messages":[]}`, "n > 1"},
		{"Logprobs", `{"model":"m","logprobs":true,"messages":[]}`, "logprobs"},
		{"TopLogprobs", `{"model":"m","top_logprobs":2,"messages":[]}`, "logprobs"},
		{"LogitBias", `{"model":"m","logit_bias":{"50256":-100},"messages":[]}`, "logit_bias"},
		{"AudioOut", `{"model":"m","modalities":["text","audio"],"messages":[]}`, "audio"},
		{"Functions", `{"model":"m","functions":[{"name":"f"}],"messages":[]}`, "functions"},
		{"WebSearch", `{"model":"m","web_search_options":{"search_context_size":"low"},"messages":[]}`, "web_search_options"},
		{"InputAudio", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`, `"input_audio"`},
		{"FileID", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages[0]: file parts by file_id"},
		{"TextFile", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:text/plain;base64,aGk="}}]}]}`, "PDF"},
		{"FunctionRole", `{"model":"m","messages":[{"role":"function","name":"f","content":"x"}]}`, `"function"`},
		{"ImageFileURL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`, "http(s) URL"},
		{"CustomTool", `{"model":"m","messages":[],"tools":[{"type":"custom","custom":{"name":"c"}}]}`, `"custom"`},
		{"AllowedTools", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`, "tool_choice"},
		{"ArgumentsNotAnObject", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "JSON object"},
		{"CapUnderBudget", `{"model":"m","reasoning_effort":"low","max_completion_tokens":500,"messages":[]}`, "reasoning"},
		{"NotJSON", `{"model":`, "not a valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := translated(t, tt.give)
			e, ok := errors.AsType[*sluice.Error](err)
			if !ok || e.Code != sluice.CodeInvalidRequest || !strings.Contains(e.Msg, tt.want) {
				t.Errorf("Request error = %v, want invalid_request mentioning %q", err, tt.want)
			}
		})
	}
}

// TestFromOpenAIStreamError checks that an error event mid-stream reaches
// the caller as OpenAI's error chunk, without [DONE], and fails the
// execution.
func TestFromOpenAIStreamError(t *testing.T) {
	tr, _, err := translated(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := adaptertest.Stream(tr, adaptertest.Parse([]byte(
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3}}}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")))
	if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeUpstreamStreamFailed {
		t.Fatalf("Run = %v; want upstream_stream_failed", err)
	}
	last := out[len(out)-1]
	if want := `{"error":{"message":"Overloaded","type":"overloaded_error","param":null,"code":null}}`; string(last.Data) != want {
		t.Errorf("last event = %s, want %s", last.Data, want)
	}
}

// TestFromOpenAIKeepAlive checks that a comment-only event (no data)
// passes without a chunk or an error.
func TestFromOpenAIKeepAlive(t *testing.T) {
	err := newTranslator().Event(adapter.Event{}, func(ev adapter.Event) error {
		t.Errorf("emitted %s for a keep-alive", ev.Data)
		return nil
	})
	if err != nil {
		t.Errorf("Event = %v; want nil", err)
	}
}

// TestFromOpenAIStreamWithoutUsage checks that a caller that did not ask
// for usage gets no usage chunk (Sluice reads it from the upstream's
// stream, not from the translator).
func TestFromOpenAIStreamWithoutUsage(t *testing.T) {
	tr, _, err := translated(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := adaptertest.Stream(tr, adaptertest.Parse(readFile(t, "stream.sse")))
	if err != nil || !adaptertest.Ends(out, "") {
		t.Fatalf("Run = %v; want nil, ending [DONE]", err)
	}
	for _, ev := range out {
		if strings.Contains(string(ev.Data), `"usage"`) {
			t.Errorf("event %s carries usage the caller did not ask for", ev.Data)
		}
	}
}

// messagesStream is a valid Anthropic stream built from ops: each op adds
// a text block (op%4 == 0), a thinking block with its signature (1), a
// tool_use block whose input arrives in pieces (2) or a ping (3), and the
// stream ends with message_delta (tool_use when it made a call) and
// message_stop. Its usage is 3 uncached, 5 cache-read, 7 cache-write and
// 11 output tokens.
func messagesStream(ops []byte) []adapter.Event {
	var evs []adapter.Event
	add := func(name, data string) { evs = append(evs, adapter.Event{Name: name, Data: []byte(data)}) }
	add("message_start", `{"type":"message_start","message":{"id":"msg_f","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":3,"cache_read_input_tokens":5,"cache_creation_input_tokens":7,"output_tokens":1}}}`)
	block, stop := 0, "end_turn"
	for i, op := range ops {
		start := fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":`, block)
		delta := fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":`, block)
		switch op % 4 {
		case 0:
			add("content_block_start", start+`{"type":"text","text":""}}`)
			add("content_block_delta", delta+fmt.Sprintf(`{"type":"text_delta","text":"t%d "}}`, i))
		case 1:
			add("content_block_start", start+`{"type":"thinking","thinking":"","signature":""}}`)
			add("content_block_delta", delta+fmt.Sprintf(`{"type":"thinking_delta","thinking":"k%d "}}`, i))
			add("content_block_delta", delta+`{"type":"signature_delta","signature":"sig"}}`)
		case 2:
			add("content_block_start", start+fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"f","input":{}}}`, i))
			for _, piece := range []string{``, `{\"a\":`, `1}`} {
				add("content_block_delta", delta+`{"type":"input_json_delta","partial_json":"`+piece+`"}}`)
			}
			stop = "tool_use"
		case 3:
			add("ping", `{"type":"ping"}`)
			continue
		}
		add("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, block))
		block++
	}
	add("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":11}}`)
	add("message_stop", `{"type":"message_stop"}`)
	return evs
}

// checkChatStream checks a caller's stream the way OpenAI's SDK
// accumulates one: unnamed chunks of one id, tool calls numbered from 0 in
// the order they start and fragments only of calls started, then one
// finish chunk, the usage chunk and [DONE], last.
func checkChatStream(evs []adapter.Event) error {
	if n := len(evs); n < 3 || string(evs[n-1].Data) != "[DONE]" {
		return fmt.Errorf("the stream does not end with [DONE]")
	}
	calls, finished := 0, false
	for i, ev := range evs[:len(evs)-1] {
		var c openai.Chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil || ev.Name != "" || c.Object != "chat.completion.chunk" || c.ID != "msg_f" {
			return fmt.Errorf("event #%d is not a chunk of the stream: %q %s", i, ev.Name, ev.Data)
		}
		if i == len(evs)-2 {
			if c.Usage == nil || len(c.Choices) != 0 || !finished {
				return fmt.Errorf("the chunk before [DONE] is not the usage chunk after the finish: %s", ev.Data)
			}
			continue
		}
		if len(c.Choices) != 1 || finished {
			return fmt.Errorf("event #%d: %s after the finish or without its choice", i, ev.Data)
		}
		ch := c.Choices[0]
		finished = ch.FinishReason != nil
		for _, tc := range ch.Delta.ToolCalls {
			switch {
			case tc.Index == nil:
				return fmt.Errorf("event #%d: a tool call without an index", i)
			case tc.ID != "" && *tc.Index != calls:
				return fmt.Errorf("event #%d: call %s has index %d, want %d", i, tc.ID, *tc.Index, calls)
			case tc.ID != "":
				calls++
			case *tc.Index >= calls:
				return fmt.Errorf("event #%d: a fragment of call %d, which has not started", i, *tc.Index)
			}
		}
	}
	return nil
}

// FuzzFromOpenAIEvent feeds arbitrary events (raw) and valid Anthropic
// streams (built from ops): the translator must never panic, every event
// it emits is a JSON chunk or the [DONE] that ends the stream, and a
// valid stream becomes one OpenAI's SDK accepts, with its usage.
func FuzzFromOpenAIEvent(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join(golden, "stream.sse"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, []byte{})
	f.Add([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), []byte{0, 1, 2, 3, 2})
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"), []byte{2, 2, 0})
	const request = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	f.Fuzz(func(t *testing.T, raw, ops []byte) {
		tr, _, err := translated(t, request)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := adaptertest.Stream(tr, adaptertest.Parse(raw))
		for i, ev := range out {
			var chunk openai.Chunk
			switch {
			case ev.Name != "":
				t.Fatalf("event #%d has a name %q; OpenAI's events have none", i, ev.Name)
			case string(ev.Data) == "[DONE]" && i != len(out)-1:
				t.Fatalf("[DONE] is event #%d of %d", i, len(out))
			case string(ev.Data) != "[DONE]" && json.Unmarshal(ev.Data, &chunk) != nil:
				t.Fatalf("event #%d is not a chunk: %s", i, ev.Data)
			}
		}
		tr, _, _ = translated(t, request)
		out, err = adaptertest.Stream(tr, messagesStream(ops))
		if err != nil || !adaptertest.Ends(out, "") {
			t.Fatalf("valid stream: %v; want nil, ending [DONE]\n%s", err, adaptertest.Format(out))
		}
		if err := checkChatStream(out); err != nil {
			t.Fatalf("%v\n%s", err, adaptertest.Format(out))
		}
		var usage openai.Chunk // the usage chunk, just before [DONE]
		if err := json.Unmarshal(out[len(out)-2].Data, &usage); err != nil || usage.Usage == nil {
			t.Fatalf("no usage chunk before [DONE]: %v\n%s", err, adaptertest.Format(out))
		}
		want := sluice.Usage{PromptTokens: 15, CompletionTokens: 11, CachedTokens: 5, CacheWriteTokens: 7, TotalTokens: 26, Measured: true}
		if u := usage.Usage.Sluice(); u != want {
			t.Fatalf("usage = %+v, want %+v", u, want)
		}
	})
}

// BenchmarkFromOpenAIEvent measures the translation of one streamed event,
// averaged over a typical stream (text, a tool call, usage).
func BenchmarkFromOpenAIEvent(b *testing.B) {
	stream, err := os.ReadFile(filepath.Join(golden, "stream.sse"))
	if err != nil {
		b.Fatal(err)
	}
	evs := adaptertest.Parse(stream)
	emit := func(adapter.Event) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		tr := NewFromOpenAI()
		tr.includeUsage = true // as Request sets it for a caller that asked for usage
		for _, ev := range evs {
			if err := tr.Event(ev, emit); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
