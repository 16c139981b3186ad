package adapter_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	"github.com/sluicehq/sluice/internal/adapter/anthropic"
	"github.com/sluicehq/sluice/internal/adapter/gemini"
	"github.com/sluicehq/sluice/internal/adapter/openai"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
)

// FuzzChainRoundTrip sends a valid chat stream (adaptertest.ChatStream)
// round the matrix: to an Anthropic stream (openai.FromAnthropic), through
// the chain of a Gemini caller on an Anthropic upstream, and from the
// Gemini stream back to chat (gemini.FromOpenAI). The chain never fails on
// a valid stream, its Gemini stream ends once with a finish, and what comes
// back says what went in: text (refusals become text on the way, as
// Anthropic has no refusal delta), reasoning, each tool call's id, name
// and arguments (kept as {"_raw": …} when they are not a JSON object,
// which Gemini requires), and usage.
func FuzzChainRoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 2, 3, 3, 2, 8, 13, 0})
	f.Add([]byte{4, 4, 0, 1, 0, 2, 3})
	f.Add([]byte{2, 2, 3, 8, 13, 18})
	f.Fuzz(roundTrip)
}

// maxParallelCalls is the most tool calls a chat stream may start that
// the translators take (openai's maxToolCallIndex, 1<<10, is the last index).
const maxParallelCalls = 1<<10 + 1

// roundTrip is FuzzChainRoundTrip on one stream of ops.
func roundTrip(t *testing.T, ops []byte) {
	calls := 0
	for _, op := range ops {
		if op%5 == 2 { // adaptertest.ChatStream's new tool call
			calls++
		}
	}
	if calls > maxParallelCalls {
		// More parallel calls than the translators take, which they
		// refuse (a chat tool call's index sizes a slice).
		t.Skip()
	}
	in := adaptertest.ChatStream(ops)
	toAnthropic := openai.NewFromAnthropic()
	if _, err := toAnthropic.Request(&sluice.Request{Body: []byte(`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)}, "m"); err != nil {
		t.Fatal(err)
	}
	upstream, err := adaptertest.Stream(toAnthropic, in)
	if err != nil || !adaptertest.Ends(upstream, "message_stop") {
		t.Fatalf("to Anthropic: %v; want nil, ending message_stop", err)
	}

	chain := adapter.NewChain(openai.NewFromGemini(), anthropic.NewFromOpenAI())
	geminiBody := `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`
	if _, err := chain.Request(&sluice.Request{Body: []byte(geminiBody), Stream: true}, "claude"); err != nil {
		t.Fatal(err)
	}
	mid, err := adaptertest.Stream(chain, upstream)
	if err != nil {
		t.Fatalf("chain: %v", err)
	}
	for i, ev := range mid {
		if finished := strings.Contains(string(ev.Data), `"finishReason"`); finished != (i == len(mid)-1) {
			t.Fatalf("Gemini event #%d of %d finished=%v: %s; want the last one only", i, len(mid), finished, ev.Data)
		}
	}

	back := gemini.NewFromOpenAI()
	if _, err := back.Request(&sluice.Request{Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`), Stream: true}, "g"); err != nil {
		t.Fatal(err)
	}
	out, err := adaptertest.Stream(back, mid)
	if err != nil || !adaptertest.Ends(out, "") {
		t.Fatalf("back to chat: %v; want nil, ending [DONE]", err)
	}
	if got, want := said(t, out), said(t, in); got != want {
		t.Errorf("round trip says\n%s\nwant\n%s", got, want)
	}
}

// said is what a chat stream says: its text with its refusals, its
// reasoning, each tool call's id, name and arguments, and its usage.
func said(t *testing.T, evs []adapter.Event) string {
	t.Helper()
	var text, reasoning strings.Builder
	var calls, args []string
	var usage *wire.ChatUsage
	for _, ev := range evs[:len(evs)-1] { // [DONE] last
		var c wire.Chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			text.WriteString(ch.Delta.Refusal)
			reasoning.WriteString(ch.Delta.ReasoningContent)
			for _, tc := range ch.Delta.ToolCalls {
				if *tc.Index == len(calls) {
					calls, args = append(calls, tc.ID+" "+tc.Function.Name+" "), append(args, "")
				}
				args[*tc.Index] += tc.Function.Arguments
			}
		}
	}
	for i := range calls {
		calls[i] += objectArgs(t, args[i])
	}
	u := "none"
	if usage != nil {
		u = strings.Join([]string{itoa(usage.PromptTokens), itoa(usage.CompletionTokens)}, "/")
	}
	return "text: " + text.String() + "\nreasoning: " + reasoning.String() + "\ncalls: " + strings.Join(calls, "; ") + "\nusage: " + u
}

// objectArgs is a call's arguments as a compact JSON object: as they are
// when they are one, {} when there are none, else under "_raw" (the
// translators' policy).
func objectArgs(t *testing.T, args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	var b bytes.Buffer
	if strings.HasPrefix(strings.TrimSpace(args), "{") && json.Compact(&b, []byte(args)) == nil {
		return b.String()
	}
	raw, err := json.Marshal(map[string]string{"_raw": args})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
