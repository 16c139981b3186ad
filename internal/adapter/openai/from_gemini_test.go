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
	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

const fromGeminiGolden = "testdata/from_gemini"

func fromGeminiFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fromGeminiGolden, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fromGeminiRequest runs a Gemini body through a fresh translator, as a
// stream when stream is set (the Gemini front reads it from the path).
func fromGeminiRequest(t *testing.T, body string, stream bool) (*FromGemini, []byte, error) {
	t.Helper()
	tr := NewFromGemini()
	out, err := tr.Request(&sluice.Request{Body: []byte(body), Stream: stream}, "gpt-5.4-mini")
	return tr, out, err
}

func TestFromGeminiGolden(t *testing.T) {
	t.Run("Request", func(t *testing.T) {
		_, out, err := fromGeminiRequest(t, string(fromGeminiFile(t, "request.json")), true)
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, filepath.Join(fromGeminiGolden, "request.want.json"), out)
	})
	t.Run("Stream", func(t *testing.T) {
		tr, _, err := fromGeminiRequest(t, string(fromGeminiFile(t, "request.json")), true)
		if err != nil {
			t.Fatal(err)
		}
		out, err := adaptertest.Stream(tr, adaptertest.Parse(fromGeminiFile(t, "stream.sse")))
		if err != nil {
			t.Fatalf("Stream = %v; want nil", err)
		}
		adaptertest.GoldenEvents(t, filepath.Join(fromGeminiGolden, "stream.want.sse"), out)
		if err := checkGeminiStream(out); err != nil {
			t.Error(err)
		}
	})
	t.Run("Response", func(t *testing.T) {
		tr, _, err := fromGeminiRequest(t, string(fromGeminiFile(t, "request.json")), false)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tr.Response(fromGeminiFile(t, "response.json"))
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.GoldenJSON(t, filepath.Join(fromGeminiGolden, "response.want.json"), out)
	})
	t.Run("Error", func(t *testing.T) {
		adaptertest.GoldenJSON(t, filepath.Join(fromGeminiGolden, "error.want.json"), NewFromGemini().Error(429, fromGeminiFile(t, "error.json")))
	})
}

// TestFromGeminiRequest checks the request rules one at a time: each case
// names the field of the chat request it looks at.
func TestFromGeminiRequest(t *testing.T) {
	const tools = `,"tools":[{"functionDeclarations":[{"name":"f"},{"name":"g"}]}]`
	tests := []struct {
		name  string
		give  string // members added to a Gemini request (a later "contents" replaces the first)
		field string
		want  string
	}{
		{"NotStreamedNoUsageOption", ``, "stream_options", ``},
		{"CapWithoutThinkingIsMaxTokens", `,"generationConfig":{"maxOutputTokens":300}`, "max_tokens", `300`},
		{"CapWithThinkingIsCompletionCap", `,"generationConfig":{"maxOutputTokens":300,"thinkingConfig":{"thinkingLevel":"HIGH"}}`, "max_completion_tokens", `300`},
		{"LevelIsEffort", `,"generationConfig":{"thinkingConfig":{"thinkingLevel":"MINIMAL"}}`, "reasoning_effort", `"minimal"`},
		{"SmallBudgetIsLow", `,"generationConfig":{"thinkingConfig":{"thinkingBudget":1024}}`, "reasoning_effort", `"low"`},
		{"BudgetZeroAsksNone", `,"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}`, "reasoning_effort", ``},
		{"DynamicBudgetAsksNone", `,"generationConfig":{"thinkingConfig":{"thinkingBudget":-1}}`, "reasoning_effort", ``},
		{"JSONWithoutSchema", `,"generationConfig":{"responseMimeType":"application/json"}`, "response_format", `{"type":"json_object"}`},
		{"OpenAPISchema", `,"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"ARRAY","items":{"type":"INTEGER"}}}`,
			"response_format", `{"type":"json_schema","json_schema":{"name":"output","schema":{"items":{"type":"integer"},"type":"array"}}}`},
		{"Penalties", `,"generationConfig":{"presencePenalty":0.5,"frequencyPenalty":0.25}`, "presence_penalty", `0.5`},
		{"NoSystem", ``, "messages", `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`},
		{"SnakeCaseSystem", `,"system_instruction":{"parts":[{"text":"s"}]}`, "messages", `[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}]`},
		{"ModeWithoutToolsLeftOut", `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`, "tool_choice", ``},
		{"ModeAny", tools + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`, "tool_choice", `"required"`},
		{"ModeAnyOfTwo", tools + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f","g"]}}`,
			"tool_choice", `{"allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}]},"type":"allowed_tools"}`},
		{"ModeAutoOfOne", tools + `,"toolConfig":{"functionCallingConfig":{"mode":"AUTO","allowedFunctionNames":["g"]}}`,
			"tool_choice", `{"allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"g"}}]},"type":"allowed_tools"}`},
		{"ModeNone", tools + `,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`, "tool_choice", `"none"`},
		{"ErrorResult", `,"contents":[{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"error":"no such city"}}}]}]`,
			"messages", `[{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"Error: no such city","tool_call_id":"call_1"}]`},
		{"ResultMediaFollows", `,"contents":[{"role":"model","parts":[{"functionCall":{"id":"c","name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"id":"c","name":"f","response":{"output":{"n":1}},"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}]}]`,
			"messages", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"{\"n\":1}","tool_call_id":"c"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]`},
		{"AudioAndPDF", `,"contents":[{"parts":[{"inlineData":{"mimeType":"audio/mpeg","data":"AA=="}},{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}]}]`,
			"messages", `[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"mp3"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"document.pdf"}}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := fromGeminiRequest(t, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]`+tt.give+`}`, false)
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

// TestFromGeminiRefuses checks that what OpenAI chat cannot express is a
// clear invalid_request, not dropped.
func TestFromGeminiRefuses(t *testing.T) {
	const user = `"contents":[{"role":"user","parts":[{"text":"hi"}]}]`
	tests := []struct {
		name string
		give string // the whole Gemini request
		want string // in the message
	}{
		{"Candidates", `{` + user + `,"generationConfig":{"candidateCount":2}}`, "candidateCount"},
		{"Logprobs", `{` + user + `,"generationConfig":{"responseLogprobs":true}}`, "logprobs"},
		{"AudioOut", `{` + user + `,"generationConfig":{"responseModalities":["AUDIO"]}}`, "other than text"},
		{"Speech", `{` + user + `,"generationConfig":{"speechConfig":{"voiceConfig":{}}}}`, "other than text"},
		{"Enum", `{` + user + `,"generationConfig":{"responseMimeType":"text/x.enum"}}`, "responseMimeType"},
		{"FiveStops", `{` + user + `,"generationConfig":{"stopSequences":["a","b","c","d","e"]}}`, "stopSequences"},
		{"Level", `{` + user + `,"generationConfig":{"thinkingConfig":{"thinkingLevel":"ULTRA"}}}`, "thinkingLevel"},
		{"Builtin", `{` + user + `,"tools":[{"google_search":{}}]}`, `"googleSearch"`},
		{"DottedName", `{` + user + `,"tools":[{"functionDeclarations":[{"name":"fs.read"}]}]}`, `"fs.read"`},
		{"Mode", `{` + user + `,"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"SOMETIMES"}}}`, "mode"},
		{"CachedContent", `{` + user + `,"cachedContent":"cachedContents/x"}`, "cachedContent"},
		{"Video", `{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"video/mp4","data":"AA=="}}]}]}`, `contents[0]: inline data of type "video/mp4"`},
		{"FilesAPI", `{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"image/png","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}]}]}`, "Files API"},
		{"FileNotImage", `{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"application/pdf","fileUri":"https://example.org/a.pdf"}}]}]}`, "only image URLs"},
		{"GCS", `{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"image/png","fileUri":"gs://b/a.png"}}]}]}`, "http(s)"},
		{"Code", `{"contents":[{"role":"user","parts":[{"executableCode":{"language":"PYTHON","code":"1"}}]}]}`, "executable code"},
		{"ModelImage", `{"contents":[{"role":"model","parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`, "model turn"},
		{"SystemImage", `{"systemInstruction":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]},` + user + `}`, "systemInstruction"},
		{"Unanswered", `{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"name":"g","response":{}}}]}]}`, `functionResponse "g"`},
		{"Role", `{"contents":[{"role":"system","parts":[{"text":"x"}]}]}`, `role "system"`},
		{"NotJSON", `{"contents":`, "not a valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := fromGeminiRequest(t, tt.give, false)
			e, ok := errors.AsType[*sluice.Error](err)
			if !ok || e.Code != sluice.CodeInvalidRequest || !strings.Contains(e.Msg, tt.want) {
				t.Errorf("Request error = %v, want invalid_request mentioning %q", err, tt.want)
			}
		})
	}
}

// TestFromGeminiThoughtsOnlyWhenAsked checks that reasoning reaches a
// Gemini caller as thought parts only when it set includeThoughts.
func TestFromGeminiThoughtsOnlyWhenAsked(t *testing.T) {
	tr, _, err := fromGeminiRequest(t, `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":4096}}}`, true)
	if err != nil {
		t.Fatal(err)
	}
	out, err := adaptertest.Stream(tr, adaptertest.Parse(fromGeminiFile(t, "stream.sse")))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range out {
		if strings.Contains(string(ev.Data), `"thought"`) {
			t.Errorf("event %s carries thoughts the caller did not ask for", ev.Data)
		}
	}
	answer, err := tr.Response(fromGeminiFile(t, "response.json"))
	if err != nil || strings.Contains(string(answer), `"thought"`) {
		t.Errorf("Response = %s, %v; want no thoughts", answer, err)
	}
}

// TestFromGeminiStreamError checks that an error chunk mid-stream reaches
// the caller as Google's error object and fails the execution.
func TestFromGeminiStreamError(t *testing.T) {
	out, err := adaptertest.Stream(NewFromGemini(), adaptertest.Parse([]byte(
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"+
			"data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_exceeded\"}}\n\n"+
			"data: [DONE]\n\n")))
	if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeUpstreamStreamFailed {
		t.Fatalf("Stream = %v; want upstream_stream_failed", err)
	}
	last := out[len(out)-1]
	if want := `{"error":{"code":429,"message":"Rate limit reached","status":"RESOURCE_EXHAUSTED"}}`; string(last.Data) != want {
		t.Errorf("last event = %s, want %s", last.Data, want)
	}
}

// checkGeminiStream checks a caller's stream the way Google's SDKs read
// one: unnamed events, each a whole answer chunk of candidate 0 with
// parts, function calls with an object of arguments, and only the last
// with a finishReason and the usage.
func checkGeminiStream(evs []adapter.Event) error {
	if len(evs) == 0 {
		return fmt.Errorf("no events")
	}
	for i, ev := range evs {
		var r gemini.Response
		if err := json.Unmarshal(ev.Data, &r); err != nil || ev.Name != "" || len(r.Candidates) != 1 || r.Candidates[0].Content == nil {
			return fmt.Errorf("event #%d is not a chunk of candidate 0: %q %s", i, ev.Name, ev.Data)
		}
		c := r.Candidates[0]
		if last := i == len(evs)-1; last != (c.FinishReason != "") || last != (r.UsageMetadata != nil) {
			return fmt.Errorf("event #%d of %d: finishReason %q, usage %v", i, len(evs), c.FinishReason, r.UsageMetadata != nil)
		}
		for _, p := range c.Content.Parts {
			if fc := p.FunctionCall; fc != nil && (fc.ID == "" || fc.Name == "" || len(fc.Args) == 0 || fc.Args[0] != '{') {
				return fmt.Errorf("event #%d: function call %s is not whole", i, ev.Data)
			}
		}
	}
	return nil
}

// FuzzFromGeminiEvent feeds arbitrary chat events (raw) and valid chat
// streams (adaptertest.ChatStream): the translator never panics, every
// event it emits is Google's JSON, and a valid stream becomes a
// well-formed Gemini stream with every call the chat stream made, and its
// usage.
func FuzzFromGeminiEvent(f *testing.F) {
	f.Add(fromGeminiFile(f, "stream.sse"), []byte{})
	f.Add([]byte("data: {\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n"), []byte{0, 2, 3, 4, 1})
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"), []byte{2, 2, 8, 13})
	f.Fuzz(func(t *testing.T, raw, ops []byte) {
		out, _ := adaptertest.Stream(NewFromGemini(), adaptertest.Parse(raw))
		for i, ev := range out {
			var r gemini.Response
			if ev.Name != "" || json.Unmarshal(ev.Data, &r) != nil {
				t.Fatalf("event #%d is not Gemini's: %q %s", i, ev.Name, ev.Data)
			}
		}
		in := adaptertest.ChatStream(ops)
		out, err := adaptertest.Stream(NewFromGemini(), in)
		if err != nil {
			t.Fatalf("valid stream: %v\n%s", err, adaptertest.Format(out))
		}
		if err := checkGeminiStream(out); err != nil {
			t.Fatalf("%v\n%s", err, adaptertest.Format(out))
		}
		calls := 0
		for _, op := range ops {
			if op%5 == 2 {
				calls++
			}
		}
		var last gemini.Response
		_ = json.Unmarshal(out[len(out)-1].Data, &last)
		if got := strings.Count(string(adaptertest.Format(out)), `"functionCall"`); got != calls {
			t.Errorf("%d function calls, want %d", got, calls)
		}
		if u := last.UsageMetadata.Sluice(); u.PromptTokens != 9 || u.CompletionTokens != 5 {
			t.Errorf("usage = %+v, want 9 prompt and 5 completion tokens", u)
		}
	})
}

// BenchmarkFromGeminiEvent measures the translation of one streamed event,
// averaged over a typical stream (text, tool calls, usage).
func BenchmarkFromGeminiEvent(b *testing.B) {
	evs := adaptertest.Parse(fromGeminiFile(b, "stream.sse"))
	emit := func(adapter.Event) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		tr := NewFromGemini()
		tr.includeThoughts = true // as Request sets it for a caller that asked for thoughts
		for _, ev := range evs {
			if err := tr.Event(ev, emit); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
