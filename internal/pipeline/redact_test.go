package pipeline

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redact"
)

func maskEmails(t *testing.T) *redact.Session {
	t.Helper()
	p, err := redact.Compile(redact.Spec{Detectors: map[string]string{"email": "mask"}, Restore: true})
	if err != nil {
		t.Fatal(err)
	}
	return p.NewSession()
}

// TestTextPathsReachEveryTextPart masks an address in every place each
// protocol's request holds text, and nowhere else (a tool's name, a
// model, an image URL keep theirs).
func TestTextPathsReachEveryTextPart(t *testing.T) {
	cases := []struct {
		protocol   sluice.Protocol
		body, want string
	}{
		{sluice.ProtocolOpenAIChat,
			`{"model":"a@b.io","messages":[{"role":"system","content":"sys a@b.io"},{"role":"user","content":[{"type":"text","text":"u a@b.io"},{"type":"image_url","image_url":{"url":"https://x.io/a@b.io"}}]},{"role":"tool","tool_call_id":"c1","content":"r c@d.io"}]}`,
			`{"model":"a@b.io","messages":[{"role":"system","content":"sys [EMAIL_1]"},{"role":"user","content":[{"type":"text","text":"u [EMAIL_1]"},{"type":"image_url","image_url":{"url":"https://x.io/a@b.io"}}]},{"role":"tool","tool_call_id":"c1","content":"r [EMAIL_2]"}]}`},
		{sluice.ProtocolAnthropic,
			`{"model":"m","system":[{"type":"text","text":"s a@b.io"}],"messages":[{"role":"user","content":"u a@b.io"},{"role":"assistant","content":[{"type":"text","text":"x c@d.io"},{"type":"tool_use","id":"t","name":"a@b.io","input":{}}]}]}`,
			`{"model":"m","system":[{"type":"text","text":"s [EMAIL_1]"}],"messages":[{"role":"user","content":"u [EMAIL_1]"},{"role":"assistant","content":[{"type":"text","text":"x [EMAIL_2]"},{"type":"tool_use","id":"t","name":"a@b.io","input":{}}]}]}`},
		{sluice.ProtocolAnthropic, `{"model":"m","system":"s a@b.io","messages":[]}`, `{"model":"m","system":"s [EMAIL_1]","messages":[]}`},
		{sluice.ProtocolAnthropic,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r a@b.io"},{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"q c@d.io"}]}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r [EMAIL_1]"},{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"q [EMAIL_2]"}]}]}]}`},
		{sluice.ProtocolOpenAIResponses, `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"o a@b.io"}]}`,
			`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"o [EMAIL_1]"}]}`},
		{sluice.ProtocolOpenAIResponses,
			`{"model":"m","instructions":"i a@b.io","input":[{"role":"user","content":[{"type":"input_text","text":"u c@d.io"}]},{"role":"user","content":"v a@b.io"}]}`,
			`{"model":"m","instructions":"i [EMAIL_1]","input":[{"role":"user","content":[{"type":"input_text","text":"u [EMAIL_2]"}]},{"role":"user","content":"v [EMAIL_1]"}]}`},
		{sluice.ProtocolOpenAIResponses, `{"model":"m","input":"only a@b.io"}`, `{"model":"m","input":"only [EMAIL_1]"}`},
		{sluice.ProtocolGemini,
			`{"systemInstruction":{"parts":[{"text":"s a@b.io"}]},"contents":[{"role":"user","parts":[{"text":"u \u0061@b.io"},{"inlineData":{"mimeType":"text/plain","data":"YUBiLmlv"}}]}]}`,
			`{"systemInstruction":{"parts":[{"text":"s [EMAIL_1]"}]},"contents":[{"role":"user","parts":[{"text":"u [EMAIL_1]"},{"inlineData":{"mimeType":"text/plain","data":"YUBiLmlv"}}]}]}`},
		{sluice.ProtocolGemini, `{"system_instruction":{"parts":[{"text":"s a@b.io"}]},"contents":[]}`, `{"system_instruction":{"parts":[{"text":"s [EMAIL_1]"}]},"contents":[]}`},
	}
	for _, c := range cases {
		s := maskEmails(t)
		got, err := rewriteStrings([]byte(c.body), textPaths[c.protocol], func(text string) string { out, _ := s.Apply(text); return out })
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", c.protocol, got, err, c.want)
		}
	}
}

func TestRewriteStringsKeepsABodyWithoutFindings(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"nothing here"}]}`)
	s := maskEmails(t)
	got, err := rewriteStrings(body, textPaths[sluice.ProtocolOpenAIChat], func(text string) string { out, _ := s.Apply(text); return out })
	if err != nil || &got[0] != &body[0] {
		t.Errorf("a body without findings was copied (%v)", err)
	}
}

// restoreThrough writes events through a restorer, each in its own
// Write, and returns what the caller got.
func restoreThrough(t *testing.T, s *redact.Session, p sluice.Protocol, contentType string, writes ...string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r := newRestorer(rec, s, p)
	r.Header().Set("Content-Type", contentType)
	r.Header().Set("Content-Length", "123")
	r.WriteHeader(http.StatusOK)
	for _, w := range writes {
		if _, err := r.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	r.finish()
	if rec.Header().Get("Content-Length") != "" {
		t.Error("the upstream's Content-Length was passed on")
	}
	return rec.Body.String()
}

func TestRestorerStreams(t *testing.T) {
	s := maskEmails(t)
	s.Apply("x@y.io")
	cases := []struct {
		name     string
		protocol sluice.Protocol
		writes   []string
		want     string
	}{
		{"chat, split across events and writes, held until the finish chunk", sluice.ProtocolOpenAIChat,
			[]string{"data: {\"choices\":[{\"delta\":{\"content\":\"to [EM\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"con", "tent\":\"AIL_1] [\"}}]}\n\n",
				"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"},
			"data: {\"choices\":[{\"delta\":{\"content\":\"to \"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x@y.io \"}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"content\":\"[\"}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"},
		{"messages, CRLF events", sluice.ProtocolAnthropic,
			[]string{"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"[EMAIL\"}}\r\n\r\n",
				"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"_1]\"}}\r\n\r\n"},
			"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}\r\n\r\n" +
				"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x@y.io\"}}\r\n\r\n"},
		{"responses: text deltas through the stream, the completed response whole", sluice.ProtocolOpenAIResponses,
			[]string{"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"[EMAIL_\"}\n\n",
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"1]\"}\n\n",
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"content\":[{\"text\":\"[EMAIL_1]\"}]}]}}\n\n"},
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\"}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x@y.io\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"content\":[{\"text\":\"x@y.io\"}]}]}}\n\n"},
		{"gemini, a fragment at the end of the stream", sluice.ProtocolGemini,
			[]string{"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"[EMAIL_1] [EMA\"}]}}]}\n\n"},
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x@y.io \"}]}}]}\n\n" +
				"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"[EMA\"}]}}]}\n\n"},
	}
	for _, c := range cases {
		if got := restoreThrough(t, s, c.protocol, "text/event-stream", c.writes...); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestRestorerWithoutWriteHeader(t *testing.T) {
	s := maskEmails(t)
	s.Apply("x@y.io")
	rec := httptest.NewRecorder()
	r := newRestorer(rec, s, sluice.ProtocolOpenAIChat)
	r.Header().Set("Content-Type", "text/event-stream")
	r.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"[EMAIL_1]\"}}]}\n\n"))
	if got, want := rec.Body.String(), "data: {\"choices\":[{\"delta\":{\"content\":\"x@y.io\"}}]}\n\n"; got != want {
		t.Errorf("an event written before any WriteHeader: got %q, want %q at once", got, want)
	}
}

func TestRestorerLeavesAnAnswerNeverBegun(t *testing.T) {
	rec := httptest.NewRecorder()
	newRestorer(rec, maskEmails(t), sluice.ProtocolOpenAIChat).finish()
	if rec.Flushed || rec.Body.Len() > 0 {
		t.Error("finish wrote or flushed an answer no attempt began")
	}
}

func TestRestorerJSON(t *testing.T) {
	s := maskEmails(t)
	s.Apply("x@y.io")
	got := restoreThrough(t, s, sluice.ProtocolOpenAIChat, "application/json", `{"choices":[{"message":{"content":"mail [EMA`, `IL_1] now"}}]}`)
	if want := `{"choices":[{"message":{"content":"mail x@y.io now"}}]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
