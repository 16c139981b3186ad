package gemini

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	generate "github.com/sluicehq/sluice/internal/protocol/gemini"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// Event translates one chunk of a Gemini stream into chat chunks
// (docs/translators.md, "Streams"): one chunk per part, a function call (which Gemini
// sends whole) as one tool-call delta with its index. The chunk with the
// finish reason, or a blocked prompt's, ends the stream: the finish chunk,
// the usage chunk when the caller asked for one, and [DONE]; anything
// after it is ignored. An error object is passed on as OpenAI's mid-stream
// error; Event then returns a *sluice.Error (upstream_stream_failed).
func (t *FromOpenAI) Event(ev adapter.Event, emit func(adapter.Event) error) error {
	if len(ev.Data) == 0 || t.done {
		return nil // a keep-alive comment, or past the end
	}
	var in generate.Response
	if err := json.Unmarshal(ev.Data, &in); err != nil {
		return fmt.Errorf("gemini stream chunk: %w", err)
	}
	if in.Error != nil {
		return t.streamError(in.Error, emit)
	}
	if in.UsageMetadata != nil { // the last one counts
		t.usage = in.UsageMetadata.Sluice()
	}
	if !t.started {
		t.started, t.id, t.model, t.responseID = true, chatID(in.ResponseID), in.ModelVersion, in.ResponseID
		t.created = t.now().Unix()
		empty := ""
		if err := t.chunk(emit, openai.Delta{Role: "assistant", Content: &empty}); err != nil {
			return err
		}
	}
	for i := range in.Candidates {
		c := &in.Candidates[i]
		if c.Index != 0 { // one candidate is asked for
			continue
		}
		if err := t.parts(c.Content, emit); err != nil {
			return err
		}
		if c.FinishReason != "" {
			return t.finish(finishReason(c.FinishReason, t.nextTool > 0), emit)
		}
	}
	if len(in.Candidates) == 0 && in.PromptFeedback != nil && in.PromptFeedback.BlockReason != "" {
		return t.finish("content_filter", emit)
	}
	return nil
}

// parts sends a chunk for each part of a candidate's content.
func (t *FromOpenAI) parts(c *generate.Content, emit func(adapter.Event) error) error {
	if c == nil {
		return nil
	}
	for i := range c.Parts {
		p := &c.Parts[i]
		var d openai.Delta
		switch {
		case p.FunctionCall != nil:
			k := t.nextTool
			t.nextTool++
			tc := toolCall(p, t.responseID, k)
			tc.Index = &k
			d.ToolCalls = []openai.ToolCall{tc}
		case p.Text == "":
			continue // a part with only a signature, or of a kind chat has no field for
		case p.Thought:
			d.ReasoningContent = p.Text
		default:
			d.Content = &p.Text
		}
		if err := t.chunk(emit, d); err != nil {
			return err
		}
	}
	return nil
}

// finish sends the finish chunk, the usage chunk when the caller asked for
// one, and [DONE].
func (t *FromOpenAI) finish(reason string, emit func(adapter.Event) error) error {
	t.done = true
	if err := t.send(emit, &openai.Chunk{Choices: []openai.ChunkChoice{{Delta: openai.Delta{}, FinishReason: &reason}}}); err != nil {
		return err
	}
	if t.includeUsage {
		if err := t.send(emit, &openai.Chunk{Choices: []openai.ChunkChoice{}, Usage: openai.UsageOf(t.usage)}); err != nil {
			return err
		}
	}
	return emit(adapter.Event{Data: []byte("[DONE]")})
}

func (t *FromOpenAI) streamError(e *generate.ErrorBody, emit func(adapter.Event) error) error {
	t.done = true
	if e.Message == "" {
		e.Message = "the upstream stream failed"
	}
	data, err := json.Marshal(openAIError(cmp.Or(e.Code, http.StatusInternalServerError), e))
	if err != nil {
		return err
	}
	if err := emit(adapter.Event{Data: data}); err != nil {
		return err
	}
	return &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: e.Message, Err: fmt.Errorf("gemini stream error %d %s", e.Code, e.Status)}
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
