package anthropic

import (
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	messages "github.com/sluicehq/sluice/internal/protocol/anthropic"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// Event translates one event of a Messages stream into chat chunks
// (docs/translators.md, "Streams"). An upstream error event is passed on as
// OpenAI's mid-stream error; Event then returns a
// *sluice.Error (upstream_stream_failed), the stream having failed.
func (t *FromOpenAI) Event(ev adapter.Event, emit func(adapter.Event) error) error {
	if len(ev.Data) == 0 {
		return nil // a keep-alive comment
	}
	var in messages.StreamEvent
	if err := json.Unmarshal(ev.Data, &in); err != nil {
		return fmt.Errorf("anthropic stream event %q: %w", ev.Name, err)
	}
	switch in.Type {
	case "message_start":
		if in.Message != nil {
			t.id, t.model = in.Message.ID, in.Message.Model
			t.usage, t.measured = in.Message.Usage, true
		}
		t.created = t.now().Unix()
		empty := ""
		return t.chunk(emit, openai.Delta{Role: "assistant", Content: &empty})
	case "content_block_start":
		return t.blockStart(&in, emit)
	case "content_block_delta":
		return t.blockDelta(&in, emit)
	case "message_delta":
		if in.Delta != nil && in.Delta.StopReason != nil {
			t.stopReason = *in.Delta.StopReason
		}
		if len(in.Usage) > 0 {
			if err := json.Unmarshal(in.Usage, &t.usage); err != nil {
				return fmt.Errorf("anthropic message_delta usage: %w", err)
			}
			t.measured = true
		}
		return nil
	case "message_stop":
		return t.finish(emit)
	case "error":
		return t.streamError(&in, emit)
	}
	return nil // ping, content_block_stop and event types added later
}

func (t *FromOpenAI) blockStart(in *messages.StreamEvent, emit func(adapter.Event) error) error {
	b := in.ContentBlock
	if b == nil {
		return nil
	}
	switch b.Type {
	case "text":
		if b.Text != "" {
			return t.chunk(emit, openai.Delta{Content: &b.Text})
		}
	case "thinking":
		if b.Thinking != "" {
			return t.chunk(emit, openai.Delta{ReasoningContent: b.Thinking})
		}
	case "tool_use":
		if t.toolIndex == nil {
			t.toolIndex = make(map[int]int)
		}
		k := t.nextTool
		t.toolIndex[in.Index] = k
		t.nextTool++
		return t.chunk(emit, openai.Delta{ToolCalls: []openai.ToolCall{{Index: &k, ID: b.ID, Type: "function",
			Function: openai.FunctionCall{Name: b.Name}}}})
	}
	return nil // redacted thinking, server-tool blocks: no OpenAI field
}

func (t *FromOpenAI) blockDelta(in *messages.StreamEvent, emit func(adapter.Event) error) error {
	d := in.Delta
	if d == nil {
		return nil
	}
	switch d.Type {
	case "text_delta":
		return t.chunk(emit, openai.Delta{Content: &d.Text})
	case "thinking_delta":
		return t.chunk(emit, openai.Delta{ReasoningContent: d.Thinking})
	case "input_json_delta":
		k, ok := t.toolIndex[in.Index]
		if !ok || d.PartialJSON == "" {
			return nil
		}
		return t.chunk(emit, openai.Delta{ToolCalls: []openai.ToolCall{{Index: &k, Function: openai.FunctionCall{Arguments: d.PartialJSON}}}})
	}
	return nil // signature_delta, citations_delta
}

// finish sends the finish chunk, the usage chunk when the caller asked for
// one, and [DONE].
func (t *FromOpenAI) finish(emit func(adapter.Event) error) error {
	reason := finishReason(t.stopReason)
	if err := t.send(emit, &openai.Chunk{Choices: []openai.ChunkChoice{{Delta: openai.Delta{}, FinishReason: &reason}}}); err != nil {
		return err
	}
	if t.includeUsage {
		if err := t.send(emit, &openai.Chunk{Choices: []openai.ChunkChoice{}, Usage: openai.UsageOf(t.streamUsage())}); err != nil {
			return err
		}
	}
	return emit(adapter.Event{Data: []byte("[DONE]")})
}

func (t *FromOpenAI) streamError(in *messages.StreamEvent, emit func(adapter.Event) error) error {
	e := messages.ErrorBody{Type: "api_error", Message: "upstream stream failed"}
	if in.Error != nil {
		e = *in.Error
	}
	data, err := json.Marshal(&openai.ErrorEnvelope{Error: openai.ErrorBody{Message: e.Message, Type: e.Type}})
	if err != nil {
		return err
	}
	if err := emit(adapter.Event{Data: data}); err != nil {
		return err
	}
	return &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: e.Message, Err: fmt.Errorf("anthropic stream error %s", e.Type)}
}

// chunk sends one chunk of choice 0 carrying d.
func (t *FromOpenAI) chunk(emit func(adapter.Event) error, d openai.Delta) error {
	return t.send(emit, &openai.Chunk{Choices: []openai.ChunkChoice{{Delta: d}}})
}

func (t *FromOpenAI) send(emit func(adapter.Event) error, c *openai.Chunk) error {
	c.ID, c.Object, c.Created, c.Model = t.id, "chat.completion.chunk", t.created, t.model
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return emit(adapter.Event{Data: data})
}
