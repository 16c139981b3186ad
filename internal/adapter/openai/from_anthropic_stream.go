package openai

import (
	"encoding/json"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/jsonvalid"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
)

// openBlock is the text or thinking block being written, which closes
// when any other block starts (tool blocks stay open: see openTools).
type openBlock struct {
	kind  string // "", "text", "thinking"
	index int
}

// toolBlock is the Anthropic block an OpenAI tool call streams into.
// Its arguments are checked as they pass (args): Anthropic's SDKs join a
// block's partial_json and parse it (some at every delta), so a fragment
// that makes it invalid JSON is not passed on, and the stream ends with
// the error event instead.
type toolBlock struct {
	index int
	id    string
	args  *jsonvalid.Object
}

// streamEvent is an Anthropic stream event as written; each type sets only
// its own fields.
type streamEvent struct {
	Type         string             `json:"type"`
	Index        *int               `json:"index,omitempty"`
	Message      *anthropic.Message `json:"message,omitempty"`
	ContentBlock *startBlock        `json:"content_block,omitempty"`
	Delta        any                `json:"delta,omitempty"`
	Usage        *anthropic.Usage   `json:"usage,omitempty"`
}

// startBlock is a content_block_start's block, empty as Anthropic starts
// them: text "", thinking "" with signature "", tool_use with input {}.
type startBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// messageDelta is a message_delta's delta.
type messageDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// Event translates one chunk of a chat stream into Messages events
// (docs/translators.md, "Streams"). Tool-call blocks stay open until the finish, so
// fragments of parallel calls may interleave, as Anthropic allows. An
// upstream error chunk is passed on as Anthropic's error event; Event then
// returns a *sluice.Error (upstream_stream_failed).
func (t *FromAnthropic) Event(ev adapter.Event, emit func(adapter.Event) error) error {
	switch string(ev.Data) {
	case "":
		return nil // a keep-alive comment
	case "[DONE]":
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
		t.started, t.id, t.model = true, messageID(c.ID), c.Model
		if err := t.start(emit); err != nil {
			return err
		}
	}
	for i := range c.Choices {
		if err := t.choice(&c.Choices[i], emit); err != nil {
			return err
		}
	}
	return nil
}

func (t *FromAnthropic) start(emit func(adapter.Event) error) error {
	return t.send(emit, "message_start", &streamEvent{Message: &anthropic.Message{
		ID: t.id, Type: "message", Role: "assistant", Model: t.model, Content: []anthropic.Block{}, Usage: anthropic.UsageOf(t.usage),
	}})
}

// choice translates one choice's delta. Only choice 0 is asked for.
func (t *FromAnthropic) choice(ch *wire.ChunkChoice, emit func(adapter.Event) error) error {
	if ch.Index != 0 {
		return nil
	}
	d := &ch.Delta
	if d.ReasoningContent != "" {
		if err := t.textual(emit, "thinking", &anthropic.Delta{Type: "thinking_delta", Thinking: d.ReasoningContent}); err != nil {
			return err
		}
	}
	if d.Content != nil && *d.Content != "" {
		if err := t.textual(emit, "text", &anthropic.Delta{Type: "text_delta", Text: *d.Content}); err != nil {
			return err
		}
	}
	if d.Refusal != "" {
		t.refusal = true
		if err := t.textual(emit, "text", &anthropic.Delta{Type: "text_delta", Text: d.Refusal}); err != nil {
			return err
		}
	}
	for i := range d.ToolCalls {
		if err := t.toolCall(&d.ToolCalls[i], emit); err != nil {
			return err
		}
	}
	if ch.FinishReason != nil {
		t.finish = *ch.FinishReason
		return t.closeAll(emit)
	}
	return nil
}

// textual writes a text or thinking delta, opening a block of that kind
// first when another is being written.
func (t *FromAnthropic) textual(emit func(adapter.Event) error, kind string, d *anthropic.Delta) error {
	if t.open.kind != kind {
		if err := t.closeOpen(emit); err != nil {
			return err
		}
		empty := ""
		b := &startBlock{Type: kind}
		if kind == "text" {
			b.Text = &empty
		} else {
			b.Thinking, b.Signature = &empty, &empty
		}
		t.open = openBlock{kind: kind, index: t.blocks}
		if err := t.startBlock(emit, b); err != nil {
			return err
		}
	}
	return t.delta(emit, t.open.index, d)
}

// toolCall writes one tool-call fragment. A fragment with an id the
// index has not had starts a new call (some servers reuse index 0).
func (t *FromAnthropic) toolCall(tc *wire.ToolCall, emit func(adapter.Event) error) error {
	j := 0
	if tc.Index != nil {
		j = *tc.Index
	}
	tb, known := t.tools[j]
	if !known || (tc.ID != "" && tc.ID != tb.id) {
		if err := t.closeOpen(emit); err != nil {
			return err
		}
		tb = toolBlock{index: t.blocks, id: tc.ID, args: new(jsonvalid.Object)}
		if tb.id == "" {
			tb.id = fmt.Sprintf("toolu_sluice_%d", t.blocks)
		}
		if t.tools == nil {
			t.tools = make(map[int]toolBlock)
		}
		t.tools[j] = tb
		t.openTools = append(t.openTools, tb)
		if err := t.startBlock(emit, &startBlock{Type: "tool_use", ID: tb.id, Name: tc.Function.Name, Input: json.RawMessage(`{}`)}); err != nil {
			return err
		}
	}
	if tc.Function.Arguments == "" {
		return nil
	}
	if err := tb.args.Write([]byte(tc.Function.Arguments)); err != nil {
		return t.badArguments(emit, tb, err)
	}
	return t.delta(emit, tb.index, &anthropic.Delta{Type: "input_json_delta", PartialJSON: tc.Function.Arguments})
}

// badArguments ends the stream whose tool call tb's arguments are not a
// JSON object (err) with Anthropic's error event.
func (t *FromAnthropic) badArguments(emit func(adapter.Event) error, tb toolBlock, err error) error {
	return t.streamError(&wire.ErrorBody{Type: "api_error", Message: fmt.Sprintf("the upstream's arguments of tool call %s are not valid: %v", tb.id, err)}, emit)
}

func (t *FromAnthropic) startBlock(emit func(adapter.Event) error, b *startBlock) error {
	i := t.blocks
	t.blocks++
	return t.send(emit, "content_block_start", &streamEvent{Index: &i, ContentBlock: b})
}

func (t *FromAnthropic) delta(emit func(adapter.Event) error, index int, d *anthropic.Delta) error {
	return t.send(emit, "content_block_delta", &streamEvent{Index: &index, Delta: d})
}

func (t *FromAnthropic) stop(emit func(adapter.Event) error, index int) error {
	return t.send(emit, "content_block_stop", &streamEvent{Index: &index})
}

// closeOpen closes the text or thinking block being written, if any.
func (t *FromAnthropic) closeOpen(emit func(adapter.Event) error) error {
	if t.open.kind == "" {
		return nil
	}
	index := t.open.index
	t.open = openBlock{}
	return t.stop(emit, index)
}

// closeAll closes every open block, in the order they started, once each
// tool call's arguments are known to be whole (none at all stand for {}).
func (t *FromAnthropic) closeAll(emit func(adapter.Event) error) error {
	open := make([]int, 0, len(t.openTools)+1)
	for _, tb := range t.openTools {
		if err := tb.args.End(); err != nil && tb.args.Started() {
			return t.badArguments(emit, tb, err)
		}
		open = append(open, tb.index)
	}
	if t.open.kind != "" {
		open = append(open, t.open.index)
		slices.Sort(open)
	}
	t.open, t.tools, t.openTools = openBlock{}, nil, nil
	for _, i := range open {
		if err := t.stop(emit, i); err != nil {
			return err
		}
	}
	return nil
}

// end closes the message: message_delta with the stop reason and the
// whole usage (whose input and cache counts override message_start's,
// which were unknown), then message_stop.
func (t *FromAnthropic) end(emit func(adapter.Event) error) error {
	if !t.started {
		t.started = true
		if err := t.start(emit); err != nil {
			return err
		}
	}
	if err := t.closeAll(emit); err != nil {
		return err
	}
	usage := anthropic.UsageOf(t.usage)
	if err := t.send(emit, "message_delta", &streamEvent{Delta: &messageDelta{StopReason: stopReason(t.finish, t.refusal)}, Usage: &usage}); err != nil {
		return err
	}
	return t.send(emit, "message_stop", &streamEvent{})
}

// streamError ends the stream with e as Anthropic's error event, its type
// the one Anthropic gives the status e's type stands for.
func (t *FromAnthropic) streamError(e *wire.ErrorBody, emit func(adapter.Event) error) error {
	typ := anthropic.ErrorType(wire.TypeStatus(e.Type))
	data, err := json.Marshal(&anthropic.ErrorEnvelope{Type: "error", Error: anthropic.ErrorBody{Type: typ, Message: e.Message}})
	if err != nil {
		return err
	}
	if err := emit(adapter.Event{Name: "error", Data: data}); err != nil {
		return err
	}
	return &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: e.Message, Err: fmt.Errorf("openai stream error %s", e.Type)}
}

// send writes one event, its type both its name and its data's "type".
func (t *FromAnthropic) send(emit func(adapter.Event) error, name string, ev *streamEvent) error {
	ev.Type = name
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return emit(adapter.Event{Name: name, Data: data})
}
