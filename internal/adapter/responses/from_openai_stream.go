package responses

import (
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// A Responses stream becomes a chat stream: response.created gives the
// role chunk; text and refusal deltas become content and refusal deltas;
// each function_call item becomes a tool call with the next chat index
// (its id and name when it is added, its arguments as they arrive);
// reasoning text (or its summary) becomes reasoning_content deltas;
// response.completed or response.incomplete gives the finish chunk, the
// usage chunk when the caller asked for one, and [DONE]. The other events
// (in_progress, content parts, *.done) have nothing to add to a chat
// stream.

// chatStream is the state of one Responses stream turned into a chat
// stream.
type chatStream struct {
	started bool
	id      string
	created int64
	model   string
	calls   []toolCall // by chat tool call index
}

// toolCall is one function call of the stream: the output index of its
// item and whether any of its arguments were sent.
type toolCall struct {
	outputIndex int
	argsSent    bool
}

// Event translates one Responses stream event into the chat chunks it
// makes. An upstream error (an error event, or response.failed) is passed
// on as chat's mid-stream error chunk, which ends the caller's stream:
// Event returns a *sluice.Error (upstream_stream_failed).
func (t *FromOpenAI) Event(ev adapter.Event, emit func(adapter.Event) error) error {
	if len(ev.Data) == 0 || string(ev.Data) == "[DONE]" {
		// Responses streams end with their terminal event; a [DONE]
		// before it ends nothing.
		return nil
	}
	var e openai.StreamEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return fmt.Errorf("decode responses stream event: %w", err)
	}
	if e.Type == "" {
		e.Type = ev.Name // the data repeats it, but the event's name is what names it
	}
	s := &t.stream
	if !s.started {
		// The first event is response.created, whose response names the
		// chunks; the role chunk goes first whatever comes.
		s.started = true
		if r := e.Response; r != nil {
			s.id, s.created, s.model = chatID(r.ID), r.CreatedAt, r.Model
		}
		role := ""
		if err := t.send(emit, openai.Delta{Role: "assistant", Content: &role}, nil); err != nil {
			return err
		}
	}
	switch e.Type {
	case "response.output_text.delta":
		return t.send(emit, openai.Delta{Content: &e.Delta}, nil)
	case "response.refusal.delta":
		return t.send(emit, openai.Delta{Refusal: e.Delta}, nil)
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		// The reasoning, or its summary where the upstream gives only
		// that, goes to the non-standard reasoning_content, as compatible
		// servers send it (and the other translators do).
		return t.send(emit, openai.Delta{ReasoningContent: e.Delta}, nil)
	case "response.output_item.added":
		if e.Item != nil && e.Item.Type == "function_call" {
			return t.startCall(emit, e.OutputIndex, e.Item)
		}
	case "response.function_call_arguments.delta":
		if k := s.call(e.OutputIndex); k >= 0 && e.Delta != "" {
			s.calls[k].argsSent = true
			return t.send(emit, openai.Delta{ToolCalls: []openai.ToolCall{{Index: &k, Function: openai.FunctionCall{Arguments: e.Delta}}}}, nil)
		}
	case "response.output_item.done":
		if e.Item != nil && e.Item.Type == "function_call" {
			return t.endCall(emit, e.OutputIndex, e.Item)
		}
	case "response.completed", "response.incomplete":
		return t.end(emit, e.Response)
	case "response.failed":
		eb := openai.ErrorBody{Message: "the upstream response failed", Type: "server_error"}
		if e.Response != nil && e.Response.Error != nil {
			eb.Message = e.Response.Error.Message
			eb.Code, _ = json.Marshal(e.Response.Error.Code) // a string
		}
		return t.fail(emit, eb)
	case "error":
		return t.fail(emit, openai.ErrorBody{Message: e.Message, Type: "server_error", Param: e.Param, Code: e.Code})
	}
	return nil
}

// call is the chat index of the tool call of the item at outputIndex, or -1.
func (s *chatStream) call(outputIndex int) int {
	for k, c := range s.calls {
		if c.outputIndex == outputIndex {
			return k
		}
	}
	return -1
}

// startCall sends the first chunk of a tool call: its index, id and name,
// and its arguments when the item already has them.
func (t *FromOpenAI) startCall(emit func(adapter.Event) error, outputIndex int, it *openai.OutputItem) error {
	if it.CallID == "" || it.Name == "" {
		return fmt.Errorf("responses stream: function_call item %q has no call_id or name", it.ID)
	}
	s := &t.stream
	k := len(s.calls)
	c := toolCall{outputIndex: outputIndex}
	tc := openai.ToolCall{Index: &k, ID: it.CallID, Type: "function", Function: openai.FunctionCall{Name: it.Name}}
	if it.Arguments != nil && *it.Arguments != "" {
		tc.Function.Arguments, c.argsSent = *it.Arguments, true
	}
	s.calls = append(s.calls, c)
	return t.send(emit, openai.Delta{ToolCalls: []openai.ToolCall{tc}}, nil)
}

// endCall sends what the deltas of a finished tool call did not: the
// whole call when it was never added, its arguments when none came as
// deltas (an upstream may send them whole).
func (t *FromOpenAI) endCall(emit func(adapter.Event) error, outputIndex int, it *openai.OutputItem) error {
	s := &t.stream
	k := s.call(outputIndex)
	if k < 0 {
		return t.startCall(emit, outputIndex, it)
	}
	if s.calls[k].argsSent || it.Arguments == nil || *it.Arguments == "" {
		return nil
	}
	s.calls[k].argsSent = true
	return t.send(emit, openai.Delta{ToolCalls: []openai.ToolCall{{Index: &k, Function: openai.FunctionCall{Arguments: *it.Arguments}}}}, nil)
}

// end sends the finish chunk, the usage chunk when the caller asked for
// it, and [DONE].
func (t *FromOpenAI) end(emit func(adapter.Event) error, r *openai.Response) error {
	if r == nil {
		r = &openai.Response{Status: "completed"}
	}
	if r.Usage != nil {
		t.usage = r.Usage.Sluice()
	}
	finish := finishReason(r, len(t.stream.calls) > 0)
	if err := t.send(emit, openai.Delta{}, &finish); err != nil {
		return err
	}
	if t.includeUsage && r.Usage != nil {
		if err := t.emitChunk(emit, &openai.Chunk{Choices: []openai.ChunkChoice{}, Usage: openai.UsageOf(t.usage)}); err != nil {
			return err
		}
	}
	// A new slice each time: the seam masks secrets in what it is given,
	// in place.
	return emit(adapter.Event{Data: []byte("[DONE]")})
}

// fail passes an upstream error on as chat's mid-stream error chunk, and
// returns the failure of the stream.
func (t *FromOpenAI) fail(emit func(adapter.Event) error, e openai.ErrorBody) error {
	data, err := json.Marshal(&openai.ErrorEnvelope{Error: e})
	if err != nil {
		return err
	}
	if err := emit(adapter.Event{Data: data}); err != nil {
		return err
	}
	return &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: e.Message, Err: fmt.Errorf("responses stream error %s", e.Code)}
}

// send emits a chunk of choice 0 with delta d, and finish when it ends it.
func (t *FromOpenAI) send(emit func(adapter.Event) error, d openai.Delta, finish *string) error {
	return t.emitChunk(emit, &openai.Chunk{Choices: []openai.ChunkChoice{{Delta: d, FinishReason: finish}}})
}

// emitChunk stamps c with the stream's id, created and model, and emits it.
func (t *FromOpenAI) emitChunk(emit func(adapter.Event) error, c *openai.Chunk) error {
	s := &t.stream
	c.ID, c.Object, c.Created, c.Model = s.id, "chat.completion.chunk", s.created, s.model
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return emit(adapter.Event{Data: data})
}
