package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sluicehq/sluice"
)

func TestCodeAssistURLs(t *testing.T) {
	for _, tt := range []struct {
		base string
		req  sluice.Request
		want string
	}{
		{"https://cloudcode-pa.googleapis.com", sluice.Request{}, "https://cloudcode-pa.googleapis.com/v1internal:generateContent"},
		{"https://cloudcode-pa.googleapis.com/", sluice.Request{Stream: true}, "https://cloudcode-pa.googleapis.com/v1internal:streamGenerateContent?alt=sse"},
		{"https://cloudcode-pa.googleapis.com/v1internal", sluice.Request{CountTokens: true}, "https://cloudcode-pa.googleapis.com/v1internal:countTokens"},
	} {
		ep := &sluice.Endpoint{BaseURL: tt.base, Host: sluice.Host{Cloud: sluice.CloudCodeAssist, Project: "p-1"}}
		if got := CodeAssistGemini.target(&tt.req, ep, "gemini-2.5-pro"); got != tt.want {
			t.Errorf("%s: target = %q, want %q", tt.base, got, tt.want)
		}
	}
}

// A Gemini body goes in Code Assist's envelope with the model and the
// endpoint's project, byte for byte; a count with its contents alone.
func TestCodeAssistBody(t *testing.T) {
	ep := &sluice.Endpoint{Host: sluice.Host{Cloud: sluice.CloudCodeAssist, Project: "proj-alpha-123"}}
	const gen = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"temperature":0.2}}`
	for _, tt := range []struct {
		req  sluice.Request
		body string
		want string
	}{
		{sluice.Request{}, gen, `{"model":"gemini-2.5-pro","project":"proj-alpha-123","request":` + gen + `}`},
		{sluice.Request{Stream: true}, gen, `{"model":"gemini-2.5-pro","project":"proj-alpha-123","request":` + gen + `}`},
		{sluice.Request{CountTokens: true}, `{"contents":[{"parts":[{"text":"hi"}]}]}`,
			`{"request":{"model":"models/gemini-2.5-pro","contents":[{"parts":[{"text":"hi"}]}]}}`},
		{sluice.Request{CountTokens: true}, `{"generateContentRequest":{"model":"models/x","contents":[{"parts":[{"text":"hi"}]}],"tools":[]}}`,
			`{"request":{"model":"models/gemini-2.5-pro","contents":[{"parts":[{"text":"hi"}]}]}}`},
	} {
		got, err := CodeAssistGemini.finishBody(&tt.req, ep, "gemini-2.5-pro", []byte(tt.body))
		if err != nil || string(got) != tt.want {
			t.Errorf("%+v %s:\n got %s, %v\nwant %s", tt.req, tt.body, got, err, tt.want)
		}
	}
}

// A whole answer comes out of the envelope; a count's, which has none,
// stays as it is.
func TestCodeAssistAnswer(t *testing.T) {
	const inner = `{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`
	for body, want := range map[string]string{
		`{"response":` + inner + `,"traceId":"abc123"}`:  inner,
		`{"traceId":"abc123","response": ` + inner + `}`: inner,
		`{"totalTokens":7}`:                              `{"totalTokens":7}`,
	} {
		if got := string(codeAssistAnswer([]byte(body))); got != want {
			t.Errorf("answer %s = %s, want %s", body, got, want)
		}
	}
	if u := CodeAssistGemini.Usage([]byte(`{"promptTokenCount":3,"candidatesTokenCount":1}`)); u.PromptTokens != 3 || u.CompletionTokens != 1 {
		t.Errorf("usage = %+v", u)
	}
}

// A stream's events come out of the envelope, whatever the reads' sizes:
// keep-alives and error events as they are, events that arrived together
// in one Read.
func TestCodeAssistStream(t *testing.T) {
	const stream = ": keep-alive\n\n" +
		"data: {\"response\": {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hel\"}]}}]}, \"traceId\": \"t1\"}\r\n\r\n" +
		"data: {\"response\":{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\"}]},\"traceId\":\"t1\"}\n\n" +
		"data: {\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":\"UNAVAILABLE\"}}\n\n"
	const want = ": keep-alive\n\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hel\"}]}}]}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\"}]}\n\n" +
		"data: {\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":\"UNAVAILABLE\"}}\n\n"
	h := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
	for name, body := range map[string]io.Reader{
		"whole":         strings.NewReader(stream),
		"byte by byte":  iotest.OneByteReader(strings.NewReader(stream)),
		"half and half": io.MultiReader(strings.NewReader(stream[:60]), strings.NewReader(stream[60:])),
	} {
		r, err := codeAssistUnframe(h, body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(iotest.OneByteReader(r))
		if err != nil || string(got) != want {
			t.Errorf("%s: read %q, %v\nwant %q", name, got, err, want)
		}
	}
	r, _ := codeAssistUnframe(h, strings.NewReader(stream))
	buf := make([]byte, 4096)
	if n, _ := r.Read(buf); string(buf[:n]) != want {
		t.Errorf("events that arrived together: one Read gave %q", buf[:n])
	}
	if _, err := codeAssistUnframe(http.Header{"Content-Type": {"application/json"}}, strings.NewReader("{}")); err == nil {
		t.Error("a stream answered as JSON was read")
	}
}

// Code Assist takes a Google access token, or a static secret holding
// one, as a bearer token, and no API key.
func TestCodeAssistPresentation(t *testing.T) {
	h := http.Header{}
	CodeAssistGemini.presentToken(h, http.Header{"X-Goog-Api-Key": {"caller"}}, &sluice.Credential{}, "ya29.tok")
	if h.Get("Authorization") != "Bearer ya29.tok" || h.Get("X-Goog-Api-Key") != "" {
		t.Errorf("token: %v", h)
	}
	h = http.Header{}
	if _, err := CodeAssistGemini.present(h, nil, &sluice.Credential{Secret: "ya29.static"}); err != nil || h.Get("Authorization") != "Bearer ya29.static" {
		t.Errorf("static secret: %v %v", h, err)
	}
}
