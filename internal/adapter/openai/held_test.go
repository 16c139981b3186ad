package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
)

// heldStream is a chat stream of text deltas of n bytes in all, then a
// tool call whose arguments are args bytes, in pieces of 64 KiB.
func heldStream(text, args int) []adapter.Event {
	const piece = 64 << 10
	chunk := func(delta string) adapter.Event {
		return adapter.Event{Data: []byte(`{"id":"c","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`)}
	}
	var evs []adapter.Event
	for n := 0; n < text; n += piece {
		evs = append(evs, chunk(`{"content":"`+strings.Repeat("a", min(piece, text-n))+`"}`))
	}
	evs = append(evs, chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":\""}}]}`))
	for n := 0; n < args; n += piece {
		evs = append(evs, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"`+strings.Repeat("b", min(piece, args-n))+`"}}]}`))
	}
	evs = append(evs, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}`),
		adapter.Event{Data: []byte(`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)},
		adapter.Event{Data: []byte("[DONE]")})
	return evs
}

// TestHeldOutputIsBounded (issue #24 item 5): the translators that hold
// a stream's output to repeat it (a Responses caller's final events, a
// Gemini caller's whole tool calls) hold at most adapter.MaxHeldOutput of
// it; past that the stream ends with the caller's error event, and
// Event's error. Under the limit the stream completes.
func TestHeldOutputIsBounded(t *testing.T) {
	const max = adapter.MaxHeldOutput
	tests := []struct {
		name       string
		new        func() adapter.Translator
		text, args int
		fails      bool
		wantLast   string // in the last event's data
	}{
		{"responses, text under", func() adapter.Translator { return NewFromResponses() }, max - 1<<20, 1 << 10, false, `"type":"response.completed"`},
		{"responses, text over", func() adapter.Translator { return NewFromResponses() }, max + 1, 0, true, `"code":"output_too_long"`},
		{"responses, arguments over", func() adapter.Translator { return NewFromResponses() }, 1 << 10, max, true, `"code":"output_too_long"`},
		{"gemini, arguments under", func() adapter.Translator { return NewFromGemini() }, max, max - 1<<10, false, `"finishReason":"STOP"`},
		{"gemini, arguments over", func() adapter.Translator { return NewFromGemini() }, 1 << 10, max + 1, true, `"status":"INTERNAL"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tt.new()
			var last adapter.Event
			var emitted int
			var err error
			for _, ev := range heldStream(tt.text, tt.args) {
				if err = tr.Event(ev, func(e adapter.Event) error { last, emitted = e, emitted+len(e.Data); return nil }); err != nil {
					break
				}
			}
			if failed := errors.Is(err, &sluice.Error{Code: sluice.CodeUpstreamStreamFailed}); failed != tt.fails {
				t.Fatalf("Event = %v; want failed %v", err, tt.fails)
			}
			if !strings.Contains(string(last.Data), tt.wantLast) {
				t.Errorf("last event %.300s; want %s", last.Data, tt.wantLast)
			}
			if tt.fails && emitted > max+max/2 {
				t.Errorf("emitted %d bytes before failing; want little past the %d held", emitted, max)
			}
			t.Logf("%d bytes emitted", emitted)
		})
	}
}
