// Package anthropic translates between the protocols callers speak and an
// upstream that speaks Anthropic Messages, one file per caller protocol
// (from_openai.go). The wire types and the error table are the protocol's
// own (internal/protocol/anthropic, imported here as messages, since this
// package is named anthropic too). The package depends only on package
// sluice, package adapter, the protocol packages, adapter/openai and the
// standard library.
package anthropic

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	messages "github.com/sluicehq/sluice/internal/protocol/anthropic"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// DefaultMaxTokens is the output cap sent when an OpenAI caller sets none:
// Anthropic requires one and OpenAI's default is "as much as the model
// allows", which Sluice does not know per model (policy,
// docs/translators.md, "Request parameters"). A thinking budget is added on top of it.
const DefaultMaxTokens = 8192

// thinkingBudgets maps OpenAI's reasoning_effort to an Anthropic thinking
// budget (docs/translators.md, "Request parameters"). "none" turns thinking off. Anthropic's
// minimum budget is 1024.
var thinkingBudgets = map[string]int64{
	"minimal": 1024,
	"low":     2048,
	"medium":  8192,
	"high":    16384,
	"xhigh":   32768,
	"max":     32768,
}

// FromOpenAI carries one OpenAI chat execution to an Anthropic Messages
// upstream. It serves one execution and is not safe for concurrent use.
//
// Refused (CodeInvalidRequest), because Anthropic cannot express them:
// n > 1, logprobs, top_logprobs, logit_bias, audio input or output
// (input_audio parts, modalities with "audio", audio), file parts by
// file_id, the deprecated functions/function_call and "function" role,
// non-function tools, tool_choice allowed_tools, tool-call arguments that
// are not a JSON object, images other than data or http(s) URLs, and a
// max_tokens too small for the thinking budget asked for.
//
// Dropped, and named (Dropped), because they are hints Anthropic has no
// field for and the answer's shape does not depend on them: FromOpenAIHints.
type FromOpenAI struct {
	now          func() time.Time
	includeUsage bool // the caller asked for a usage chunk at the end of its stream
	dropped      []string

	// Stream state.
	id, model  string
	created    int64
	toolIndex  map[int]int // Anthropic block index → OpenAI tool-call index
	nextTool   int
	stopReason string
	usage      messages.Usage
	measured   bool
}

var _ adapter.Translator = (*FromOpenAI)(nil)

// NewFromOpenAI returns a translator for one execution.
func NewFromOpenAI() *FromOpenAI { return &FromOpenAI{now: time.Now} }

// FromOpenAIHints are what FromOpenAI drops (adapter.Hints): OpenAI's sampling
// and serving hints, prompt_cache_key (Sluice places cache breakpoints
// itself, see cacheBreakpoints), an image's detail, and an assistant
// message's reasoning_content (a thinking block cannot be replayed without
// its signature).
var FromOpenAIHints = adapter.Hints{
	"seed", "frequency_penalty", "presence_penalty", "metadata", "store", "service_tier",
	"prompt_cache_key", "prompt_cache_retention", "prediction", "verbosity",
	"messages[].content[].image_url.detail", "messages[].reasoning_content",
}

// Dropped names the caller's hints the last Request left out.
func (t *FromOpenAI) Dropped() []string { return t.dropped }

// Request returns the Messages body for the caller's chat request.
func (t *FromOpenAI) Request(req *sluice.Request, model string) ([]byte, error) {
	var in openai.ChatRequest
	if err := json.Unmarshal(req.Body, &in); err != nil {
		return nil, adapter.Untranslatable("request body is not a valid chat completions request: %v", err)
	}
	if err := adapter.RefuseOneChoice(&in, "Anthropic Messages"); err != nil {
		return nil, err
	}
	t.dropped = FromOpenAIHints.Sent(req.Body)
	out := messages.Request{
		Model:         model,
		Stream:        in.Stream,
		StopSequences: in.Stop,
		TopP:          in.TopP,
	}
	t.includeUsage = in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	if in.Temperature != nil { // Anthropic takes 0–1, OpenAI 0–2 (policy: clamp)
		temp := min(max(*in.Temperature, 0), 1)
		out.Temperature = &temp
	}
	system, turns, err := conversation(in.Messages)
	if err != nil {
		return nil, err
	}
	if system != "" {
		out.System = &messages.Content{Blocks: []messages.Block{{Type: "text", Text: system}}}
	}
	out.Messages = turns
	if out.Tools, out.ToolChoice, err = tools(&in); err != nil {
		return nil, err
	}
	cacheBreakpoints(&out)
	if err := outputCap(&in, &out); err != nil {
		return nil, err
	}
	if f := in.ResponseFormat; f != nil && f.Type != "text" {
		out.OutputConfig = &messages.OutputConfig{Format: jsonFormat(f)}
	}
	if user := cmp.Or(in.SafetyIdentifier, in.User); user != "" {
		out.Metadata = &messages.Metadata{UserID: user}
	}
	return json.Marshal(&out)
}

// cacheBreakpoints marks where Anthropic is to cache the prompt, which an
// OpenAI caller cannot say and OpenAI does on its own (policy, docs/translators.md,
// "Request parameters"): after the tools, after the system prompt, and after the last
// turn, so that the next request of the conversation reads all of it from
// the cache. Three of Anthropic's four breakpoints; a prompt shorter than
// the model's minimum is simply not cached.
func cacheBreakpoints(r *messages.Request) {
	ephemeral := &messages.CacheControl{Type: "ephemeral"} // Anthropic's default cache, 5 minutes
	if n := len(r.Tools); n > 0 {
		r.Tools[n-1].CacheControl = ephemeral
	}
	if r.System != nil {
		r.System.Blocks[0].CacheControl = ephemeral
	}
	if n := len(r.Messages); n > 0 {
		blocks := r.Messages[n-1].Content.Blocks
		blocks[len(blocks)-1].CacheControl = ephemeral
	}
}

// conversation turns the chat messages into the system prompt (every
// system and developer message's text, in order, joined by a blank line)
// and Anthropic turns. Consecutive messages of one role become one turn,
// as Anthropic would merge them anyway; so consecutive tool messages
// become one user turn of tool_result blocks.
func conversation(msgs []openai.ChatMessage) (string, []messages.MessageParam, error) {
	var c dialogue
	for i := range msgs {
		if err := c.add(&msgs[i]); err != nil {
			if e, ok := errors.AsType[*sluice.Error](err); ok { // the caller learns which message
				e.Msg = fmt.Sprintf("messages[%d]: %s", i, e.Msg)
			}
			return "", nil, err
		}
	}
	return strings.Join(c.system, "\n\n"), c.turns, nil
}

// dialogue is a conversation being translated.
type dialogue struct {
	system []string
	turns  []messages.MessageParam
}

func (c *dialogue) add(m *openai.ChatMessage) error {
	if adapter.Present(m.Audio) || adapter.Present(m.FunctionCall) {
		return adapter.Untranslatable("audio and function_call are not supported by this model's upstream (Anthropic Messages)")
	}
	switch m.Role {
	case "system", "developer":
		text, err := plainText(m.Content)
		c.system = append(c.system, text)
		return err
	case "user":
		blocks, err := userBlocks(m.Content)
		c.append("user", blocks)
		return err
	case "assistant":
		blocks, err := assistantBlocks(m)
		c.append("assistant", blocks)
		return err
	case "tool":
		text, err := plainText(m.Content)
		result := messages.Block{Type: "tool_result", ToolUseID: m.ToolCallID}
		if text != "" { // Anthropic refuses empty text; a result may have no content
			result.Content = &messages.Content{Text: text}
		}
		c.append("user", []messages.Block{result})
		return err
	}
	return adapter.Untranslatable("role %q is not supported by this model's upstream (Anthropic Messages)", m.Role)
}

// append adds blocks to the conversation: to the last turn when it has
// the same role.
func (c *dialogue) append(role string, blocks []messages.Block) {
	if len(blocks) == 0 { // Anthropic refuses empty turns; an empty OpenAI message says nothing
		return
	}
	if n := len(c.turns); n > 0 && c.turns[n-1].Role == role {
		c.turns[n-1].Content.Blocks = append(c.turns[n-1].Content.Blocks, blocks...)
		return
	}
	c.turns = append(c.turns, messages.MessageParam{Role: role, Content: &messages.Content{Blocks: blocks}})
}

// plainText is the text of a content that may only hold text parts
// (system, developer and tool messages).
func plainText(c *openai.Content) (string, error) {
	if c == nil {
		return "", nil
	}
	if c.Parts == nil {
		return c.Text, nil
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Type != "text" {
			return "", adapter.Untranslatable("content part %q is not allowed here; only text is", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// userBlocks translates a user message's content.
func userBlocks(c *openai.Content) ([]messages.Block, error) {
	if c == nil || (c.Parts == nil && c.Text == "") {
		return nil, nil
	}
	if c.Parts == nil {
		return []messages.Block{{Type: "text", Text: c.Text}}, nil
	}
	blocks := make([]messages.Block, 0, len(c.Parts))
	for _, p := range c.Parts {
		switch p.Type {
		case "text":
			if p.Text != "" { // Anthropic refuses empty text blocks
				blocks = append(blocks, messages.Block{Type: "text", Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, adapter.Untranslatable("image_url part without an image_url")
			}
			src, err := source(p.ImageURL.URL, "")
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, messages.Block{Type: "image", Source: src})
		case "file":
			if p.File == nil || p.File.FileData == "" {
				return nil, adapter.Untranslatable("file parts by file_id are not supported by this model's upstream (Anthropic Messages); send file_data")
			}
			src, err := source(p.File.FileData, "application/pdf")
			if err != nil {
				return nil, err
			}
			if src.MediaType != "application/pdf" {
				return nil, adapter.Untranslatable("file parts other than PDFs are not supported by this model's upstream (Anthropic Messages)")
			}
			blocks = append(blocks, messages.Block{Type: "document", Source: src})
		default: // input_audio and anything newer
			return nil, adapter.Untranslatable("content part %q is not supported by this model's upstream (Anthropic Messages)", p.Type)
		}
	}
	return blocks, nil
}

// source turns a data URL or an http(s) URL into a block source. When
// bareMediaType is set, a value that is neither is taken as base64 data of
// that type (OpenAI's file_data).
func source(url, bareMediaType string) (*messages.Source, error) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		mediaType, data, ok := strings.Cut(rest, ";base64,")
		if !ok {
			return nil, adapter.Untranslatable("a data URL must be base64: data:<media type>;base64,<data>")
		}
		return &messages.Source{Type: "base64", MediaType: mediaType, Data: data}, nil
	}
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		return &messages.Source{Type: "url", URL: url}, nil
	}
	if bareMediaType != "" {
		return &messages.Source{Type: "base64", MediaType: bareMediaType, Data: url}, nil
	}
	return nil, adapter.Untranslatable("an image URL must be a data URL or an http(s) URL")
}

// assistantBlocks translates an assistant message: its text (and refusal,
// as text) then its tool calls as tool_use blocks with the same ids.
func assistantBlocks(m *openai.ChatMessage) ([]messages.Block, error) {
	var blocks []messages.Block
	if c := m.Content; c != nil {
		if c.Parts == nil && c.Text != "" {
			blocks = append(blocks, messages.Block{Type: "text", Text: c.Text})
		}
		for _, p := range c.Parts {
			switch p.Type {
			case "text", "refusal":
				if text := p.Text + p.Refusal; text != "" { // Anthropic refuses empty text blocks
					blocks = append(blocks, messages.Block{Type: "text", Text: text})
				}
			default:
				return nil, adapter.Untranslatable("assistant content part %q is not supported by this model's upstream (Anthropic Messages)", p.Type)
			}
		}
	}
	if m.Refusal != "" {
		blocks = append(blocks, messages.Block{Type: "text", Text: m.Refusal})
	}
	for _, tc := range m.ToolCalls {
		input := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			input = json.RawMessage(`{}`)
		} else if !json.Valid(input) || strings.TrimSpace(tc.Function.Arguments)[0] != '{' {
			return nil, adapter.Untranslatable("tool call %s: arguments must be a JSON object", tc.ID)
		}
		blocks = append(blocks, messages.Block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	return blocks, nil
}

// toolChoices maps OpenAI's tool_choice strings to Anthropic's types.
var toolChoices = map[string]string{"auto": "auto", "none": "none", "required": "any"}

// tools translates the tool declarations and tool_choice (with
// parallel_tool_calls, which Anthropic keeps inside tool_choice, inverted).
func tools(in *openai.ChatRequest) ([]messages.Tool, *messages.ToolChoice, error) {
	var out []messages.Tool
	for i, tl := range in.Tools {
		if tl.Type != "function" {
			return nil, nil, adapter.Untranslatable("tools[%d]: tool type %q is not supported by this model's upstream (Anthropic Messages)", i, tl.Type)
		}
		schema := tl.Function.Parameters
		if !adapter.Present(schema) { // Anthropic requires an input schema; OpenAI's default is "no parameters"
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, messages.Tool{Name: tl.Function.Name, Description: tl.Function.Description, InputSchema: schema, Strict: tl.Function.Strict})
	}
	var choice *messages.ToolChoice
	if adapter.Present(in.ToolChoice) && len(out) > 0 { // without tools a choice says nothing, and Anthropic refuses it
		var name string
		if err := json.Unmarshal(in.ToolChoice, &name); err == nil {
			typ, ok := toolChoices[name]
			if !ok {
				return nil, nil, adapter.Untranslatable("tool_choice %q is not supported", name)
			}
			choice = &messages.ToolChoice{Type: typ}
		} else {
			var fn openai.ToolChoiceFunction
			if err := json.Unmarshal(in.ToolChoice, &fn); err != nil || fn.Type != "function" || fn.Function.Name == "" {
				return nil, nil, adapter.Untranslatable("tool_choice must be auto, none, required or a named function for this model's upstream (Anthropic Messages)")
			}
			choice = &messages.ToolChoice{Type: "tool", Name: fn.Function.Name}
		}
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls && len(out) > 0 {
		if choice == nil {
			choice = &messages.ToolChoice{Type: "auto"}
		}
		choice.DisableParallelToolUse = choice.Type != "none" // none takes no such flag
	}
	return out, choice, nil
}

// outputCap sets max_tokens and thinking. The cap includes the thinking
// tokens on both sides, so a budget must fit under it. Anthropic refuses
// thinking together with a forced tool, a temperature or a top_p below
// 0.95: a forced tool wins over reasoning, which then stays off, and with
// reasoning on the sampling hints are left out (policy). Reasoning also
// stays off while a tool loop goes on (the last turn is the assistant's
// tool calls, answered): Anthropic then wants that turn's thinking blocks
// back with their signatures, which an OpenAI caller cannot send.
func outputCap(in *openai.ChatRequest, out *messages.Request) error {
	maxTokens := int64(0)
	if in.MaxCompletionTokens != nil {
		maxTokens = *in.MaxCompletionTokens
	} else if in.MaxTokens != nil {
		maxTokens = *in.MaxTokens
	}
	effort := in.ReasoningEffort
	forced := out.ToolChoice != nil && (out.ToolChoice.Type == "any" || out.ToolChoice.Type == "tool")
	if effort == "" || effort == "none" || forced || inToolLoop(out.Messages) {
		if effort == "none" {
			out.Thinking = &messages.Thinking{Type: "disabled"}
		}
		out.MaxTokens = cmp.Or(maxTokens, DefaultMaxTokens)
		return nil
	}
	budget, ok := thinkingBudgets[effort]
	if !ok {
		return adapter.Untranslatable("reasoning_effort %q is not supported", effort)
	}
	out.Temperature, out.TopP = nil, nil
	switch {
	case maxTokens == 0:
		maxTokens = DefaultMaxTokens + budget
	case maxTokens <= budget:
		budget = maxTokens - 1
	}
	if budget < 1024 {
		return adapter.Untranslatable("max_completion_tokens %d leaves no room for reasoning (this model's upstream needs at least 1025 with reasoning_effort); raise it or set reasoning_effort none", maxTokens)
	}
	out.MaxTokens = maxTokens
	out.Thinking = &messages.Thinking{Type: "enabled", BudgetTokens: budget}
	return nil
}

// inToolLoop reports whether the conversation ends with an assistant turn
// that called tools and the user turn of their results.
func inToolLoop(turns []messages.MessageParam) bool {
	n := len(turns)
	if n < 2 || turns[n-2].Role != "assistant" {
		return false
	}
	return slices.ContainsFunc(turns[n-2].Content.Blocks, func(b messages.Block) bool { return b.Type == "tool_use" })
}

// jsonFormat translates response_format. json_object, which has no schema,
// asks for any JSON object (policy).
func jsonFormat(f *openai.ResponseFormat) *messages.Format {
	if f.JSONSchema != nil && adapter.Present(f.JSONSchema.Schema) {
		return &messages.Format{Type: "json_schema", Schema: f.JSONSchema.Schema}
	}
	return &messages.Format{Type: "json_schema", Schema: json.RawMessage(`{"type":"object"}`)}
}

// finishReasons maps Anthropic's stop_reason to OpenAI's finish_reason
// (docs/translators.md, "Finish reasons"); anything else is "stop".
var finishReasons = map[string]string{
	"max_tokens":                    "length",
	"model_context_window_exceeded": "length",
	"tool_use":                      "tool_calls",
	"refusal":                       "content_filter",
}

func finishReason(stop string) string {
	if r, ok := finishReasons[stop]; ok {
		return r
	}
	return "stop"
}

// Response returns the chat completion for a whole Messages answer.
// Thinking goes to the non-standard reasoning_content, as DeepSeek and
// others send it; redacted thinking, citations and server-tool blocks have
// no OpenAI field and are left out.
func (t *FromOpenAI) Response(body []byte) ([]byte, error) {
	var m messages.Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("anthropic answer: %w", err)
	}
	msg := openai.ChatMessage{Role: "assistant"}
	var text, reasoning strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: b.ID, Type: "function",
				Function: openai.FunctionCall{Name: b.Name, Arguments: arguments(b.Input)}})
		}
	}
	if text.Len() > 0 || msg.ToolCalls == nil {
		msg.Content = openai.TextContent(text.String())
	}
	msg.ReasoningContent = reasoning.String()
	var stop string
	if m.StopReason != nil {
		stop = *m.StopReason
	}
	out := openai.Completion{
		ID:      m.ID,
		Object:  "chat.completion",
		Created: t.now().Unix(),
		Model:   m.Model,
		Choices: []openai.Choice{{Message: msg, FinishReason: finishReason(stop)}},
		Usage:   openai.UsageOf(m.Usage.Sluice()),
	}
	return json.Marshal(&out)
}

// arguments is a tool_use input as OpenAI's arguments string.
func arguments(input json.RawMessage) string {
	if len(input) == 0 {
		return "{}"
	}
	return string(input)
}

// Error returns OpenAI's error body for an Anthropic error answer. The
// Anthropic error type becomes OpenAI's type; a body that is not
// Anthropic's (a proxy's HTML page) gets the status text as its message.
func (t *FromOpenAI) Error(status int, body []byte) []byte {
	var in messages.ErrorEnvelope
	if json.Unmarshal(body, &in) != nil || in.Error.Message == "" {
		in.Error = messages.ErrorBody{Type: messages.ErrorType(status), Message: http.StatusText(status)}
	}
	out, _ := json.Marshal(&openai.ErrorEnvelope{Error: openai.ErrorBody{Message: in.Error.Message, Type: in.Error.Type}})
	return out
}

// streamUsage is the usage the stream reported so far; Measured is false
// before any.
func (t *FromOpenAI) streamUsage() sluice.Usage {
	if !t.measured {
		return sluice.Usage{}
	}
	return t.usage.Sluice()
}
