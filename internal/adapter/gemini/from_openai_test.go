package gemini

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
	out, err := tr.Request(&sluice.Request{Body: []byte(body)}, "gemini-2.5-flash")
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
			t.Fatalf("Stream = %v; want nil, ending [DONE]", err)
		}
		adaptertest.GoldenEvents(t, filepath.Join(golden, "stream.want.sse"), out)
		if err := checkChatStream(out, "chatcmpl-Il0taoSY"); err != nil {
			t.Error(err)
		}
	})
	t.Run("Response", func(t *testing.T) {
		out, err := newTranslator().Response(readFile(t, "response.json"))
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
// names the member of the Gemini request it looks at, and a path into it.
func TestFromOpenAIRequest(t *testing.T) {
	const tool = `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g","parameters":{"type":"object"}}}]`
	tests := []struct {
		name  string
		give  string // members added to a chat request (a later "messages" replaces the first)
		field string
		want  string
	}{
		{"NothingSetNoConfig", ``, "generationConfig", ``},
		{"MaxTokens", `,"max_tokens":300`, "generationConfig", `{"maxOutputTokens":300}`},
		{"CompletionCapWins", `,"max_tokens":300,"max_completion_tokens":500`, "generationConfig", `{"maxOutputTokens":500}`},
		{"EffortNoneTurnsThinkingOff", `,"reasoning_effort":"none"`, "generationConfig", `{"thinkingConfig":{"thinkingBudget":0}}`},
		{"EffortHigh", `,"reasoning_effort":"high"`, "generationConfig", `{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":24576}}`},
		{"JSONObject", `,"response_format":{"type":"json_object"}`, "generationConfig", `{"responseMimeType":"application/json"}`},
		{"TextFormatIsNone", `,"response_format":{"type":"text"}`, "generationConfig", ``},
		{"Penalties", `,"frequency_penalty":0.1,"presence_penalty":0.2,"seed":3`, "generationConfig", `{"presencePenalty":0.2,"frequencyPenalty":0.1,"seed":3}`},
		{"NoSystem", ``, "systemInstruction", ``},
		{"NoToolsNoChoice", `,"tool_choice":"required"`, "toolConfig", ``},
		{"NoChoice", tool, "toolConfig", ``},
		{"ParametersAsJSONSchema", tool, "tools", `[{"functionDeclarations":[{"name":"f"},{"name":"g","parametersJsonSchema":{"type":"object"}}]}]`},
		{"ChoiceAuto", tool + `,"tool_choice":"auto"`, "toolConfig", `{"functionCallingConfig":{"mode":"AUTO"}}`},
		{"ChoiceNone", tool + `,"tool_choice":"none"`, "toolConfig", `{"functionCallingConfig":{"mode":"NONE"}}`},
		{"ChoiceRequired", tool + `,"tool_choice":"required"`, "toolConfig", `{"functionCallingConfig":{"mode":"ANY"}}`},
		{"AllowedRequired", tool + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"g"}}]}}`,
			"toolConfig", `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["g"]}}`},
		{"AllowedAutoDeclaresOnlyThose", tool + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"g"}}]}}`,
			"tools", `[{"functionDeclarations":[{"name":"g","parametersJsonSchema":{"type":"object"}}]}]`},
		{"SameRoleMerged", `,"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"}]}]`, "contents", `[{"role":"user","parts":[{"text":"a"},{"text":"b"}]}]`},
		{"EmptyAssistantLeftOut", `,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":""},{"role":"user","content":"b"}]`, "contents", `[{"role":"user","parts":[{"text":"a"},{"text":"b"}]}]`},
		{"BareFileDataIsPDF", `,"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"JVBERi0="}}]}]`, "contents", `[{"role":"user","parts":[{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}]}]`},
		{"RefusalAsText", `,"messages":[{"role":"assistant","content":null,"refusal":"no"}]`, "contents", `[{"role":"model","parts":[{"text":"no"}]}]`},
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

// TestFromOpenAIRefuses checks that what Gemini cannot express is a clear
// invalid_request, not dropped.
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
		{"AudioFormat", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"flac"}}]}]}`, "wav or mp3"},
		{"FileID", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages[0]: file parts by file_id"},
		{"FunctionRole", `{"model":"m","messages":[{"role":"function","name":"f","content":"x"}]}`, `"function"`},
		{"ImageFileURL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`, "http(s) URL"},
		{"ImageURLWithoutType", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.org/img?id=4"}}]}]}`, "names no image type"},
		{"NotBase64DataURL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,xyz"}}]}]}`, "base64"},
		{"CustomTool", `{"model":"m","messages":[],"tools":[{"type":"custom","custom":{"name":"c"}}]}`, `"custom"`},
		{"ToolChoiceUnknown", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"}`, "tool_choice"},
		{"ArgumentsNotAnObject", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "JSON object"},
		{"ResultWithoutCall", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c9","content":"x"}]}`, `tool_call_id "c9"`},
		{"ImageInSystem", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x.org/a.png"}}]}]}`, "only text"},
		{"Effort", `{"model":"m","reasoning_effort":"extreme","messages":[]}`, "reasoning_effort"},
		{"Format", `{"model":"m","response_format":{"type":"grammar"},"messages":[]}`, "response_format"},
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

// TestFromOpenAIToolLoop checks that a tool call's id and thought
// signature survive the round trip through an OpenAI caller: the ids the
// caller gets in the answer, sent back with the results, give Gemini the
// same ids on the call and its response, and the signature on the call.
func TestFromOpenAIToolLoop(t *testing.T) {
	answer, err := newTranslator().Response(readFile(t, "response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c openai.Completion
	if err := json.Unmarshal(answer, &c); err != nil {
		t.Fatal(err)
	}
	msg := c.Choices[0].Message
	msg.Content = nil
	turn := []openai.ChatMessage{{Role: "user", Content: openai.TextContent("weather?")}, msg}
	for _, tc := range msg.ToolCalls {
		turn = append(turn, openai.ChatMessage{Role: "tool", ToolCallID: tc.ID, Content: openai.TextContent("ok")})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": turn})
	_, out, err := translated(t, string(body))
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Contents []json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(out, &req); err != nil || len(req.Contents) != 3 {
		t.Fatalf("contents = %s, %v; want 3", out, err)
	}
	if got, want := string(req.Contents[1]), `{"role":"model","parts":[{"thoughtSignature":"EjQKMg+/ab==","functionCall":{"id":"call_Il0taoSY_0","name":"get_weather","args":{"city":"Oslo","day":"tomorrow"}}},{"functionCall":{"id":"fc_7","name":"get_time","args":{}}}]}`; got != want {
		t.Errorf("model turn = %s\nwant %s", got, want)
	}
	if got, want := string(req.Contents[2]), `{"role":"user","parts":[{"functionResponse":{"id":"call_Il0taoSY_0","name":"get_weather","response":{"output":"ok"}}},{"functionResponse":{"id":"fc_7","name":"get_time","response":{"output":"ok"}}}]}`; got != want {
		t.Errorf("results = %s\nwant %s", got, want)
	}
}

// TestFromOpenAIBlockedPrompt checks that a prompt Gemini blocks (no
// candidates) ends the caller's stream with content_filter, and the
// answer too.
func TestFromOpenAIBlockedPrompt(t *testing.T) {
	const blocked = `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"responseId":"b1"}`
	out, err := adaptertest.Stream(newTranslator(), []adapter.Event{{Data: []byte(blocked)}, {Data: []byte(`{"candidates":[{"content":{"parts":[{"text":"late"}]}}]}`)}})
	if err != nil || !adaptertest.Ends(out, "") || len(out) != 3 {
		t.Fatalf("Stream = %v\n%s; want role, finish, [DONE]", err, adaptertest.Format(out))
	}
	if !strings.Contains(string(out[1].Data), `"finish_reason":"content_filter"`) {
		t.Errorf("finish chunk = %s, want content_filter", out[1].Data)
	}
	answer, err := newTranslator().Response([]byte(blocked))
	if err != nil || !strings.Contains(string(answer), `"content":""},"finish_reason":"content_filter"`) {
		t.Errorf("Response = %s, %v; want empty content, content_filter", answer, err)
	}
}

// TestFromOpenAIStreamError checks that an error object mid-stream reaches
// the caller as OpenAI's error chunk, without [DONE], and fails the
// execution.
func TestFromOpenAIStreamError(t *testing.T) {
	out, err := adaptertest.Stream(newTranslator(), adaptertest.Parse([]byte(
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hi\"}]},\"index\":0}],\"responseId\":\"r\"}\n\n"+
			"data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\n\n")))
	if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeUpstreamStreamFailed {
		t.Fatalf("Stream = %v; want upstream_stream_failed", err)
	}
	last := out[len(out)-1]
	if want := `{"error":{"message":"The model is overloaded.","type":"server_error","param":null,"code":"UNAVAILABLE"}}`; string(last.Data) != want {
		t.Errorf("last event = %s, want %s", last.Data, want)
	}
}

// TestFromOpenAIStreamWithoutUsage checks that a caller that did not ask
// for usage gets no usage chunk, and that a keep-alive passes unseen.
func TestFromOpenAIStreamWithoutUsage(t *testing.T) {
	tr, _, err := translated(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := adaptertest.Stream(tr, append([]adapter.Event{{}}, adaptertest.Parse(readFile(t, "stream.sse"))...))
	if err != nil || !adaptertest.Ends(out, "") {
		t.Fatalf("Stream = %v; want nil, ending [DONE]", err)
	}
	for _, ev := range out {
		if strings.Contains(string(ev.Data), `"usage"`) {
			t.Errorf("event %s carries usage the caller did not ask for", ev.Data)
		}
	}
}

// geminiStream is a valid Gemini stream built from ops: each op adds a
// chunk of text (op%4 == 0), of thought text (1), a function call, with a
// signature on odd ops (2), or a chunk with usage so far (3); the last
// chunk has finishReason STOP and the usage: 20 prompt tokens of which 5
// cached, 7 candidate and 3 thought tokens.
func geminiStream(ops []byte) []adapter.Event {
	const tail = `"modelVersion":"gemini-f","responseId":"f"}`
	var evs []adapter.Event
	chunk := func(part string) {
		evs = append(evs, adapter.Event{Data: []byte(`{"candidates":[{"content":{"role":"model","parts":[` + part + `]},"index":0}],` + tail)})
	}
	for i, op := range ops {
		switch op % 4 {
		case 0:
			chunk(fmt.Sprintf(`{"text":"t%d "}`, i))
		case 1:
			chunk(fmt.Sprintf(`{"text":"k%d ","thought":true}`, i))
		case 2:
			signature := ""
			if (op/4)%2 == 1 {
				signature = `,"thoughtSignature":"c2ln+/=="`
			}
			chunk(fmt.Sprintf(`{"functionCall":{"name":"f%d","args":{"a":%d}}%s}`, i, i, signature))
		case 3:
			evs = append(evs, adapter.Event{Data: []byte(`{"candidates":[],"usageMetadata":{"promptTokenCount":20,"totalTokenCount":20},` + tail)})
		}
	}
	return append(evs, adapter.Event{Data: []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":20,"cachedContentTokenCount":5,"candidatesTokenCount":7,"thoughtsTokenCount":3,"totalTokenCount":30},` + tail)})
}

// checkChatStream checks a caller's stream the way OpenAI's SDK
// accumulates one: unnamed chunks of one id, tool calls numbered from 0 in
// the order they start, each whole in one delta, then one finish chunk
// (tool_calls when there were calls), the usage chunk and [DONE], last.
func checkChatStream(evs []adapter.Event, id string) error {
	if n := len(evs); n < 3 || string(evs[n-1].Data) != "[DONE]" {
		return fmt.Errorf("the stream does not end with [DONE]")
	}
	calls, finish := 0, ""
	for i, ev := range evs[:len(evs)-1] {
		var c openai.Chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil || ev.Name != "" || c.Object != "chat.completion.chunk" || c.ID != id {
			return fmt.Errorf("event #%d is not a chunk of the stream: %q %s", i, ev.Name, ev.Data)
		}
		if i == len(evs)-2 {
			if c.Usage == nil || len(c.Choices) != 0 || finish == "" {
				return fmt.Errorf("the chunk before [DONE] is not the usage chunk after the finish: %s", ev.Data)
			}
			continue
		}
		if len(c.Choices) != 1 || finish != "" {
			return fmt.Errorf("event #%d: %s after the finish or without its choice", i, ev.Data)
		}
		ch := c.Choices[0]
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Index == nil || *tc.Index != calls || tc.ID == "" || !json.Valid([]byte(tc.Function.Arguments)) {
				return fmt.Errorf("event #%d: tool call %s is not call %d whole", i, ev.Data, calls)
			}
			calls++
		}
	}
	if (calls > 0) != (finish == "tool_calls") {
		return fmt.Errorf("finish %q after %d calls", finish, calls)
	}
	return nil
}

// FuzzFromOpenAIEvent feeds arbitrary events (raw) and valid Gemini
// streams (built from ops): the translator never panics, every event it
// emits is a JSON chunk or the [DONE] that ends the stream, and a valid
// stream becomes one OpenAI's SDK accepts, with its usage.
func FuzzFromOpenAIEvent(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join(golden, "stream.sse"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, []byte{})
	f.Add([]byte("data: {\"error\":{\"code\":429}}\n\ndata: {\"candidates\":[]}\n\n"), []byte{0, 1, 2, 3, 2})
	f.Add([]byte("data: {\"candidates\":[{\"index\":1,\"finishReason\":\"STOP\"},{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\"}}]},\"finishReason\":\"MAX_TOKENS\"}]}\n\n"), []byte{6, 7, 2})
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
		out, err = adaptertest.Stream(tr, geminiStream(ops))
		if err != nil || !adaptertest.Ends(out, "") {
			t.Fatalf("valid stream: %v; want nil, ending [DONE]\n%s", err, adaptertest.Format(out))
		}
		if err := checkChatStream(out, "chatcmpl-f"); err != nil {
			t.Fatalf("%v\n%s", err, adaptertest.Format(out))
		}
		var usage openai.Chunk // the usage chunk, just before [DONE]
		if err := json.Unmarshal(out[len(out)-2].Data, &usage); err != nil || usage.Usage == nil {
			t.Fatalf("no usage chunk before [DONE]: %v\n%s", err, adaptertest.Format(out))
		}
		want := sluice.Usage{PromptTokens: 20, CompletionTokens: 10, CachedTokens: 5, ReasoningTokens: 3, TotalTokens: 30, Measured: true}
		if u := usage.Usage.Sluice(); u != want {
			t.Fatalf("usage = %+v, want %+v", u, want)
		}
	})
}

// BenchmarkFromOpenAIEvent measures the translation of one streamed event,
// averaged over a typical stream (thoughts, text, tool calls, usage).
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
