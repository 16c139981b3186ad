package adapter_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	"github.com/sluicehq/sluice/internal/adapter/anthropic"
	"github.com/sluicehq/sluice/internal/adapter/gemini"
	"github.com/sluicehq/sluice/internal/adapter/openai"
	"github.com/sluicehq/sluice/internal/adapter/responses"
	generate "github.com/sluicehq/sluice/internal/protocol/gemini"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
)

const golden = "testdata/chain"

// Where each upstream protocol's inputs of the golden tests are: a stream
// with thinking or reasoning, text, tool calls and usage (stream.sse), a
// whole answer (response.json) and an error (error.json).
const (
	geminiUpstream    = "anthropic_on_gemini"
	anthropicUpstream = "gemini_on_anthropic"
	responsesUpstream = "upstream/responses"
)

// The callers' last event of a complete stream.
var (
	anthropicDone = func(ev adapter.Event) bool { return ev.Name == "message_stop" }
	geminiDone    = func(ev adapter.Event) bool { return strings.Contains(string(ev.Data), `"finishReason"`) }
	responsesDone = func(ev adapter.Event) bool { return ev.Name == "response.completed" }
)

// chains are the six chained pairs, tested against golden files: the
// caller's request (with a tool call and its result) read from
// testdata/chain/<dir>/request.json, the upstream's stream (event by
// event), answer and error from the upstream's directory, and what the
// chain makes of each compared with <dir>/*.want.*.
var chains = []struct {
	dir, upstream string
	newChain      func() *adapter.Chain
	model         string
	done          func(adapter.Event) bool
}{
	{"anthropic_on_gemini", geminiUpstream, func() *adapter.Chain { return adapter.NewChain(openai.NewFromAnthropic(), gemini.NewFromOpenAI()) }, "gemini-2.5-flash", anthropicDone},
	{"gemini_on_anthropic", anthropicUpstream, func() *adapter.Chain { return adapter.NewChain(openai.NewFromGemini(), anthropic.NewFromOpenAI()) }, "claude-sonnet-4-6", geminiDone},
	{"anthropic_on_responses", responsesUpstream, func() *adapter.Chain { return adapter.NewChain(openai.NewFromAnthropic(), responses.NewFromOpenAI()) }, "gpt-5.4-mini", anthropicDone},
	{"responses_on_anthropic", anthropicUpstream, func() *adapter.Chain { return adapter.NewChain(openai.NewFromResponses(), anthropic.NewFromOpenAI()) }, "claude-sonnet-4-6", responsesDone},
	{"responses_on_gemini", geminiUpstream, func() *adapter.Chain { return adapter.NewChain(openai.NewFromResponses(), gemini.NewFromOpenAI()) }, "gemini-2.5-flash", responsesDone},
	{"gemini_on_responses", responsesUpstream, func() *adapter.Chain { return adapter.NewChain(openai.NewFromGemini(), responses.NewFromOpenAI()) }, "gpt-5.4-mini", geminiDone},
}

func TestChainGolden(t *testing.T) {
	for _, c := range chains {
		dir, up := filepath.Join(golden, c.dir), filepath.Join(golden, c.upstream)
		start := func(t *testing.T) (*adapter.Chain, []byte) {
			tr := c.newChain()
			body, err := tr.Request(&sluice.Request{Body: adaptertest.Read(t, filepath.Join(dir, "request.json")), Stream: true}, c.model)
			if err != nil {
				t.Fatal(err)
			}
			return tr, body
		}
		t.Run(c.dir+"/Request", func(t *testing.T) {
			_, body := start(t)
			adaptertest.GoldenJSON(t, filepath.Join(dir, "request.want.json"), body)
		})
		t.Run(c.dir+"/Stream", func(t *testing.T) {
			tr, _ := start(t)
			out, err := adaptertest.Stream(tr, adaptertest.Parse(adaptertest.Read(t, filepath.Join(up, "stream.sse"))))
			if err != nil || len(out) == 0 || !c.done(out[len(out)-1]) {
				t.Fatalf("Stream = %d events, %v; want the caller's complete stream", len(out), err)
			}
			for i := range out {
				out[i].Data = unstamped(out[i].Data)
			}
			adaptertest.GoldenEvents(t, filepath.Join(dir, "stream.want.sse"), out)
		})
		t.Run(c.dir+"/Response", func(t *testing.T) {
			tr, _ := start(t)
			out, err := tr.Response(adaptertest.Read(t, filepath.Join(up, "response.json")))
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.GoldenJSON(t, filepath.Join(dir, "response.want.json"), unstamped(out))
		})
		t.Run(c.dir+"/Error", func(t *testing.T) {
			adaptertest.GoldenJSON(t, filepath.Join(dir, "error.want.json"), c.newChain().Error(429, adaptertest.Read(t, filepath.Join(up, "error.json"))))
		})
	}
}

// stamp is a Responses creation time that Anthropic's translator gives its
// hub answer from the clock (Anthropic sends none).
var stamp = regexp.MustCompile(`"created_at":\d+`)

// unstamped is b with the creation time Sluice stamped on an answer whose
// upstream sent none replaced by 0 (a time the upstream sent is long past,
// and kept).
func unstamped(b []byte) []byte {
	return stamp.ReplaceAllFunc(b, func(m []byte) []byte {
		at, _ := strconv.ParseInt(string(m[len(`"created_at":`):]), 10, 64)
		if time.Since(time.Unix(at, 0)).Abs() > time.Hour {
			return m
		}
		return []byte(`"created_at":0`)
	})
}

// hubSpy is the hub side of a chain under test: it records the request it
// is given and sends an empty body.
type hubSpy struct {
	adapter.Translator
	got sluice.Request
}

func (s *hubSpy) Request(req *sluice.Request, _ string) ([]byte, error) {
	s.got = *req
	return []byte("{}"), nil
}

func (s *hubSpy) Dropped() []string { return nil }

// The hub request is a chat caller's streamed request asking for usage,
// whichever protocol the caller spoke, so that the hub-to-upstream side
// sends the usage the caller-to-hub side reports.
func TestChainHubRequest(t *testing.T) {
	callers := []struct {
		name string
		in   adapter.Translator
		body string
	}{
		{"anthropic", openai.NewFromAnthropic(), `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", openai.NewFromResponses(), `{"model":"m","stream":true,"input":"hi"}`},
		{"gemini", openai.NewFromGemini(), `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	}
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			spy := &hubSpy{}
			header := map[string][]string{"Anthropic-Beta": {"x"}}
			req := &sluice.Request{ID: "r1", Protocol: sluice.ProtocolAnthropic, Model: "alias", Body: []byte(c.body), Stream: true, Header: header}
			if _, err := adapter.NewChain(c.in, spy).Request(req, "up-model"); err != nil {
				t.Fatal(err)
			}
			var hub wire.ChatRequest
			if err := json.Unmarshal(spy.got.Body, &hub); err != nil {
				t.Fatalf("hub body %s: %v", spy.got.Body, err)
			}
			if g := spy.got; g.Protocol != sluice.ProtocolOpenAIChat || !g.Stream || !g.IncludeUsage || g.ID != "r1" || g.Model != "alias" || g.Header == nil ||
				!hub.Stream || hub.StreamOptions == nil || !hub.StreamOptions.IncludeUsage || hub.Model != "up-model" {
				t.Errorf("hub request = %+v, body %s; want chat, streamed, usage asked for in both, the rest of the caller's request", g, g.Body)
			}
			if string(req.Body) != c.body || req.Protocol != sluice.ProtocolAnthropic {
				t.Error("the caller's request was changed")
			}
		})
	}
}

// What the caller's side refuses says the model is reached through the
// hub (the refusal names chat as the upstream); what the upstream's side
// refuses is its own 400; the tools a Responses caller's side leaves out
// are named for the caller's header.
func TestChainRefusalsAndDropped(t *testing.T) {
	tr := adapter.NewChain(openai.NewFromResponses(), gemini.NewFromOpenAI())
	_, err := tr.Request(&sluice.Request{Body: []byte(`{"model":"m","input":"hi","previous_response_id":"resp_1"}`)}, "g")
	e, ok := errors.AsType[*sluice.Error](err)
	if !ok || e.Code != sluice.CodeInvalidRequest || !strings.Contains(e.Msg, "previous_response_id") || !strings.Contains(e.Msg, "through OpenAI chat") {
		t.Errorf("previous_response_id on a chained Gemini upstream: %v; want invalid_request saying the hub is in between", err)
	}

	tr = adapter.NewChain(openai.NewFromGemini(), responses.NewFromOpenAI())
	_, err = tr.Request(&sluice.Request{Body: []byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"stopSequences":["x"]}}`)}, "r")
	if e, ok := errors.AsType[*sluice.Error](err); !ok || e.Code != sluice.CodeInvalidRequest || !strings.Contains(e.Msg, "stop") {
		t.Errorf("stop sequences on a chained Responses upstream: %v; want invalid_request naming stop", err)
	}

	tr = adapter.NewChain(openai.NewFromResponses(), gemini.NewFromOpenAI())
	body, err := tr.Request(&sluice.Request{Body: []byte(`{"model":"m","input":"hi","tools":[{"type":"web_search"},{"type":"function","name":"f","parameters":{"type":"object"}}]}`)}, "g")
	if err != nil || !slices.Equal(tr.DroppedTools(), []string{"web_search"}) || !strings.Contains(string(body), `"name":"f"`) {
		t.Errorf("DroppedTools = %v (%v), body %s; want web_search dropped and f declared", tr.DroppedTools(), err, body)
	}
	if d := adapter.NewChain(openai.NewFromAnthropic(), gemini.NewFromOpenAI()).DroppedTools(); d != nil {
		t.Errorf("DroppedTools of an Anthropic caller's chain = %v, want none", d)
	}
}

// A stream error the upstream sends mid-stream reaches the caller as its
// protocol's error event, and the chain reports the stream failed.
func TestChainStreamError(t *testing.T) {
	tr := adapter.NewChain(openai.NewFromAnthropic(), gemini.NewFromOpenAI())
	if _, err := tr.Request(&sluice.Request{Body: []byte(`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`), Stream: true}, "g"); err != nil {
		t.Fatal(err)
	}
	out, err := adaptertest.Stream(tr, []adapter.Event{
		{Data: []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}],"responseId":"r"}`)},
		{Data: []byte(`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`)},
	})
	e, ok := errors.AsType[*sluice.Error](err)
	if !ok || e.Code != sluice.CodeUpstreamStreamFailed {
		t.Errorf("err = %v, want upstream_stream_failed", err)
	}
	if last := out[len(out)-1]; last.Name != "error" || !strings.Contains(string(last.Data), "The model is overloaded.") {
		t.Errorf("last event %s %s, want Anthropic's error event with Google's message", last.Name, last.Data)
	}
}

// A chained count is never asked of the chain (the upstream side answers
// it), but a whole answer is: Response runs both halves.
func TestChainResponseOrder(t *testing.T) {
	tr := adapter.NewChain(openai.NewFromGemini(), responses.NewFromOpenAI())
	if _, err := tr.Request(&sluice.Request{Body: []byte(`{"contents":[{"parts":[{"text":"hi"}]}]}`)}, "gpt-5"); err != nil {
		t.Fatal(err)
	}
	out, err := tr.Response([]byte(`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello.","annotations":[]}]}],"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}`))
	var g generate.Response
	if err != nil || json.Unmarshal(out, &g) != nil || len(g.Candidates) != 1 || g.Candidates[0].Content.Parts[0].Text != "Hello." ||
		g.Candidates[0].FinishReason != "STOP" || g.UsageMetadata == nil || g.UsageMetadata.TotalTokenCount != 7 {
		t.Errorf("Response = %s, %v; want Gemini's answer with the text, STOP and usage", out, err)
	}
}
