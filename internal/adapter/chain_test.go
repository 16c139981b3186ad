package adapter_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	"github.com/sluicehq/sluice/internal/adapter/anthropic"
	"github.com/sluicehq/sluice/internal/adapter/gemini"
	"github.com/sluicehq/sluice/internal/adapter/gemini/generate"
	"github.com/sluicehq/sluice/internal/adapter/openai"
	"github.com/sluicehq/sluice/internal/adapter/responses"
)

const golden = "testdata/chain"

// chains are the pairs tested against golden files: a request, a stream
// with thinking, text, tool calls and usage, a whole answer and an error,
// each read from and compared with testdata/chain/<dir>.
var chains = []struct {
	dir      string
	newChain func() *adapter.Chain
	model    string
	// done reports the caller's last event of a complete stream.
	done func(adapter.Event) bool
}{
	{
		dir:      "anthropic_on_gemini",
		newChain: func() *adapter.Chain { return adapter.NewChain(openai.NewFromAnthropic(), gemini.NewFromOpenAI()) },
		model:    "gemini-2.5-flash",
		done:     func(ev adapter.Event) bool { return ev.Name == "message_stop" },
	},
	{
		dir:      "gemini_on_anthropic",
		newChain: func() *adapter.Chain { return adapter.NewChain(openai.NewFromGemini(), anthropic.NewFromOpenAI()) },
		model:    "claude-sonnet-4-6",
		done:     func(ev adapter.Event) bool { return strings.Contains(string(ev.Data), `"finishReason"`) },
	},
}

func TestChainGolden(t *testing.T) {
	for _, c := range chains {
		dir := filepath.Join(golden, c.dir)
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
			out, err := adaptertest.Stream(tr, adaptertest.Parse(adaptertest.Read(t, filepath.Join(dir, "stream.sse"))))
			if err != nil || len(out) == 0 || !c.done(out[len(out)-1]) {
				t.Fatalf("Stream = %d events, %v; want the caller's complete stream", len(out), err)
			}
			adaptertest.GoldenEvents(t, filepath.Join(dir, "stream.want.sse"), out)
		})
		t.Run(c.dir+"/Response", func(t *testing.T) {
			tr, _ := start(t)
			out, err := tr.Response(adaptertest.Read(t, filepath.Join(dir, "response.json")))
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.GoldenJSON(t, filepath.Join(dir, "response.want.json"), out)
		})
		t.Run(c.dir+"/Error", func(t *testing.T) {
			adaptertest.GoldenJSON(t, filepath.Join(dir, "error.want.json"), c.newChain().Error(429, adaptertest.Read(t, filepath.Join(dir, "error.json"))))
		})
	}
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
			var hub openai.ChatRequest
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
	if err != nil || !slices.Equal(tr.Dropped(), []string{"web_search"}) || !strings.Contains(string(body), `"name":"f"`) {
		t.Errorf("Dropped = %v (%v), body %s; want web_search dropped and f declared", tr.Dropped(), err, body)
	}
	if d := adapter.NewChain(openai.NewFromAnthropic(), gemini.NewFromOpenAI()).Dropped(); d != nil {
		t.Errorf("Dropped of an Anthropic caller's chain = %v, want none", d)
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
