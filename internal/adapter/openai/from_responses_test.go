package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
)

const fromResponsesDir = "testdata/from_responses/"

func TestFromResponsesGolden(t *testing.T) {
	t.Run("Request", func(t *testing.T) {
		body := adaptertest.Read(t, fromResponsesDir+"request.json")
		got, err := NewFromResponses().Request(&sluice.Request{Body: body, Stream: true}, "gpt-5.4-mini")
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, fromResponsesDir+"request.chat.golden.json", got)
	})
	t.Run("Response", func(t *testing.T) {
		tr := NewFromResponses()
		if _, err := tr.Request(&sluice.Request{Body: adaptertest.Read(t, fromResponsesDir+"request.json")}, "gpt-5.4-mini"); err != nil {
			t.Fatal(err)
		}
		got, err := tr.Response(adaptertest.Read(t, fromResponsesDir+"response.chat.json"))
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, fromResponsesDir+"response.golden.json", got)
	})
	t.Run("Stream", func(t *testing.T) {
		tr := NewFromResponses()
		if _, err := tr.Request(&sluice.Request{Body: adaptertest.Read(t, fromResponsesDir+"request.json"), Stream: true}, "gpt-5.4-mini"); err != nil {
			t.Fatal(err)
		}
		got, err := adaptertest.Stream(tr, adaptertest.Parse(adaptertest.Read(t, fromResponsesDir+"stream.chat.sse")))
		if err != nil || !adaptertest.Ends(got, "response.completed") {
			t.Fatalf("Stream = %v; want nil, ending response.completed", err)
		}
		adaptertest.GoldenEvents(t, fromResponsesDir+"stream.golden.sse", got)
		checkResponsesStream(t, got)
	})
	t.Run("Error", func(t *testing.T) {
		got := NewFromResponses().Error(429, adaptertest.Read(t, fromResponsesDir+"error.chat.json"))
		adaptertest.GoldenJSON(t, fromResponsesDir+"error.golden.json", got)
	})
}

func TestFromResponsesRefuses(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string // in the message
	}{
		{"PreviousResponseID", `{"input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{"Conversation", `{"input":"hi","conversation":"conv_1"}`, "conversation"},
		{"Background", `{"input":"hi","background":true}`, "background"},
		{"StoredPrompt", `{"input":"hi","prompt":{"id":"pmpt_1"}}`, "prompt"},
		{"BuiltInToolChoice", `{"input":"hi","tools":[{"type":"file_search"}],"tool_choice":{"type":"file_search"}}`, `"file_search"`},
		{"BuiltInToolRequired", `{"input":"hi","tools":[{"type":"web_search"}],"tool_choice":"required"}`, "web_search"},
		{"BuiltInToolAllowed", `{"input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}}`, `"web_search"`},
		{"ChoiceOfUndeclaredFunction", `{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, `"g" is not among the tools`},
		{"ChoiceOfUndeclaredNamespace", `{"input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"function","namespace":"m","name":"f"}}`, `namespace "m"`},
		{"ChoiceInTwoNamespaces", `{"input":"hi","tools":[{"type":"namespace","name":"a","tools":[{"type":"function","name":"f"}]},{"type":"namespace","name":"b","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"function","name":"f"}}`, "a__f, b__f"},
		{"CustomTool", `{"input":"hi","tools":[{"type":"custom","name":"apply_patch"}]}`, `"custom"`},
		{"CustomToolInNamespace", `{"input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"custom","name":"c"}]}]}`, `"custom"`},
		{"NamespaceNameTaken", `{"input":"hi","tools":[{"type":"function","name":"a__b"},{"type":"namespace","name":"a","tools":[{"type":"function","name":"b"}]}]}`, `"a__b"`},
		{"NamespaceNamesCollide", `{"input":"hi","tools":[{"type":"namespace","name":"a_","tools":[{"type":"function","name":"_b"}]},{"type":"namespace","name":"a","tools":[{"type":"function","name":"__b"}]}]}`, `"a____b"`},
		{"NamespaceNameTooLong", `{"input":"hi","tools":[{"type":"namespace","name":"` + strings.Repeat("n", 40) + `","tools":[{"type":"function","name":"` + strings.Repeat("f", 23) + `"}]}]}`, "64"},
		{"OutputWithoutCall", `{"input":[{"type":"function_call_output","call_id":"call_9","output":"x"}]}`, `"call_9"`},
		{"ItemReference", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, "item_reference"},
		{"UnknownItem", `{"input":[{"type":"computer_call","id":"cu_1"}]}`, `"computer_call"`},
		{"ImageByFileID", `{"input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`, "file_id"},
		{"ImageInToolOutput", `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x"}]}]}`, "text only"},
		{"ImageInSystem", `{"input":[{"role":"developer","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "text only"},
		{"Logprobs", `{"input":"hi","top_logprobs":3}`, "top_logprobs"},
		{"UnknownFormat", `{"input":"hi","text":{"format":{"type":"grammar"}}}`, `"grammar"`},
		{"NotJSON", `{"input":`, "not a valid Responses request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewFromResponses().Request(&sluice.Request{Body: []byte(tt.give)}, "m")
			var se *sluice.Error
			if !errors.As(err, &se) || se.Code != sluice.CodeInvalidRequest || !strings.Contains(se.Msg, tt.want) {
				t.Errorf("Request = %v, want invalid_request naming %s", err, tt.want)
			}
		})
	}
}

// A tool_choice forcing a function of a namespace tool forces its
// flattened chat function, however the caller names it: with its
// namespace (as a function_call item does), by the flattened name, or by
// its own name when no other function has it; so does an allowed_tools
// choice.
func TestFromResponsesNamespacedToolChoice(t *testing.T) {
	const tools = `"tools":[{"type":"function","name":"exec"},{"type":"namespace","name":"agents","tools":[{"type":"function","name":"spawn"}]}]`
	const forced = `{"type":"function","function":{"name":"agents__spawn"}}`
	tests := []struct{ name, choice, want string }{
		{"Namespace", `{"type":"function","namespace":"agents","name":"spawn"}`, forced},
		{"Flattened", `{"type":"function","name":"agents__spawn"}`, forced},
		{"OwnName", `{"type":"function","name":"spawn"}`, forced},
		{"TopLevel", `{"type":"function","name":"exec"}`, `{"type":"function","function":{"name":"exec"}}`},
		{"Allowed", `{"type":"allowed_tools","mode":"required","tools":[{"type":"function","namespace":"agents","name":"spawn"},{"type":"function","name":"exec"}]}`,
			`{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"agents__spawn"}},{"type":"function","function":{"name":"exec"}}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewFromResponses().Request(&sluice.Request{Body: []byte(`{"input":"hi",` + tools + `,"tool_choice":` + tt.choice + `}`)}, "m")
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(got, &fields); err != nil {
				t.Fatal(err)
			}
			if string(fields["tool_choice"]) != tt.want {
				t.Errorf("tool_choice = %s, want %s", fields["tool_choice"], tt.want)
			}
		})
	}
}

// parallel_tool_calls and tool_choice without tools mean nothing, and chat
// refuses them; so when the only tools offered were dropped.
func TestFromResponsesToolSettingsWithoutTools(t *testing.T) {
	for _, body := range []string{
		`{"input":"hi","parallel_tool_calls":true}`,
		`{"input":"hi","parallel_tool_calls":true,"tool_choice":"auto","tools":[{"type":"web_search","external_web_access":false}]}`,
	} {
		got, err := NewFromResponses().Request(&sluice.Request{Body: []byte(body)}, "m")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(got, []byte("parallel_tool_calls")) || bytes.Contains(got, []byte("tool")) {
			t.Errorf("Request(%s) = %s, want no tools, tool_choice nor parallel_tool_calls", body, got)
		}
	}
}

// Codex's requests: a namespace tool's functions become chat functions
// named <namespace>__<name>, in the tools and in the calls of the input;
// web_search, offered but not forced, is dropped, and DroppedTools says so; the
// upstream's calls of a flattened function reach the caller as the
// namespaced function_call items it declared.
func TestFromResponsesNamespace(t *testing.T) {
	body := adaptertest.Read(t, fromResponsesDir+"namespace.json")
	t.Run("Request", func(t *testing.T) {
		tr := NewFromResponses()
		got, err := tr.Request(&sluice.Request{Body: body, Stream: true}, "gpt-5.4-mini")
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, fromResponsesDir+"namespace.chat.golden.json", got)
		if d := tr.DroppedTools(); fmt.Sprint(d) != "[web_search]" {
			t.Errorf("DroppedTools = %q, want [web_search]", d)
		}
	})
	t.Run("Stream", func(t *testing.T) {
		tr := NewFromResponses()
		if _, err := tr.Request(&sluice.Request{Body: body, Stream: true}, "gpt-5.4-mini"); err != nil {
			t.Fatal(err)
		}
		got, err := adaptertest.Stream(tr, adaptertest.Parse(adaptertest.Read(t, fromResponsesDir+"namespace.stream.chat.sse")))
		if err != nil || !adaptertest.Ends(got, "response.completed") {
			t.Fatalf("Stream = %v; want nil, ending response.completed", err)
		}
		adaptertest.GoldenEvents(t, fromResponsesDir+"namespace.stream.golden.sse", got)
		checkResponsesStream(t, got)
		var last wire.StreamEvent
		if err := json.Unmarshal(got[len(got)-1].Data, &last); err != nil {
			t.Fatal(err)
		}
		var calls []string
		for _, o := range last.Response.Output {
			calls = append(calls, o.Namespace+"/"+o.Name+" "+*o.Arguments)
		}
		if want := []string{`multi_agent_v1/wait_agent {"targets":["agent_7"]}`, `/exec_command {"cmd":"ls"}`}; fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Errorf("calls = %q, want %q", calls, want)
		}
	})
	t.Run("Response", func(t *testing.T) {
		tr := NewFromResponses()
		if _, err := tr.Request(&sluice.Request{Body: body}, "gpt-5.4-mini"); err != nil {
			t.Fatal(err)
		}
		out, err := tr.Response([]byte(`{"id":"chatcmpl-NS2","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"call_w","type":"function","function":{"name":"multi_agent_v1__wait_agent","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		var r wire.Response
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if o := r.Output[0]; o.Namespace != "multi_agent_v1" || o.Name != "wait_agent" {
			t.Errorf("output[0] = namespace %q name %q, want multi_agent_v1 wait_agent", o.Namespace, o.Name)
		}
	})
}

func TestFromResponsesStatus(t *testing.T) {
	tests := []struct {
		finish     string
		wantStatus string
		wantReason string
	}{
		{"stop", "completed", ""},
		{"tool_calls", "completed", ""},
		{"length", "incomplete", "max_output_tokens"},
		{"content_filter", "incomplete", "content_filter"},
	}
	for _, tt := range tests {
		t.Run(tt.finish, func(t *testing.T) {
			body := fmt.Sprintf(`{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":%q}]}`, tt.finish)
			out, err := NewFromResponses().Response([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			var r wire.Response
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatal(err)
			}
			reason := ""
			if r.IncompleteDetails != nil {
				reason = r.IncompleteDetails.Reason
			}
			if r.Status != tt.wantStatus || reason != tt.wantReason {
				t.Errorf("status = %q (%q), want %q (%q)", r.Status, reason, tt.wantStatus, tt.wantReason)
			}
		})
	}
}

// A chat upstream's mid-stream error reaches the Responses caller as an
// error event that ends its stream, and the execution as
// upstream_stream_failed.
func TestFromResponsesStreamError(t *testing.T) {
	in := adaptertest.Parse([]byte(`data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

data: {"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}

data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"more"},"finish_reason":null}]}
`))
	got, err := adaptertest.Stream(NewFromResponses(), in)
	if !errors.Is(err, &sluice.Error{Code: sluice.CodeUpstreamStreamFailed}) {
		t.Fatalf("Stream = %v; want upstream_stream_failed", err)
	}
	last := got[len(got)-1]
	want := `{"type":"error","sequence_number":5,"code":null,"message":"The server had an error","param":null}`
	if last.Name != "error" || string(last.Data) != want {
		t.Errorf("last event = %s: %s, want error: %s", last.Name, last.Data, want)
	}
}

// checkResponsesStream checks that evs is a well-formed, complete
// Responses stream: numbered in order, lifecycle first and last, each
// item added before its parts and deltas and done once, and the final
// response holding what the deltas said.
func checkResponsesStream(t *testing.T, evs []adapter.Event) {
	t.Helper()
	type item struct {
		id         string
		text, args string
		parts      int
		partOpen   bool
		done       bool
	}
	var items []*item
	for i, ev := range evs {
		var e wire.StreamEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatalf("event #%d: %v: %s", i, err, ev.Data)
		}
		if e.Type != ev.Name || e.SequenceNumber != int64(i) {
			t.Fatalf("event #%d is %s #%d named %s", i, e.Type, e.SequenceNumber, ev.Name)
		}
		switch {
		case i == 0 && e.Type != "response.created", i == 1 && e.Type != "response.in_progress":
			t.Fatalf("event #%d is %s", i, e.Type)
		case i == len(evs)-1:
			if e.Type != "response.completed" && e.Type != "response.incomplete" || e.Response == nil {
				t.Fatalf("last event is %s", e.Type)
			}
			if len(e.Response.Output) != len(items) {
				t.Fatalf("final output has %d items, want %d", len(e.Response.Output), len(items))
			}
			for k, it := range items {
				o := e.Response.Output[k]
				got := ""
				for _, p := range o.Content {
					if p.Text != nil {
						got += *p.Text
					}
					if p.Refusal != nil {
						got += *p.Refusal
					}
				}
				if o.Arguments != nil {
					got = *o.Arguments
				}
				if !it.done || o.ID != it.id || got != it.text+it.args {
					t.Errorf("final item %d = %s %q (done %v), want %s %q", k, o.ID, got, it.done, it.id, it.text+it.args)
				}
			}
			return
		case i < 2:
			continue
		}
		if e.Type == "response.output_item.added" {
			if e.OutputIndex != len(items) || e.Item == nil {
				t.Fatalf("event #%d adds item %d, want %d", i, e.OutputIndex, len(items))
			}
			items = append(items, &item{id: e.Item.ID})
			continue
		}
		if e.OutputIndex >= len(items) || items[e.OutputIndex].done {
			t.Fatalf("event #%d (%s) is for item %d, not open", i, e.Type, e.OutputIndex)
		}
		it := items[e.OutputIndex]
		if e.ItemID != "" && e.ItemID != it.id {
			t.Fatalf("event #%d names item %s, want %s", i, e.ItemID, it.id)
		}
		switch e.Type {
		case "response.content_part.added":
			if it.partOpen || e.ContentIndex != it.parts {
				t.Fatalf("event #%d adds part %d of %d (open %v)", i, e.ContentIndex, it.parts, it.partOpen)
			}
			it.parts++
			it.partOpen = true
		case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta":
			if !it.partOpen || e.ContentIndex != it.parts-1 {
				t.Fatalf("event #%d is a delta of a part not open", i)
			}
			it.text += e.Delta
		case "response.content_part.done":
			it.partOpen = false
		case "response.function_call_arguments.delta":
			it.args += e.Delta
		case "response.output_item.done":
			if it.partOpen {
				t.Fatalf("event #%d closes item %d with a part open", i, e.OutputIndex)
			}
			it.done = true
		}
	}
	t.Fatalf("the stream has no terminal event")
}

// Compatible servers that send parallel calls all at index 0, each with
// its own id, get one function_call item per call.
func TestFromResponsesStreamReusedIndex(t *testing.T) {
	in := adaptertest.Parse([]byte(`data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]
`))
	got, err := adaptertest.Stream(NewFromResponses(), in)
	if err != nil || !adaptertest.Ends(got, "response.completed") {
		t.Fatalf("Stream = %v; want nil, ending response.completed", err)
	}
	checkResponsesStream(t, got)
	var last wire.StreamEvent
	if err := json.Unmarshal(got[len(got)-1].Data, &last); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, o := range last.Response.Output {
		calls = append(calls, o.CallID+" "+o.Name+" "+*o.Arguments)
	}
	if want := []string{`call_a f {"x":1}`, "call_b g {}"}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls = %q, want %q", calls, want)
	}
}

// A keep-alive (an event without data, or with empty data) adds nothing
// and fails nothing.
func TestFromResponsesKeepAlive(t *testing.T) {
	for _, data := range [][]byte{nil, {}} {
		got, err := adaptertest.Stream(NewFromResponses(), []adapter.Event{{Data: data}})
		if len(got) != 0 || err != nil {
			t.Errorf("Event(%q) = %d events, %v; want none, nil", data, len(got), err)
		}
	}
}
