package validate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// chatBody is a valid chat request of about size bytes: a system prompt,
// a tool round trip and user turns of prose, with a tool declared.
func chatBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":256,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}],"messages":[`)
	b.WriteString(`{"role":"system","content":"You are helpful."},{"role":"user","content":"look it up"},`)
	b.WriteString(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},`)
	b.WriteString(`{"role":"tool","tool_call_id":"call_1","content":"found"}`)
	for i := 0; b.Len() < size-80; i++ {
		fmt.Fprintf(&b, `,{"role":"user","content":"%s"}`, strings.Repeat("lorem ipsum dolor sit amet ", 8))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// A valid request costs no allocation, of any protocol checked.
func TestValidRequestsDoNotAllocate(t *testing.T) {
	bodies := map[sluice.Protocol]string{
		sluice.ProtocolOpenAIChat:       string(chatBody(4 << 10)),
		sluice.ProtocolAnthropic:        `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`,
		sluice.ProtocolOpenAIResponses:  `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
		sluice.ProtocolGemini:           `{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"}}]}]}`,
		sluice.ProtocolOpenAIEmbeddings: `{"model":"m","input":["a","b"]}`,
	}
	for p, s := range bodies {
		body := []byte(s)
		if r := Request(p, body); r != nil {
			t.Fatalf("%s refused: %v", p, r)
		}
		if n := testing.AllocsPerRun(50, func() { Request(p, body) }); n != 0 {
			t.Errorf("%s: %v allocations per valid request, want 0", p, n)
		}
	}
}

func BenchmarkChat(b *testing.B) {
	for _, size := range []int{1 << 10, 32 << 10} {
		body := chatBody(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if Request(sluice.ProtocolOpenAIChat, body) != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}

// Validation never panics, whatever the body (ingress passes it only
// valid JSON, but the checks must not rely on it to stay up).
func FuzzRequest(f *testing.F) {
	f.Add(string(chatBody(1 << 10)))
	f.Add(`{"messages":[{"role":"tool","tool_call_id":"\"x"}],"tools":[{"function":{"parameters":{"type":1}}}]}`)
	f.Add(`{"contents":[{"parts":[{"functionResponse":{"name":"f"}}]}],"generateContentRequest":{}}`)
	f.Add(`{"input":[{"type":"function_call_output","call_id":"c"},[],"`)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"tool_result"}]}],"max_tokens":0}`)
	protocols := []sluice.Protocol{sluice.ProtocolOpenAIChat, sluice.ProtocolAnthropic, sluice.ProtocolOpenAIResponses, sluice.ProtocolGemini, sluice.ProtocolOpenAIEmbeddings}
	f.Add(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"image"}]},{"type":"image"}]}]}`)
	f.Add(`{"contents":[{"parts":[{"functionResponse":{"parts":[{"inline_data":{"mime_type":"image/png"}}]}},{"fileData":{"mimeType":"image/"}}]}]}`)
	f.Add(`{"input":[{"content":[{"type":"input_image"}]},{"output":[{"type":"input_image"}]}],"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		for _, p := range protocols {
			if r := Request(p, []byte(body)); r != nil && (r.Field == "" || r.Reason == "" || !strings.HasPrefix(r.Msg, r.Field)) {
				t.Fatalf("%s: refusal %+v does not name its field", p, r)
			}
			im, r := Scan(p, []byte(body))
			if (r == nil) != (Request(p, []byte(body)) == nil) {
				t.Fatalf("%s: Scan refuses %v, Request does not agree", p, r)
			}
			if im.Found() && (strings.Contains(im.Field(), "%!") || !strings.HasPrefix(im.Refusal("m").Msg, im.Field()+" ")) {
				t.Fatalf("%s: image at %q, refusal %+v", p, im.Field(), im.Refusal("m"))
			}
		}
	})
}
