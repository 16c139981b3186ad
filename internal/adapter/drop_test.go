package adapter_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/anthropic"
	"github.com/sluicehq/sluice/internal/adapter/gemini"
	"github.com/sluicehq/sluice/internal/adapter/openai"
	"github.com/sluicehq/sluice/internal/adapter/responses"
)

// translators are the direct translators with the hints each drops, by the
// row that lists them in docs/translators.md ("What is dropped").
var translators = []struct {
	row   string
	new   func() adapter.Translator
	hints adapter.Hints
	batch bool // the request is a Gemini batch (its path says so)
	// cases are requests that send hints, and the names Dropped gives;
	// together they send each of hints.
	cases []dropCase
}{
	{"chat → Messages", func() adapter.Translator { return anthropic.NewFromOpenAI() }, anthropic.FromOpenAIHints, false, []dropCase{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":null}`, nil},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":1,"frequency_penalty":0.5,"presence_penalty":0.5,"metadata":{"a":"b"},"store":true,"service_tier":"auto",` +
			`"prompt_cache_key":"k","prompt_cache_retention":"24h","prediction":{"type":"content","content":"x"},"verbosity":"low"}`,
			[]string{"seed", "frequency_penalty", "presence_penalty", "metadata", "store", "service_tier", "prompt_cache_key", "prompt_cache_retention", "prediction", "verbosity"}},
		{chatImageAndReasoning, []string{"messages[].content[].image_url.detail", "messages[].reasoning_content"}},
	}},
	{"chat → Gemini", func() adapter.Translator { return gemini.NewFromOpenAI() }, gemini.FromOpenAIHints, false, []dropCase{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":1,"frequency_penalty":0.5}`, nil},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":true,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}}],` +
			`"user":"u","safety_identifier":"s","metadata":{},"store":false,"service_tier":"auto","prompt_cache_key":"k","prompt_cache_retention":"24h",` +
			`"prediction":{"type":"content","content":"x"},"verbosity":"low"}`,
			[]string{"parallel_tool_calls", "tools[].function.strict", "user", "safety_identifier", "metadata", "store", "service_tier", "prompt_cache_key", "prompt_cache_retention", "prediction", "verbosity"}},
		{chatImageAndReasoning, []string{"messages[].content[].image_url.detail", "messages[].reasoning_content"}},
	}},
	{"chat → Responses", func() adapter.Translator { return responses.NewFromOpenAI() }, responses.FromOpenAIHints, false, []dropCase{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_cache_key":"k","service_tier":"auto","metadata":{"a":"b"}}`, nil},
		{`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","reasoning_content":"r"},{"role":"user","content":"b"}],"seed":7,"frequency_penalty":0.5,"presence_penalty":0.1,` +
			`"store":true,"prediction":{"type":"content","content":"x"}}`,
			[]string{"seed", "frequency_penalty", "presence_penalty", "store", "prediction", "messages[].reasoning_content"}},
	}},
	{"Messages → chat", func() adapter.Translator { return openai.NewFromAnthropic() }, openai.FromAnthropicHints, false, []dropCase{
		{`{"model":"m","max_tokens":10,"metadata":{"user_id":"u"},"messages":[{"role":"user","content":"hi"}]}`, nil},
		{`{"model":"m","max_tokens":10,"top_k":5,"service_tier":"auto","container":"c","inference_geo":"us","context_management":{"edits":[]},` +
			`"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
			[]string{"top_k", "system[].cache_control", "messages[].content[].cache_control", "tools[].cache_control", "service_tier", "container", "inference_geo", "context_management"}},
		{`{"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig"},{"type":"redacted_thinking","data":"xx"},{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r","cache_control":{"type":"ephemeral"}}]}]}]}`,
			[]string{"messages[].content[].content[].cache_control", "messages[].content[type=redacted_thinking]", "messages[].content[].signature"}},
	}},
	{"Gemini → chat", func() adapter.Translator { return openai.NewFromGemini() }, openai.FromGeminiHints, false, []dropCase{
		{`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"seed":3,"temperature":0.5}}`, nil},
		{`{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"a","thoughtSignature":"c2ln"}]},{"role":"user","parts":[{"text":"b"}]}],` +
			`"generationConfig":{"topK":3,"mediaResolution":"MEDIA_RESOLUTION_LOW"},"safetySettings":[{"category":"HARM_CATEGORY_HATE_SPEECH","threshold":"BLOCK_NONE"}],` +
			`"serviceTier":"standard","labels":{"a":"b"}}`,
			[]string{"generationConfig.topK", "safetySettings", "contents[].parts[].thoughtSignature", "generationConfig.mediaResolution", "serviceTier", "labels"}},
		// Google reads snake_case names too: the caller is told the
		// protocol's own name.
		{`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generation_config":{"top_k":3}}`, []string{"generationConfig.topK"}},
	}},
	{"Responses → chat", func() adapter.Translator { return openai.NewFromResponses() }, openai.FromResponsesHints, false, []dropCase{
		{`{"model":"m","input":"hi","metadata":{"a":"b"},"prompt_cache_key":"k"}`, nil},
		{`{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"x"},{"role":"user","content":"hi"}],"max_tool_calls":3,"truncation":"auto"}`,
			[]string{"max_tool_calls", "truncation", "input[type=reasoning]"}},
	}},
	{"OpenAI embeddings → Gemini", func() adapter.Translator { return gemini.NewFromOpenAIEmbeddings() }, gemini.FromOpenAIEmbeddingsHints, false, []dropCase{
		{`{"model":"m","input":"hi","dimensions":8}`, nil},
		{`{"model":"m","input":"hi","user":"u"}`, []string{"user"}},
	}},
	{"Gemini embeddings → OpenAI", func() adapter.Translator { return openai.NewFromGeminiEmbed() }, openai.FromGeminiEmbedHints, false, []dropCase{
		{`{"content":{"parts":[{"text":"hi"}]},"outputDimensionality":8}`, nil},
		{`{"content":{"parts":[{"text":"hi"}]},"taskType":"RETRIEVAL_QUERY","title":"t"}`, []string{"taskType", "title"}},
	}},
	{"Gemini embeddings → OpenAI", func() adapter.Translator { return openai.NewFromGeminiEmbed() }, openai.FromGeminiEmbedHints, true, []dropCase{
		{`{"requests":[{"model":"models/m","content":{"parts":[{"text":"hi"}]},"taskType":"RETRIEVAL_DOCUMENT","title":"t"}]}`, []string{"requests[].taskType", "requests[].title"}},
	}},
}

type dropCase struct {
	body string
	want []string
}

// chatImageAndReasoning is a chat request with an image's detail and an
// assistant message's reasoning text.
const chatImageAndReasoning = `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]},` +
	`{"role":"assistant","content":"a","reasoning_content":"r"},{"role":"user","content":"b"}]}`

// Each translator names the hints of the caller's request it left out, in
// the order of its list, and nothing it carried; every hint of its list is
// sent by some case.
func TestTranslatorsNameWhatTheyDrop(t *testing.T) {
	sent := map[string][]string{}
	for _, tr := range translators {
		for _, c := range tr.cases {
			x := tr.new()
			if _, err := x.Request(&sluice.Request{Body: []byte(c.body), Batch: tr.batch}, "up"); err != nil {
				t.Errorf("%s: Request(%s) = %v", tr.row, c.body, err)
				continue
			}
			if got := x.Dropped(); !slices.Equal(got, c.want) {
				t.Errorf("%s: Dropped = %q, want %q (body %s)", tr.row, got, c.want, c.body)
			}
			sent[tr.row] = append(sent[tr.row], c.want...)
		}
	}
	for _, tr := range translators {
		for _, h := range tr.hints {
			if !slices.Contains(sent[tr.row], h) {
				t.Errorf("%s: no case sends %s", tr.row, h)
			}
		}
	}
}

// A chain names what either half drops in the caller's names, the hub's
// fields by where they came from, and not a hub field its caller-side
// half filled on its own (a Responses function's strict, true by default).
func TestChainNamesWhatItDrops(t *testing.T) {
	tests := []struct {
		name  string
		chain func() *adapter.Chain
		body  string
		want  []string
	}{
		{"gemini_on_anthropic", func() *adapter.Chain { return adapter.NewChain(openai.NewFromGemini(), anthropic.NewFromOpenAI()) },
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"topK":3,"seed":5,"frequencyPenalty":0.1,"temperature":0.5}}`,
			[]string{"generationConfig.topK", "generationConfig.seed", "generationConfig.frequencyPenalty"}},
		{"gemini_on_anthropic, snake_case", func() *adapter.Chain { return adapter.NewChain(openai.NewFromGemini(), anthropic.NewFromOpenAI()) },
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generation_config":{"seed":5}}`,
			[]string{"generationConfig.seed"}},
		{"gemini_on_responses", func() *adapter.Chain { return adapter.NewChain(openai.NewFromGemini(), responses.NewFromOpenAI()) },
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"t","thought":true},{"text":"a"}]},{"role":"user","parts":[{"text":"b"}]}],"generationConfig":{"presencePenalty":0.2}}`,
			[]string{"generationConfig.presencePenalty", "contents[].parts[].thought"}},
		{"anthropic_on_gemini", func() *adapter.Chain { return adapter.NewChain(openai.NewFromAnthropic(), gemini.NewFromOpenAI()) },
			`{"model":"m","max_tokens":10,"top_k":2,"metadata":{"user_id":"u"},"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"top_k", "tool_choice.disable_parallel_tool_use", "metadata.user_id"}},
		{"responses_on_gemini", func() *adapter.Chain { return adapter.NewChain(openai.NewFromResponses(), gemini.NewFromOpenAI()) },
			`{"model":"m","input":"hi","text":{"verbosity":"low"},"prompt_cache_key":"k","truncation":"auto","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
			[]string{"truncation", "prompt_cache_key", "text.verbosity"}},
		{"responses_on_gemini, strict sent", func() *adapter.Chain { return adapter.NewChain(openai.NewFromResponses(), gemini.NewFromOpenAI()) },
			`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":false,"parameters":{"type":"object"}}]}`,
			[]string{"tools[].strict"}},
		{"responses_on_anthropic", func() *adapter.Chain { return adapter.NewChain(openai.NewFromResponses(), anthropic.NewFromOpenAI()) },
			`{"model":"m","input":"hi"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.chain()
			if _, err := c.Request(&sluice.Request{Body: []byte(tt.body)}, "up"); err != nil {
				t.Fatal(err)
			}
			if got := c.Dropped(); !slices.Equal(got, tt.want) {
				t.Errorf("Dropped = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStrict(t *testing.T) {
	if err := adapter.Strict(nil, sluice.ProtocolOpenAIChat); err != nil {
		t.Errorf("Strict(none) = %v, want nil", err)
	}
	err := adapter.Strict([]string{"top_k", "seed"}, sluice.ProtocolOpenAIChat)
	e, ok := errors.AsType[*sluice.Error](err)
	const want = "top_k, seed cannot be carried to this model's upstream (OpenAI chat); send the request without them, or without X-Sluice-Translation: strict"
	if !ok || e.Code != sluice.CodeInvalidRequest || e.Msg != want {
		t.Errorf("Strict = %v, want invalid_request %q", err, want)
	}
}

// Sent follows members, lists and type filters, and takes null for
// absent.
func TestSent(t *testing.T) {
	body := []byte(`{"a":{"b":null,"c":0},"l":[1,{"type":"x","v":1},{"type":"y"}],"s":"text"}`)
	for path, want := range map[string]bool{
		"a": true, "a.b": false, "a.c": true, "a.d": false, "z": false,
		"l[]": true, "l[].v": true, "l[type=y]": true, "l[type=y].v": false, "l[type=z]": false,
		"s[]": false, "s.x": false, "a[]": false,
	} {
		if got := adapter.Sent(body, path); got != want {
			t.Errorf("Sent(%s) = %v, want %v", path, got, want)
		}
	}
}

// The translation rules list, per translator, what it drops and names:
// the same names, in the same order, as its Hints.
func TestTranslatorsDocumentWhatTheyDrop(t *testing.T) {
	doc, err := os.ReadFile("../../docs/translators.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## 7. What is dropped")
	if !ok {
		t.Fatal("docs/translators.md has no section \"7. What is dropped\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| ([^|`]+?) \\| (`.*`) \\|$")
	name := regexp.MustCompile("`([^`]+)`")
	documented := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, n := range name.FindAllStringSubmatch(m[2], -1) {
			documented[m[1]] = append(documented[m[1]], n[1])
		}
	}
	rows := map[string]bool{}
	for _, tr := range translators {
		rows[tr.row] = true
		if got := documented[tr.row]; !slices.Equal(got, tr.hints) {
			t.Errorf("docs/translators.md, %s: %q; the code drops %q", tr.row, got, tr.hints)
		}
	}
	for r := range documented {
		if !rows[r] {
			t.Errorf("docs/translators.md lists %q, which is no translator", r)
		}
	}
}
