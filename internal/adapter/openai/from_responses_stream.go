package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
	"strconv"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
)

// A chat stream becomes a Responses stream: response.created and
// response.in_progress on the first chunk; an output item per message, per
// run of reasoning (the non-standard reasoning_content some compatible
// servers send, as a reasoning item's reasoning_text) and per tool call,
// each opened (output_item.added, content_part.added) before its first
// delta and closed (*.done) when the next item starts (messages and
// reasoning) or when the answer ends (tool calls, whose deltas may
// interleave); at
// [DONE], after the usage chunk, response.completed or response.incomplete
// with the whole response and its usage. Every event carries the next
// sequence_number, and each item's events its output_index and item id.

// responsesStream is the state of one chat stream turned into a Responses
// stream.
type responsesStream struct {
	seq     int64
	started bool
	answer  answer
	finish  string
	usage   *wire.ChatUsage
	items   []streamItem // in output_index order
	open    int          // items index of the open message or reasoning item; -1 when none
	calls   []int        // chat tool call index → items index
	names   toolNames    // the request's, to name flattened calls back
	held    int          // bytes of text, arguments and names in items, up to adapter.MaxHeldOutput
}

// streamItem is one output item of the stream: a message or reasoning
// (parts) or a function call (callID, name, args).
type streamItem struct {
	id     string
	kind   string // message, reasoning, function_call
	callID string
	name   []byte // a call's name may come in fragments too
	args   []byte
	parts  []streamPart // the last one is open until the item closes
	closed bool
}

// streamPart is one content part of an item: output_text or refusal in a
// message, reasoning_text in reasoning.
type streamPart struct {
	kind string
	text []byte
}

// partEvents are the names of the events of each kind of part.
var partEvents = map[string]struct{ delta, done string }{
	"output_text":    {"response.output_text.delta", "response.output_text.done"},
	"refusal":        {"response.refusal.delta", "response.refusal.done"},
	"reasoning_text": {"response.reasoning_text.delta", "response.reasoning_text.done"},
}

// maxToolCallIndex bounds a chat tool call index, which sizes a slice.
const maxToolCallIndex = 1 << 10

// doneData is the data of a chat stream's last event.
var doneData = []byte("[DONE]")

// emptyLogprobs is the logprobs of a text event: chat's are not translated.
var emptyLogprobs = json.RawMessage(`[]`)

// The Responses stream events, as they are written.
type (
	lifecycleEvent struct {
		Type           string         `json:"type"`
		SequenceNumber int64          `json:"sequence_number"`
		Response       *wire.Response `json:"response"`
	}
	itemEvent struct {
		Type           string `json:"type"`
		SequenceNumber int64  `json:"sequence_number"`
		OutputIndex    int    `json:"output_index"`
		Item           any    `json:"item"`
	}
	// addedItem is a message or reasoning item as output_item.added
	// announces it, with no content yet ("content": [], which OutputItem
	// leaves out).
	addedItem struct {
		ID      string            `json:"id"`
		Type    string            `json:"type"`
		Status  string            `json:"status"`
		Role    string            `json:"role,omitempty"`
		Summary json.RawMessage   `json:"summary,omitempty"`
		Content []wire.OutputPart `json:"content"`
	}
	partEvent struct {
		Type           string          `json:"type"`
		SequenceNumber int64           `json:"sequence_number"`
		ItemID         string          `json:"item_id"`
		OutputIndex    int             `json:"output_index"`
		ContentIndex   int             `json:"content_index"`
		Part           wire.OutputPart `json:"part"`
	}
	// textEvent is output_text.delta/.done (Delta or Text, with Logprobs),
	// refusal.delta/.done (Delta or Refusal) and reasoning_text.delta/.done
	// (Delta or Text).
	textEvent struct {
		Type           string           `json:"type"`
		SequenceNumber int64            `json:"sequence_number"`
		ItemID         string           `json:"item_id"`
		OutputIndex    int              `json:"output_index"`
		ContentIndex   int              `json:"content_index"`
		Delta          *string          `json:"delta,omitempty"`
		Text           *string          `json:"text,omitempty"`
		Refusal        *string          `json:"refusal,omitempty"`
		Logprobs       *json.RawMessage `json:"logprobs,omitempty"`
	}
	argumentsEvent struct {
		Type           string  `json:"type"`
		SequenceNumber int64   `json:"sequence_number"`
		ItemID         string  `json:"item_id"`
		OutputIndex    int     `json:"output_index"`
		Delta          *string `json:"delta,omitempty"`
		Name           string  `json:"name,omitempty"`
		Arguments      *string `json:"arguments,omitempty"`
	}
	errorEvent struct {
		Type           string          `json:"type"`
		SequenceNumber int64           `json:"sequence_number"`
		Code           json.RawMessage `json:"code"`
		Message        string          `json:"message"`
		Param          *string         `json:"param"`
	}
)

// Event translates one chat stream event into the Responses events it
// makes. An upstream error chunk is passed on as the Responses error event,
// which ends the caller's stream: Event returns a *sluice.Error
// (upstream_stream_failed) with the upstream's message.
func (t *FromResponses) Event(ev adapter.Event, emit func(adapter.Event) error) error {
	s := &t.stream
	if len(ev.Data) == 0 { // a keep-alive comment
		return nil
	}
	if bytes.Equal(ev.Data, doneData) {
		return t.end(emit)
	}
	// Only the first chunk's id, model and tier are read: decoding them
	// from every chunk would cost an allocation each.
	var c struct {
		Choices []wire.ChunkChoice `json:"choices"`
		Usage   *wire.ChatUsage    `json:"usage"`
		Error   *wire.ErrorBody    `json:"error"`
	}
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		return fmt.Errorf("decode chat stream chunk: %w", err)
	}
	if c.Error != nil {
		return s.fail(emit, c.Error)
	}
	if !s.started {
		var h struct {
			ID          string `json:"id"`
			Created     int64  `json:"created"`
			Model       string `json:"model"`
			ServiceTier string `json:"service_tier"`
		}
		_ = json.Unmarshal(ev.Data, &h) // decoded above
		if err := t.start(emit, answer{base: h.ID, created: h.Created, model: h.Model, tier: h.ServiceTier}); err != nil {
			return err
		}
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // n is 1: the request never asks for more
		}
		if d := ch.Delta.ReasoningContent; d != "" {
			if err := s.text(emit, "reasoning_text", d); err != nil {
				return err
			}
		}
		if d := ch.Delta.Content; d != nil && *d != "" {
			if err := s.text(emit, "output_text", *d); err != nil {
				return err
			}
		}
		if d := ch.Delta.Refusal; d != "" {
			if err := s.text(emit, "refusal", d); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			if err := s.toolCall(emit, tc); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			s.finish = *ch.FinishReason
		}
	}
	return nil
}

// start sends response.created and response.in_progress once, before the
// first output, for the answer of the first chunk (its base a chat id).
func (t *FromResponses) start(emit func(adapter.Event) error, a answer) error {
	s := &t.stream
	if s.started {
		return nil
	}
	a.base = idBase(a.base)
	s.started, s.open, s.answer = true, -1, a
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		if err := s.send(emit, &lifecycleEvent{Type: typ, Response: t.response(a, "", nil, nil)}); err != nil {
			return err
		}
	}
	return nil
}

// end closes every open item and sends the terminal event, with the
// whole response and its usage.
func (t *FromResponses) end(emit func(adapter.Event) error) error {
	s := &t.stream
	if err := t.start(emit, answer{}); err != nil {
		return err
	}
	if s.finish == "" {
		s.finish = "stop"
	}
	for i := range s.items {
		if err := s.closeItem(emit, i); err != nil {
			return err
		}
	}
	output := make([]wire.OutputItem, len(s.items))
	for i := range s.items {
		output[i] = s.outputItem(i)
	}
	resp := t.response(s.answer, s.finish, output, s.usage)
	return s.send(emit, &lifecycleEvent{Type: "response." + resp.Status, Response: resp})
}

// text adds a delta to a part of kind (output_text, refusal,
// reasoning_text), opening its item (a message, or reasoning) and the part
// first when the open ones are of another kind.
func (s *responsesStream) text(emit func(adapter.Event) error, kind, delta string) error {
	itemKind := "message"
	if kind == "reasoning_text" {
		itemKind = "reasoning"
	}
	if s.open >= 0 && s.items[s.open].kind != itemKind {
		if err := s.closeItem(emit, s.open); err != nil {
			return err
		}
	}
	if s.open < 0 {
		if err := s.openItem(emit, itemKind); err != nil {
			return err
		}
	}
	it := &s.items[s.open]
	if n := len(it.parts); n == 0 || it.parts[n-1].kind != kind {
		if n > 0 {
			if err := s.closePart(emit, s.open); err != nil {
				return err
			}
		}
		it.parts = append(it.parts, streamPart{kind: kind})
		if err := s.send(emit, &partEvent{Type: "response.content_part.added", ItemID: it.id, OutputIndex: s.open,
			ContentIndex: len(it.parts) - 1, Part: partOf(kind, "")}); err != nil {
			return err
		}
	}
	if err := s.hold(emit, len(delta)); err != nil {
		return err
	}
	p := &it.parts[len(it.parts)-1]
	p.text = append(p.text, delta...)
	ev := &textEvent{Type: partEvents[kind].delta, ItemID: it.id, OutputIndex: s.open, ContentIndex: len(it.parts) - 1, Delta: &delta}
	if kind == "output_text" {
		ev.Logprobs = &emptyLogprobs
	}
	return s.send(emit, ev)
}

// openItem adds a message or reasoning item and makes it the open one.
func (s *responsesStream) openItem(emit func(adapter.Event) error, kind string) error {
	prefix, added := "msg_", addedItem{Type: kind, Status: "in_progress", Role: "assistant", Content: []wire.OutputPart{}}
	if kind == "reasoning" {
		prefix, added.Role, added.Summary = "rs_", "", emptyList
	}
	added.ID = prefix + s.answer.base // as in a whole answer; a second one of a kind gets a suffix
	n := 0
	for _, it := range s.items {
		if it.kind == kind {
			n++
		}
	}
	if n > 0 {
		added.ID += "_" + strconv.Itoa(n)
	}
	s.items = append(s.items, streamItem{id: added.ID, kind: kind})
	s.open = len(s.items) - 1
	return s.send(emit, &itemEvent{Type: "response.output_item.added", OutputIndex: s.open, Item: added})
}

// toolCall adds a chat tool call fragment: a new function_call item when
// it starts a call (a new index, or a new id on an index seen before, as
// some compatible servers send parallel calls), then its arguments delta.
func (s *responsesStream) toolCall(emit func(adapter.Event) error, tc wire.ToolCall) error {
	j := 0
	if tc.Index != nil {
		j = *tc.Index
	}
	if j < 0 || j > maxToolCallIndex {
		return fmt.Errorf("chat stream tool call index %d out of range", j)
	}
	k := -1
	if j < len(s.calls) {
		k = s.calls[j]
	}
	if k < 0 || (tc.ID != "" && tc.ID != s.items[k].callID) {
		if s.open >= 0 {
			if err := s.closeItem(emit, s.open); err != nil {
				return err
			}
		}
		callID := tc.ID
		if callID == "" {
			callID = "call_" + s.answer.base + "_" + strconv.Itoa(j)
		}
		s.items = append(s.items, streamItem{id: functionCallID(callID), kind: "function_call", callID: callID})
		k = len(s.items) - 1
		for len(s.calls) <= j {
			s.calls = append(s.calls, -1)
		}
		s.calls[j] = k
		if err := s.send(emit, &itemEvent{Type: "response.output_item.added", OutputIndex: k,
			Item: s.names.callItem(callID, tc.Function.Name, "", "in_progress")}); err != nil {
			return err
		}
	}
	if err := s.hold(emit, len(tc.Function.Name)+len(tc.Function.Arguments)); err != nil {
		return err
	}
	it := &s.items[k]
	it.name = append(it.name, tc.Function.Name...)
	if tc.Function.Arguments == "" {
		return nil
	}
	it.args = append(it.args, tc.Function.Arguments...)
	return s.send(emit, &argumentsEvent{Type: "response.function_call_arguments.delta", ItemID: it.id, OutputIndex: k, Delta: &tc.Function.Arguments})
}

// hold counts n more bytes held for the final events, and fails the
// stream when they pass adapter.MaxHeldOutput.
func (s *responsesStream) hold(emit func(adapter.Event) error, n int) error {
	if s.held += n; s.held <= adapter.MaxHeldOutput {
		return nil
	}
	return s.fail(emit, &wire.ErrorBody{Type: "server_error", Message: adapter.HeldTooLong, Code: json.RawMessage(`"output_too_long"`)})
}

// fail passes an upstream error on as the Responses error event, and
// returns the failure of the stream.
func (s *responsesStream) fail(emit func(adapter.Event) error, e *wire.ErrorBody) error {
	code := e.Code
	if code == nil {
		code = json.RawMessage("null")
	}
	if err := s.send(emit, &errorEvent{Type: "error", Code: code, Message: e.Message, Param: e.Param}); err != nil {
		return err
	}
	return &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: e.Message, Err: fmt.Errorf("openai chat stream error %s", e.Type)}
}

// closePart sends the *.done and content_part.done of item i's last part.
func (s *responsesStream) closePart(emit func(adapter.Event) error, i int) error {
	it := &s.items[i]
	ci := len(it.parts) - 1
	p := it.parts[ci]
	text := string(p.text)
	ev := &textEvent{Type: partEvents[p.kind].done, ItemID: it.id, OutputIndex: i, ContentIndex: ci, Text: &text}
	switch p.kind {
	case "output_text":
		ev.Logprobs = &emptyLogprobs
	case "refusal":
		ev.Text, ev.Refusal = nil, &text
	}
	if err := s.send(emit, ev); err != nil {
		return err
	}
	return s.send(emit, &partEvent{Type: "response.content_part.done", ItemID: it.id, OutputIndex: i, ContentIndex: ci, Part: partOf(p.kind, text)})
}

// closeItem sends the done events of item i, once.
func (s *responsesStream) closeItem(emit func(adapter.Event) error, i int) error {
	it := &s.items[i]
	if it.closed {
		return nil
	}
	it.closed = true
	if i == s.open {
		s.open = -1
	}
	if it.kind == "function_call" {
		args := string(it.args)
		if err := s.send(emit, &argumentsEvent{Type: "response.function_call_arguments.done", ItemID: it.id, OutputIndex: i, Name: string(it.name), Arguments: &args}); err != nil {
			return err
		}
	} else if len(it.parts) > 0 {
		if err := s.closePart(emit, i); err != nil {
			return err
		}
	}
	return s.send(emit, &itemEvent{Type: "response.output_item.done", OutputIndex: i, Item: s.outputItem(i)})
}

// outputItem is item i as the done event and the final response show it.
func (s *responsesStream) outputItem(i int) wire.OutputItem {
	it := &s.items[i]
	status := "completed"
	if s.finish == "length" || s.finish == "content_filter" {
		status = "incomplete"
	}
	if it.kind == "function_call" {
		return s.names.callItem(it.callID, string(it.name), string(it.args), status)
	}
	parts := make([]wire.OutputPart, len(it.parts))
	for j, p := range it.parts {
		parts[j] = partOf(p.kind, string(p.text))
	}
	if it.kind == "reasoning" {
		return reasoningItem(it.id, status, parts)
	}
	return wire.OutputItem{ID: it.id, Type: "message", Status: status, Role: "assistant", Content: parts}
}

// partOf is a content part of kind (output_text, refusal,
// reasoning_text) holding text.
func partOf(kind, text string) wire.OutputPart {
	switch kind {
	case "refusal":
		return wire.OutputPart{Type: kind, Refusal: &text}
	case "reasoning_text":
		return wire.OutputPart{Type: kind, Text: &text}
	}
	return outputText(text)
}

// sequenced is an event whose sequence number send sets.
type sequenced interface{ setSeq(int64) string }

func (e *lifecycleEvent) setSeq(n int64) string { e.SequenceNumber = n; return e.Type }
func (e *itemEvent) setSeq(n int64) string      { e.SequenceNumber = n; return e.Type }
func (e *partEvent) setSeq(n int64) string      { e.SequenceNumber = n; return e.Type }
func (e *textEvent) setSeq(n int64) string      { e.SequenceNumber = n; return e.Type }
func (e *argumentsEvent) setSeq(n int64) string { e.SequenceNumber = n; return e.Type }
func (e *errorEvent) setSeq(n int64) string     { e.SequenceNumber = n; return e.Type }

// send numbers ev, encodes it and emits it, named by its type.
func (s *responsesStream) send(emit func(adapter.Event) error, ev sequenced) error {
	name := ev.setSeq(s.seq)
	s.seq++
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return emit(adapter.Event{Name: name, Data: data})
}
