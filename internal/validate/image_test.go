package validate

import (
	"testing"

	"github.com/sluicehq/sluice"
)

func TestScanFindsTheFirstImage(t *testing.T) {
	const png = `"data:image/png;base64,iVBORw0KGgo="`
	tests := []struct {
		name     string
		protocol sluice.Protocol
		body     string
		want     string // the image's field; "" = none
	}{
		{"chat text", sluice.ProtocolOpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ""},
		{"chat text parts", sluice.ProtocolOpenAIChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"image_url"}]}]}`, ""},
		{"chat image", sluice.ProtocolOpenAIChat, `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":` + png + `}}]}]}`, "messages[1].content[1]"},
		{"chat first of two", sluice.ProtocolOpenAIChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/b.png"}}]}]}`, "messages[0].content[0]"},
		{"chat escaped type is left to the upstream", sluice.ProtocolOpenAIChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image\u005furl","image_url":{"url":"https://x/a.png"}}]}]}`, ""},
		{"responses text", sluice.ProtocolOpenAIResponses, `{"model":"m","input":"hi"}`, ""},
		{"responses input_text", sluice.ProtocolOpenAIResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`, ""},
		{"responses input_image", sluice.ProtocolOpenAIResponses, `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"message","role":"user","content":[{"type":"input_text","text":"and?"},{"type":"input_image","image_url":` + png + `}]}]}`, "input[1].content[1]"},
		{"responses image in a function output", sluice.ProtocolOpenAIResponses, `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"shot","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","file_id":"file_1"}]}]}`, "input[1].output[0]"},
		{"messages text", sluice.ProtocolAnthropic, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"image"}]}]}`, ""},
		{"messages image", sluice.ProtocolAnthropic, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"what?"}]}]}`, "messages[0].content[0]"},
		{"messages image in a tool_result", sluice.ProtocolAnthropic, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"shoot"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"here"},{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]}]}]}`, "messages[2].content[0].content[1]"},
		{"messages document", sluice.ProtocolAnthropic, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, ""},
		{"gemini text", sluice.ProtocolGemini, `{"contents":[{"parts":[{"text":"hi"}]}]}`, ""},
		{"gemini inlineData", sluice.ProtocolGemini, `{"contents":[{"role":"user","parts":[{"text":"what?"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}]}]}`, "contents[0].parts[1]"},
		{"gemini snake case fileData", sluice.ProtocolGemini, `{"contents":[{"parts":[{"file_data":{"mime_type":"IMAGE/JPEG","file_uri":"gs://b/a.jpg"}}]}]}`, "contents[0].parts[0]"},
		{"gemini audio", sluice.ProtocolGemini, `{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/wav","data":"UklGRg=="}}]}]}`, ""},
		{"gemini fileData without a type", sluice.ProtocolGemini, `{"contents":[{"parts":[{"fileData":{"fileUri":"gs://b/a"}}]}]}`, ""},
		{"gemini image in a functionResponse", sluice.ProtocolGemini, `{"contents":[{"role":"model","parts":[{"functionCall":{"name":"shot"}}]},{"role":"user","parts":[{"functionResponse":{"name":"shot","response":{},"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}]}}]}]}`, "contents[1].parts[0].functionResponse.parts[0]"},
		{"gemini count wrapper", sluice.ProtocolGemini, `{"generateContentRequest":{"contents":[{"parts":[{"inlineData":{"mimeType":"image/webp","data":"UklGRg=="}}]}]}}`, "contents[0].parts[0]"},
		{"embeddings", sluice.ProtocolOpenAIEmbeddings, `{"model":"m","input":"image_url"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, r := Scan(tt.protocol, []byte(tt.body))
			if r != nil {
				t.Fatalf("refused: %v", r)
			}
			if got := field(im); got != tt.want {
				t.Errorf("Scan found an image at %q, want %q", got, tt.want)
			}
			if Request(tt.protocol, []byte(tt.body)) != nil {
				t.Errorf("Request refused what Scan passed")
			}
		})
	}
}

// field is im's field, "" when there is none.
func field(im Image) string {
	if !im.Found() {
		return ""
	}
	return im.Field()
}

// A refusal comes first: Scan reports no image for a body Request refuses.
func TestScanRefusesAsRequest(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},{"role":"robot","content":"x"}]}`)
	im, r := Scan(sluice.ProtocolOpenAIChat, body)
	if r == nil || r.Field != "messages[1].role" || im.Found() {
		t.Errorf("Scan = %+v, %v; want no image and the role refusal", im, r)
	}
}

func TestImageRefusal(t *testing.T) {
	im, _ := Scan(sluice.ProtocolAnthropic, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`))
	r := im.Refusal("text-only")
	if r.Field != "messages[0].content[0]" || r.Reason != ReasonImage || r.Msg != "messages[0].content[0] is an image, and no deployment of model text-only takes images" {
		t.Errorf("Refusal = %+v", r)
	}
}

// Looking for images costs a valid request no allocation, with an image
// or without.
func TestScanDoesNotAllocate(t *testing.T) {
	tests := []struct {
		protocol sluice.Protocol
		body     string
	}{
		{sluice.ProtocolOpenAIChat, string(chatBody(4 << 10))},
		{sluice.ProtocolOpenAIChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`},
		{sluice.ProtocolAnthropic, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{}}]}]}]}`},
		{sluice.ProtocolOpenAIResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png"}]}]}`},
		{sluice.ProtocolGemini, `{"contents":[{"parts":[{"text":"a"},{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`},
	}
	for _, tt := range tests {
		body := []byte(tt.body)
		if n := testing.AllocsPerRun(50, func() { Scan(tt.protocol, body) }); n != 0 {
			t.Errorf("%s: %v allocations per Scan, want 0", tt.protocol, n)
		}
	}
}
