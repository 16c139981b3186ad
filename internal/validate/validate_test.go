package validate

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

type validateCase struct {
	name   string
	body   string
	field  string // "" = passes
	reason string
}

func runCases(t *testing.T, p sluice.Protocol, cases []validateCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Request(p, []byte(c.body))
			switch {
			case c.field == "" && r != nil:
				t.Fatalf("refused %s: %v", c.body, r)
			case c.field == "":
				return
			case r == nil:
				t.Fatalf("passed %s, want a refusal at %s", c.body, c.field)
			case r.Field != c.field || r.Reason != c.reason || !strings.HasPrefix(r.Msg, c.field+" "):
				t.Fatalf("refusal = %+v, want field %s, reason %s, a message naming the field", r, c.field, c.reason)
			}
		})
	}
}

func TestChat(t *testing.T) {
	const call = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	runCases(t, sluice.ProtocolOpenAIChat, []validateCase{
		{"valid", `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, "", ""},
		{"tool round trip", `{"model":"m","messages":[{"role":"user","content":"hi"},` + call + `,{"role":"tool","tool_call_id":"call_1","content":"ok"}]}`, "", ""},
		{"escaped id passes", `{"model":"m","messages":[` + call + `,{"role":"tool","tool_call_id":"call\u005f1","content":"ok"}]}`, "", ""},
		{"schema", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}`, "", ""},
		{"no parameters", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, "", ""},
		{"max_tokens 1", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, "", ""},
		{"no messages", `{"model":"m"}`, "messages", ReasonEmpty},
		{"empty messages", `{"model":"m","messages":[ ]}`, "messages", ReasonEmpty},
		{"messages not array", `{"model":"m","messages":{"role":"user"}}`, "messages", ReasonEmpty},
		{"message not object", `{"model":"m","messages":[{"role":"user","content":"a"},"hi"]}`, "messages[1]", ReasonShape},
		{"unknown role", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`, "messages[1].role", ReasonRole},
		{"no role", `{"model":"m","messages":[{"content":"b"}]}`, "messages[0].role", ReasonRole},
		{"orphan tool", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_9","content":"ok"}]}`, "messages[1].tool_call_id", ReasonToolResult},
		{"tool before call", `{"model":"m","messages":[{"role":"tool","tool_call_id":"call_1","content":"ok"},` + call + `]}`, "messages[0].tool_call_id", ReasonToolResult},
		{"tool without id", `{"model":"m","messages":[` + call + `,{"role":"tool","content":"ok"}]}`, "messages[1].tool_call_id", ReasonToolResult},
		{"call by user", `{"model":"m","messages":[{"role":"user","tool_calls":[{"id":"call_1"}]},{"role":"tool","tool_call_id":"call_1","content":"ok"}]}`, "messages[1].tool_call_id", ReasonToolResult},
		{"schema not object", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "tools[0].function.parameters", ReasonToolSchema},
		{"schema not typed object", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]}`, "tools[0].function.parameters.type", ReasonToolSchema},
		{"max_tokens 0", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", ReasonMaxTokens},
		{"max_completion_tokens 0", `{"model":"m","max_completion_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_completion_tokens", ReasonMaxTokens},
	})
}

func TestMessages(t *testing.T) {
	const use = `{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]}`
	runCases(t, sluice.ProtocolAnthropic, []validateCase{
		{"valid", `{"model":"m","max_tokens":10,"system":"s","messages":[{"role":"user","content":"hi"}]}`, "", ""},
		{"tool round trip", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},` + use + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]}`, "", ""},
		{"schema", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]}`, "", ""},
		{"count_tokens without max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "", ""},
		{"empty messages", `{"model":"m","max_tokens":10,"messages":[]}`, "messages", ReasonEmpty},
		{"system role", `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":"s"}]}`, "messages[0].role", ReasonRole},
		{"message not object", `{"model":"m","max_tokens":10,"messages":[1]}`, "messages[0]", ReasonShape},
		{"orphan tool_result", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"ok"}]}]}`, "messages[0].content[0].tool_use_id", ReasonToolResult},
		{"tool_result of another id", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},` + use + `,{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"toolu_2"}]}]}`, "messages[2].content[1].tool_use_id", ReasonToolResult},
		{"schema untyped", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"properties":{}}}]}`, "tools[0].input_schema.type", ReasonToolSchema},
		{"schema array", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":[]}]}`, "tools[0].input_schema", ReasonToolSchema},
		{"max_tokens 0", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", ReasonMaxTokens},
	})
}

func TestResponses(t *testing.T) {
	const call = `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`
	runCases(t, sluice.ProtocolOpenAIResponses, []validateCase{
		{"string input", `{"model":"m","input":"hi"}`, "", ""},
		{"no input", `{"model":"m","prompt":{"id":"p1"}}`, "", ""},
		{"items", `{"model":"m","input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`, "", ""},
		{"call round trip", `{"model":"m","input":[{"role":"user","content":"hi"},` + call + `,{"type":"function_call_output","call_id":"c1","output":"ok"}]}`, "", ""},
		{"call in previous response", `{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c1","output":"ok"}]}`, "", ""},
		{"call in a conversation", `{"model":"m","conversation":"conv_1","input":[{"type":"function_call_output","call_id":"c1","output":"ok"}]}`, "", ""},
		{"call by reference", `{"model":"m","input":[{"type":"item_reference","id":"fc_1"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`, "", ""},
		{"built-in tool", `{"model":"m","input":"hi","tools":[{"type":"web_search"},{"type":"function","name":"f","parameters":{"type":"object"}}]}`, "", ""},
		{"empty string", `{"model":"m","input":""}`, "input", ReasonEmpty},
		{"empty array", `{"model":"m","input":[]}`, "input", ReasonEmpty},
		{"item not object", `{"model":"m","input":["hi"]}`, "input[0]", ReasonShape},
		{"unknown role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role", ReasonRole},
		{"orphan output", `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c2","output":"ok"}]}`, "input[1].call_id", ReasonToolResult},
		{"schema not object", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":true}]}`, "tools[0].parameters", ReasonToolSchema},
		{"max_output_tokens 0", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens", ReasonMaxTokens},
	})
}

func TestGenerate(t *testing.T) {
	const call = `{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]}`
	runCases(t, sluice.ProtocolGemini, []validateCase{
		{"valid", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "", ""},
		{"no role", `{"contents":[{"parts":[{"text":"hi"}]}]}`, "", ""},
		{"call round trip", `{"contents":[{"role":"user","parts":[{"text":"hi"}]},` + call + `,{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`, "", ""},
		{"snake case", `{"contents":[{"role":"model","parts":[{"function_call":{"name":"f"}}]},{"role":"user","parts":[{"function_response":{"name":"f","response":{}}}]}]}`, "", ""},
		{"count wrapper", `{"generateContentRequest":{"model":"models/m","contents":[{"parts":[{"text":"hi"}]}]}}`, "", ""},
		{"openapi schema", `{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"}}]}]}`, "", ""},
		{"maxOutputTokens 0 passes", `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":0}}`, "", ""},
		{"no contents", `{"generationConfig":{}}`, "contents", ReasonEmpty},
		{"empty contents", `{"contents":[]}`, "contents", ReasonEmpty},
		{"count wrapper empty", `{"generateContentRequest":{"contents":[]}}`, "contents", ReasonEmpty},
		{"content not object", `{"contents":["hi"]}`, "contents[0]", ReasonShape},
		{"assistant role", `{"contents":[{"role":"assistant","parts":[{"text":"hi"}]}]}`, "contents[0].role", ReasonRole},
		{"orphan response", `{"contents":[{"role":"user","parts":[{"text":"x"},{"functionResponse":{"name":"f","response":{}}}]}]}`, "contents[0].parts[1].functionResponse", ReasonToolResult},
		{"response of another name passes", `{"contents":[` + call + `,{"role":"user","parts":[{"functionResponse":{"name":"g"}}]}]}`, "", ""},
		{"response before its call", `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f"}}]},` + call + `]}`, "contents[0].parts[0].functionResponse", ReasonToolResult},
		{"schema not object", `{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"function_declarations":[{"name":"f","parameters_json_schema":"x"}]}]}`, "tools[0].functionDeclarations[0].parameters_json_schema", ReasonToolSchema},
	})
}

func TestEmbeddings(t *testing.T) {
	runCases(t, sluice.ProtocolOpenAIEmbeddings, []validateCase{
		{"string", `{"model":"m","input":"hi"}`, "", ""},
		{"strings", `{"model":"m","input":["a","b"]}`, "", ""},
		{"tokens", `{"model":"m","input":[[1,2],[3]]}`, "", ""},
		{"no input", `{"model":"m"}`, "input", ReasonEmpty},
		{"empty string", `{"model":"m","input":""}`, "input", ReasonEmpty},
		{"empty array", `{"model":"m","input":[]}`, "input", ReasonEmpty},
		{"empty element", `{"model":"m","input":["a",""]}`, "input[1]", ReasonEmpty},
		{"empty token list", `{"model":"m","input":[[1],[]]}`, "input[1]", ReasonEmpty},
	})
}

func TestMaxOutput(t *testing.T) {
	if r := MaxOutput("max_tokens", 100, 0, "m"); r != nil {
		t.Errorf("no limit: %v", r)
	}
	if r := MaxOutput("max_tokens", 100, 100, "m"); r != nil {
		t.Errorf("at the limit: %v", r)
	}
	r := MaxOutput("max_tokens", 101, 100, "m")
	if r == nil || r.Msg != "max_tokens must be at most 100 for model m" || r.Reason != ReasonMaxTokens {
		t.Errorf("above the limit: %+v", r)
	}
}

func TestUncheckedProtocolsPass(t *testing.T) {
	for _, p := range []sluice.Protocol{sluice.ProtocolGeminiEmbed, sluice.ProtocolOpenAIVideos, sluice.ProtocolFalQueue} {
		if r := Request(p, []byte(`{}`)); r != nil {
			t.Errorf("%s: %v", p, r)
		}
	}
}
