package openai

import (
	"encoding/json"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

// Event translates one chunk of a chat stream into Gemini stream chunks
// (docs/translators.md, "Streams"): text and (when the caller asked for thoughts)
// reasoning as they come, each a chunk of one part; tool calls buffered
// until the finish, then one chunk of their functionCall parts, as Gemini
// sends calls whole; and at [DONE] the last chunk, with the finish reason
// and the usage. An upstream error chunk is passed on as Google's error
// object; Event then returns a *sluice.Error (upstream_stream_failed).
func (t *FromGemini) Event(ev adapter.Event, emit func(adapter.Event) error) error {
	switch {
	case len(ev.Data) == 0 || t.done:
		return nil // a keep-alive comment, or past the end
	case string(ev.Data) == "[DONE]":
		return t.end(emit)
	}
	var c wire.Chunk
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		return fmt.Errorf("openai stream chunk: %w", err)
	}
	if c.Error != nil {
		return t.streamError(c.Error, emit)
	}
	if c.Usage != nil {
		t.usage = c.Usage.Sluice()
	}
	if !t.started {
		t.started, t.id, t.model = true, c.ID, c.Model
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 { // one candidate is asked for
			continue
		}
		if err := t.delta(&ch.Delta, emit); err != nil {
			return err
		}
		if ch.FinishReason != nil {
			t.finish = *ch.FinishReason
			if err := t.flushCalls(emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// delta sends a choice's text and reasoning, and buffers its tool-call
// fragments: a fragment with an id the index has not had starts a call.
func (t *FromGemini) delta(d *wire.Delta, emit func(adapter.Event) error) error {
	if t.includeThoughts && d.ReasoningContent != "" {
		if err := t.send(emit, []gemini.Part{{Text: d.ReasoningContent, Thought: true}}, ""); err != nil {
			return err
		}
	}
	if d.Content != nil && *d.Content != "" {
		if err := t.send(emit, []gemini.Part{{Text: *d.Content}}, ""); err != nil {
			return err
		}
	}
	if d.Refusal != "" {
		t.refusal = true
		if err := t.send(emit, []gemini.Part{{Text: d.Refusal}}, ""); err != nil {
			return err
		}
	}
	for _, tc := range d.ToolCalls {
		j := 0
		if tc.Index != nil {
			j = *tc.Index
		}
		if j < 0 || j > maxToolCallIndex {
			return fmt.Errorf("openai stream chunk: tool call index %d out of range", j)
		}
		if j >= len(t.calls) {
			t.calls = append(t.calls, make([]heldCall, j+1-len(t.calls))...)
		}
		call := &t.calls[j]
		if tc.ID != "" && call.id != tc.ID {
			t.held -= len(call.args)
			*call = heldCall{id: tc.ID}
		}
		if tc.Function.Name != "" {
			call.name = tc.Function.Name
		}
		if t.held += len(tc.Function.Arguments); t.held > adapter.MaxHeldOutput {
			return t.streamError(&wire.ErrorBody{Type: "server_error", Message: adapter.HeldTooLong}, emit)
		}
		call.args = append(call.args, tc.Function.Arguments...)
	}
	return nil
}

// heldCall is a tool call whose fragments are held until the finish. Its
// arguments grow in place: joining them as strings would copy the whole
// each time, which is quadratic in the number of fragments.
type heldCall struct {
	id, name string
	args     []byte
}

// flushCalls sends the buffered tool calls, whole, in one chunk.
func (t *FromGemini) flushCalls(emit func(adapter.Event) error) error {
	if len(t.calls) == 0 {
		return nil
	}
	parts := make([]gemini.Part, 0, len(t.calls))
	for _, c := range t.calls {
		if c.name != "" { // an index no call used
			parts = append(parts, geminiCall(&wire.ToolCall{ID: c.id, Function: wire.FunctionCall{Name: c.name, Arguments: string(c.args)}}))
		}
	}
	t.calls, t.held = nil, 0
	if len(parts) == 0 {
		return nil
	}
	return t.send(emit, parts, "")
}

// end sends the calls not yet sent and the last chunk, with the finish
// reason and the usage.
func (t *FromGemini) end(emit func(adapter.Event) error) error {
	if err := t.flushCalls(emit); err != nil {
		return err
	}
	t.done = true
	return t.send(emit, []gemini.Part{}, geminiFinish(t.finish, t.refusal))
}

// streamError ends the stream with e as Google's error chunk, with the
// status e's type stands for and that status's name.
func (t *FromGemini) streamError(e *wire.ErrorBody, emit func(adapter.Event) error) error {
	t.done = true
	status := wire.TypeStatus(e.Type)
	data, err := json.Marshal(&gemini.ErrorEnvelope{Error: gemini.ErrorBody{Code: status, Message: e.Message, Status: gemini.Status(status)}})
	if err != nil {
		return err
	}
	if err := emit(adapter.Event{Data: data}); err != nil {
		return err
	}
	return &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: e.Message, Err: fmt.Errorf("openai stream error %s", e.Type)}
}

// send writes one chunk of candidate 0 with parts; the last one has the
// finish reason and the usage.
func (t *FromGemini) send(emit func(adapter.Event) error, parts []gemini.Part, finish string) error {
	out := gemini.Response{
		Candidates:   []gemini.Candidate{{Content: &gemini.Content{Role: "model", Parts: parts}, FinishReason: finish}},
		ModelVersion: t.model,
		ResponseID:   t.id,
	}
	if finish != "" {
		out.UsageMetadata = gemini.UsageOf(t.usage)
	}
	data, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	return emit(adapter.Event{Data: data})
}
