package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	chat "github.com/sluicehq/sluice/internal/adapter/openai"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

const dir = "testdata/from_openai/"

func TestFromOpenAIGolden(t *testing.T) {
	t.Run("Request", func(t *testing.T) {
		body := adaptertest.Read(t, dir+"request.json")
		got, err := NewFromOpenAI().Request(&sluice.Request{Body: body, Stream: true, IncludeUsage: true}, "gpt-5.4")
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, dir+"request.responses.golden.json", got)
	})
	t.Run("Response", func(t *testing.T) {
		tr := NewFromOpenAI()
		got, err := tr.Response(adaptertest.Read(t, dir+"response.responses.json"))
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, dir+"response.golden.json", got)
	})
	t.Run("Stream", func(t *testing.T) {
		tr := NewFromOpenAI()
		if _, err := tr.Request(&sluice.Request{Body: adaptertest.Read(t, dir+"request.json"), Stream: true, IncludeUsage: true}, "gpt-5.4"); err != nil {
			t.Fatal(err)
		}
		got, err := adaptertest.Stream(tr, adaptertest.Parse(adaptertest.Read(t, dir+"stream.responses.sse")))
		if err != nil || !adaptertest.Ends(got, "") {
			t.Fatalf("Stream = %v; want nil, ending [DONE]", err)
		}
		adaptertest.GoldenEvents(t, dir+"stream.golden.sse", got)
		if err := checkChatStream(got, true); err != nil {
			t.Error(err)
		}
	})
	t.Run("Error", func(t *testing.T) {
		got := NewFromOpenAI().Error(404, adaptertest.Read(t, dir+"error.responses.json"))
		adaptertest.GoldenJSON(t, dir+"error.golden.json", got)
	})
}

// Without include_usage the caller's stream has no usage chunk (Sluice
// reads the usage from the upstream's stream, not from the translator).
func TestFromOpenAIStreamWithoutUsageChunk(t *testing.T) {
	tr := NewFromOpenAI()
	if _, err := tr.Request(&sluice.Request{Body: []byte(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`), Stream: true}, "m"); err != nil {
		t.Fatal(err)
	}
	got, err := adaptertest.Stream(tr, adaptertest.Parse(adaptertest.Read(t, dir+"stream.responses.sse")))
	if err != nil || !adaptertest.Ends(got, "") {
		t.Fatalf("Stream = %v; want nil, ending [DONE]", err)
	}
	if err := checkChatStream(got, false); err != nil {
		t.Error(err)
	}
}

func TestFromOpenAIRefuses(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string // in the message
	}{
		{"N", `{"messages":[],"n":2}`, "n > 1"},
		{"Stop", `{"messages":[],"stop":"END"}`, "stop"},
		{"Logprobs", `{"messages":[],"logprobs":true}`, "logprobs"},
		{"LogitBias", `{"messages":[],"logit_bias":{"50256":-100}}`, "logit_bias"},
		{"Audio", `{"messages":[],"modalities":["text","audio"]}`, "audio"},
		{"Functions", `{"messages":[],"functions":[{"name":"f"}]}`, "functions"},
		{"WebSearch", `{"messages":[],"web_search_options":{}}`, "web_search_options"},
		{"CustomTool", `{"messages":[],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, `"custom"`},
		{"ToolWithoutCall", `{"messages":[{"role":"tool","tool_call_id":"call_9","content":"x"}]}`, `"call_9"`},
		{"AudioInput", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`, `"input_audio"`},
		{"ImageInTool", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, `"image_url"`},
		{"Name", `{"messages":[{"role":"user","name":"ann","content":"hi"}]}`, "name"},
		{"FunctionRole", `{"messages":[{"role":"function","name":"f","content":"x"}]}`, "name"},
		{"NotJSON", `{"messages":`, "not a valid chat completions request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewFromOpenAI().Request(&sluice.Request{Body: []byte(tt.give)}, "m")
			var se *sluice.Error
			if !errors.As(err, &se) || se.Code != sluice.CodeInvalidRequest || !strings.Contains(se.Msg, tt.want) {
				t.Errorf("Request = %v, want invalid_request naming %s", err, tt.want)
			}
		})
	}
}

func TestFromOpenAIFinishReason(t *testing.T) {
	tests := []struct {
		status, reason string
		output         string
		want           string
	}{
		{"completed", "", `[{"type":"message","content":[{"type":"output_text","text":"x"}]}]`, "stop"},
		{"completed", "", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]`, "tool_calls"},
		{"incomplete", "max_output_tokens", `[]`, "length"},
		{"incomplete", "content_filter", `[]`, "content_filter"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			details := "null"
			if tt.reason != "" {
				details = fmt.Sprintf(`{"reason":%q}`, tt.reason)
			}
			body := fmt.Sprintf(`{"id":"resp_1","status":%q,"incomplete_details":%s,"output":%s}`, tt.status, details, tt.output)
			out, err := NewFromOpenAI().Response([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			var c openai.Completion
			if err := json.Unmarshal(out, &c); err != nil {
				t.Fatal(err)
			}
			if got := c.Choices[0].FinishReason; got != tt.want {
				t.Errorf("finish_reason = %q, want %q", got, tt.want)
			}
		})
	}
}

// A Responses upstream's error event reaches the chat caller as chat's
// mid-stream error chunk that ends its stream, and the execution as
// upstream_stream_failed.
func TestFromOpenAIStreamError(t *testing.T) {
	in := adaptertest.Parse([]byte(`event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}

event: error
data: {"type":"error","sequence_number":1,"code":"server_error","message":"The server had an error","param":null}
`))
	got, err := adaptertest.Stream(NewFromOpenAI(), in)
	if !errors.Is(err, &sluice.Error{Code: sluice.CodeUpstreamStreamFailed}) {
		t.Fatalf("Stream = %v; want upstream_stream_failed", err)
	}
	last := got[len(got)-1]
	want := `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":"server_error"}}`
	if last.Name != "" || string(last.Data) != want {
		t.Errorf("last event = %s: %s, want %s", last.Name, last.Data, want)
	}
}

// checkChatStream checks that evs is a well-formed, complete chat stream:
// unnamed chunks of one id, the role first, tool calls numbered from 0 and
// each started with its id and name, one finish chunk, a usage chunk after
// it when withUsage (and none otherwise), then [DONE].
func checkChatStream(evs []adapter.Event, withUsage bool) error {
	if len(evs) < 3 || string(evs[len(evs)-1].Data) != "[DONE]" {
		return fmt.Errorf("the stream does not end with [DONE] after a finish chunk (%d events)", len(evs))
	}
	calls, finished, usage := 0, false, false
	id := ""
	for i, ev := range evs[:len(evs)-1] {
		var c openai.Chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil || ev.Name != "" || c.Object != "chat.completion.chunk" || c.Error != nil {
			return fmt.Errorf("event #%d is not a chunk: %s: %s", i, ev.Name, ev.Data)
		}
		if i == 0 {
			id = c.ID
			if len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant" {
				return fmt.Errorf("the first chunk has no role: %s", ev.Data)
			}
		}
		if c.ID != id || usage {
			return fmt.Errorf("event #%d is for %s after usage %v: %s", i, c.ID, usage, ev.Data)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 || !finished {
				return fmt.Errorf("event #%d: usage before the finish or with choices: %s", i, ev.Data)
			}
			usage = true
			continue
		}
		if len(c.Choices) != 1 || finished {
			return fmt.Errorf("event #%d: a chunk after the finish, or not of one choice: %s", i, ev.Data)
		}
		ch := c.Choices[0]
		for _, tc := range ch.Delta.ToolCalls {
			switch {
			case tc.Index == nil || *tc.Index > calls:
				return fmt.Errorf("event #%d: tool call index out of order: %s", i, ev.Data)
			case *tc.Index == calls && (tc.ID == "" || tc.Function.Name == ""):
				return fmt.Errorf("event #%d: tool call %d starts without id or name: %s", i, calls, ev.Data)
			case *tc.Index == calls:
				calls++
			}
		}
		finished = ch.FinishReason != nil
	}
	if !finished || usage != withUsage {
		return fmt.Errorf("finished %v, usage chunk %v; want finished, usage %v", finished, usage, withUsage)
	}
	return nil
}

// A chat stream turned into a Responses stream by openai.FromResponses and
// back by FromOpenAI is the stream it was, byte for byte: the two
// translations agree on ids, text, reasoning, tool calls and usage.
func TestFromOpenAIRoundTripIsIdentity(t *testing.T) {
	in := adaptertest.Parse(adaptertest.Read(t, "../openai/testdata/from_responses/stream.chat.sse"))
	mid, err := adaptertest.Stream(chat.NewFromResponses(), in)
	if err != nil || !adaptertest.Ends(mid, "response.completed") {
		t.Fatalf("to Responses: %v; want nil, ending response.completed", err)
	}
	back := NewFromOpenAI()
	if _, err := back.Request(&sluice.Request{Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`), Stream: true, IncludeUsage: true}, "m"); err != nil {
		t.Fatal(err)
	}
	out, err := adaptertest.Stream(back, mid)
	if err != nil || !adaptertest.Ends(out, "") {
		t.Fatalf("back to chat: %v; want nil, ending [DONE]", err)
	}
	if got, want := adaptertest.Format(out), adaptertest.Format(in); !bytes.Equal(got, want) {
		t.Errorf("round trip =\n%s\nwant\n%s", got, want)
	}
}

// An event whose data leaves out its type is named by the event's name.
func TestFromOpenAIEventNamedByName(t *testing.T) {
	var got []adapter.Event
	emit := func(ev adapter.Event) error { got = append(got, ev); return nil }
	if err := NewFromOpenAI().Event(adapter.Event{Name: "response.output_text.delta", Data: []byte(`{"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}`)}, emit); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Contains(got[1].Data, []byte(`"content":"Hi"`)) {
		t.Errorf("events = %q, want the role chunk and one with content Hi", got)
	}
}

// An upstream that sends a function call's arguments only whole, in its
// output_item.done, still gives the caller the arguments.
func TestFromOpenAIStreamArgumentsOnlyWhenDone(t *testing.T) {
	in := adaptertest.Parse([]byte(`event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","created_at":1,"model":"m","output":[]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":""}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":"{\"x\":1}"}}

event: response.completed
data: {"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","status":"completed","output":[]}}
`))
	got, err := adaptertest.Stream(NewFromOpenAI(), in)
	if err != nil || !adaptertest.Ends(got, "") {
		t.Fatalf("Stream = %v; want nil, ending [DONE]", err)
	}
	if err := checkChatStream(got, false); err != nil {
		t.Fatal(err)
	}
	if want := `{"x":1}`; !strings.Contains(said(t, got), "call_1 f "+want) {
		t.Errorf("stream says %s, want call_1 f %s", said(t, got), want)
	}
}

// A keep-alive (an event without data, or with empty data) adds nothing
// and fails nothing.
func TestFromOpenAIKeepAlive(t *testing.T) {
	for _, data := range [][]byte{nil, {}} {
		got, err := adaptertest.Stream(NewFromOpenAI(), []adapter.Event{{Data: data}})
		if len(got) != 0 || err != nil {
			t.Errorf("Event(%q) = %d events, %v; want none, nil", data, len(got), err)
		}
	}
}
