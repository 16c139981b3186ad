package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
)

// FromAnthropic carries one Anthropic Messages execution to an OpenAI chat
// upstream (Claude Code on an OpenAI-compatible model). It serves one
// execution and is not safe for concurrent use.
//
// Refused (CodeInvalidRequest), because OpenAI chat cannot express them:
// server tools (web search, code execution …) and mcp_servers, documents
// other than base64 PDFs, image sources other than base64 and URLs, more
// than 4 stop sequences.
//
// Dropped, and named (Dropped): FromAnthropicHints.
type FromAnthropic struct {
	dropped []string
	caller  []byte // the caller's body, for Origin

	// Stream state.
	started   bool
	id        string
	model     string
	open      openBlock
	blocks    int               // Anthropic blocks started so far: the next one's index
	tools     map[int]toolBlock // by OpenAI tool-call index
	openTools []toolBlock       // tool blocks open, in start order: they stay open until the finish
	finish    string
	refusal   bool
	usage     sluice.Usage
}

var _ adapter.Translator = (*FromAnthropic)(nil)

// NewFromAnthropic returns a translator for one execution.
func NewFromAnthropic() *FromAnthropic { return &FromAnthropic{} }

// FromAnthropicHints are what FromAnthropic drops (adapter.Hints): top_k
// (OpenAI has none), cache_control breakpoints (OpenAI caches on its own),
// service_tier, container, inference_geo and context_management (Claude
// Code's server-side context editing: the conversation is sent whole
// instead), redacted_thinking blocks (opaque to anyone but Anthropic) and
// thinking signatures (OpenAI-compatible servers take the thinking text
// back as reasoning_content and need no signature).
var FromAnthropicHints = adapter.Hints{
	"top_k", "system[].cache_control", "messages[].content[].cache_control",
	"messages[].content[].content[].cache_control", "tools[].cache_control",
	"service_tier", "container", "inference_geo", "context_management",
	"messages[].content[type=redacted_thinking]", "messages[].content[].signature",
}

// anthropicOrigins are the Messages fields the chat fields FromAnthropic
// fills come from, where the names differ (adapter.Origins).
var anthropicOrigins = adapter.Origins{
	"user":                         "metadata.user_id",
	"parallel_tool_calls":          "tool_choice.disable_parallel_tool_use",
	"tools[].function.strict":      "tools[].strict",
	"messages[].reasoning_content": "messages[].content[type=thinking]",
}

// Dropped names the caller's hints the last Request left out.
func (t *FromAnthropic) Dropped() []string { return t.dropped }

// Origin names the caller's field the chat field hub of the last Request
// came from; "" when the caller sent none.
func (t *FromAnthropic) Origin(hub string) string { return anthropicOrigins.Sent(t.caller, hub) }

// reasoningEfforts maps an Anthropic thinking budget to OpenAI's
// reasoning_effort (docs/translators.md, "Request parameters"): the largest effort whose
// floor the budget reaches.
var reasoningEfforts = []struct {
	floor  int64
	effort string
}{{16384, "high"}, {4096, "medium"}, {0, "low"}}

// Request returns the chat body for the caller's Messages request. The
// upstream is always asked for the usage of a stream (policy).
func (t *FromAnthropic) Request(req *sluice.Request, model string) ([]byte, error) {
	var in anthropic.Request
	if err := json.Unmarshal(req.Body, &in); err != nil {
		return nil, adapter.Untranslatable("request body is not a valid Messages request: %v", err)
	}
	if adapter.Present(in.MCPServers) {
		return nil, adapter.Untranslatable("mcp_servers are not supported by this model's upstream (OpenAI chat)")
	}
	if len(in.StopSequences) > 4 {
		return nil, adapter.Untranslatable("at most 4 stop_sequences are supported by this model's upstream (OpenAI chat)")
	}
	t.caller = req.Body
	t.dropped = FromAnthropicHints.Sent(req.Body)
	out := wire.ChatRequest{
		Model:       model,
		Stream:      in.Stream,
		Temperature: in.Temperature,
		TopP:        in.TopP,
		Stop:        in.StopSequences,
	}
	if in.MaxTokens > 0 {
		if thinks(&in) {
			out.MaxCompletionTokens = &in.MaxTokens
		} else {
			out.MaxTokens = &in.MaxTokens
		}
	}
	if in.Stream {
		out.StreamOptions = &wire.StreamOptions{IncludeUsage: true}
	}
	if in.System != nil {
		text, err := systemText(in.System)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, wire.ChatMessage{Role: "system", Content: wire.TextContent(text)})
	}
	for i, m := range in.Messages {
		var err error
		if out.Messages, err = appendTurn(out.Messages, &m); err != nil {
			if e, ok := errors.AsType[*sluice.Error](err); ok { // the caller learns which message
				e.Msg = fmt.Sprintf("messages[%d]: %s", i, e.Msg)
			}
			return nil, err
		}
	}
	if err := t.declareTools(&in, &out); err != nil {
		return nil, err
	}
	out.ReasoningEffort = reasoningEffort(&in)
	if oc := in.OutputConfig; oc != nil && oc.Format != nil {
		strict := true
		out.ResponseFormat = &wire.ResponseFormat{Type: "json_schema", JSONSchema: &wire.JSONSchema{Name: "output", Schema: oc.Format.Schema, Strict: &strict}}
	}
	if in.Metadata != nil {
		out.User = in.Metadata.UserID
	}
	return json.Marshal(&out)
}

// systemText joins the system prompt's text blocks.
func systemText(c *anthropic.Content) (string, error) {
	var parts []string
	for _, b := range c.AsBlocks() {
		if b.Type != "text" {
			return "", adapter.Untranslatable("system: block %q is not supported; only text is", b.Type)
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n\n"), nil
}

// appendTurn appends the chat messages of one Anthropic turn. A user turn's
// tool_result blocks become tool messages, which come first (they answer
// the assistant turn before); its other blocks a user message after them,
// with the images of the tool results, which a tool message cannot carry
// (docs/translators.md, "System prompt and roles"). An assistant turn becomes one assistant
// message: text, thinking as reasoning_content, tool_use as tool_calls.
func appendTurn(out []wire.ChatMessage, m *anthropic.MessageParam) ([]wire.ChatMessage, error) {
	switch m.Role {
	case "user":
		var parts []wire.ContentPart
		for _, b := range m.Content.AsBlocks() {
			if b.Type == "tool_result" {
				text, images, err := toolResult(&b)
				if err != nil {
					return nil, err
				}
				out = append(out, wire.ChatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: wire.TextContent(text)})
				parts = append(parts, images...)
				continue
			}
			p, err := userPart(&b)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			out = append(out, wire.ChatMessage{Role: "user", Content: &wire.Content{Parts: parts}})
		}
		return out, nil
	case "assistant":
		msg := wire.ChatMessage{Role: "assistant"}
		var text, reasoning strings.Builder
		for _, b := range m.Content.AsBlocks() {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "thinking":
				reasoning.WriteString(b.Thinking)
			case "redacted_thinking":
			case "tool_use":
				input := string(b.Input)
				if input == "" {
					input = "{}"
				}
				msg.ToolCalls = append(msg.ToolCalls, wire.ToolCall{ID: b.ID, Type: "function", Function: wire.FunctionCall{Name: b.Name, Arguments: input}})
			default:
				return nil, adapter.Untranslatable("assistant block %q is not supported by this model's upstream (OpenAI chat)", b.Type)
			}
		}
		if text.Len() > 0 || msg.ToolCalls == nil {
			msg.Content = wire.TextContent(text.String())
		}
		msg.ReasoningContent = reasoning.String()
		return append(out, msg), nil
	case "system": // not in Anthropic's docs, but in its 2026 SDK
		text, err := systemText(m.Content)
		if err != nil {
			return nil, err
		}
		return append(out, wire.ChatMessage{Role: "system", Content: wire.TextContent(text)}), nil
	}
	return nil, adapter.Untranslatable("role %q is not supported", m.Role)
}

// toolResult is a tool_result's text (prefixed "Error: " when it reports a
// failure, policy) and its images as user content parts.
func toolResult(b *anthropic.Block) (string, []wire.ContentPart, error) {
	var text strings.Builder
	if b.IsError {
		text.WriteString("Error: ")
	}
	var images []wire.ContentPart
	for _, c := range b.Content.AsBlocks() {
		switch c.Type {
		case "text":
			text.WriteString(c.Text)
		case "image":
			p, err := userPart(&c)
			if err != nil {
				return "", nil, err
			}
			images = append(images, p)
		default:
			return "", nil, adapter.Untranslatable("tool_result block %q is not supported by this model's upstream (OpenAI chat)", c.Type)
		}
	}
	return text.String(), images, nil
}

// userPart translates one block of a user turn.
func userPart(b *anthropic.Block) (wire.ContentPart, error) {
	switch b.Type {
	case "text":
		return wire.ContentPart{Type: "text", Text: b.Text}, nil
	case "image":
		if s := b.Source; s != nil && s.Type == "base64" {
			return wire.ContentPart{Type: "image_url", ImageURL: &wire.ImageURL{URL: "data:" + s.MediaType + ";base64," + s.Data}}, nil
		} else if s != nil && s.Type == "url" {
			return wire.ContentPart{Type: "image_url", ImageURL: &wire.ImageURL{URL: s.URL}}, nil
		}
		return wire.ContentPart{}, adapter.Untranslatable("image sources other than base64 and url are not supported by this model's upstream (OpenAI chat)")
	case "document":
		if s := b.Source; s != nil && s.Type == "base64" && s.MediaType == "application/pdf" {
			return wire.ContentPart{Type: "file", File: &wire.File{FileData: "data:application/pdf;base64," + s.Data, Filename: "document.pdf"}}, nil
		}
		return wire.ContentPart{}, adapter.Untranslatable("documents other than base64 PDFs are not supported by this model's upstream (OpenAI chat)")
	}
	return wire.ContentPart{}, adapter.Untranslatable("user block %q is not supported by this model's upstream (OpenAI chat)", b.Type)
}

// declareTools translates the tool declarations and tool_choice, whose
// disable_parallel_tool_use is OpenAI's parallel_tool_calls inverted.
func (t *FromAnthropic) declareTools(in *anthropic.Request, out *wire.ChatRequest) error {
	for i, tl := range in.Tools {
		if tl.Type != "" && tl.Type != "custom" {
			return adapter.Untranslatable("tools[%d]: server tool %q is not supported by this model's upstream (OpenAI chat)", i, tl.Type)
		}
		out.Tools = append(out.Tools, wire.Tool{Type: "function", Function: wire.FunctionDecl{Name: tl.Name, Description: tl.Description, Parameters: tl.InputSchema, Strict: tl.Strict}})
	}
	tc := in.ToolChoice
	if tc == nil || len(out.Tools) == 0 { // without tools a choice says nothing, and OpenAI refuses it
		return nil
	}
	var choice any
	switch tc.Type {
	case "auto", "none":
		choice = tc.Type
	case "any":
		choice = "required"
	case "tool":
		fn := wire.ToolChoiceFunction{Type: "function"}
		fn.Function.Name = tc.Name
		choice = fn
	default:
		return adapter.Untranslatable("tool_choice %q is not supported", tc.Type)
	}
	var err error
	if out.ToolChoice, err = json.Marshal(choice); err != nil {
		return err
	}
	if tc.DisableParallelToolUse {
		no := false
		out.ParallelToolCalls = &no
	}
	return nil
}

// thinks reports whether the caller asked for thinking (enabled, or
// adaptive). Only then is the upstream asked to reason, and the output cap
// sent as max_completion_tokens; otherwise as max_tokens (policy). The
// rule serves both kinds of chat upstream Claude Code meets: OpenAI's
// reasoning models refuse max_tokens and need max_completion_tokens, which
// also counts their reasoning (docs/translators.md, "Request parameters"), while many
// OpenAI-compatible servers read only max_tokens (Ollama, LM Studio,
// llama.cpp) or refuse fields they do not know, and reasoning_effort means
// nothing to a model that does not reason. What it cannot serve: an OpenAI
// reasoning model asked without thinking (it refuses max_tokens), and a
// server that reads only max_tokens asked with thinking (it ignores the
// cap).
func thinks(in *anthropic.Request) bool {
	th := in.Thinking
	return th != nil && (th.Type == "enabled" || th.Type == "adaptive")
}

// reasoningEffort is the reasoning_effort for the request's thinking:
// none when the caller did not ask for thinking (output_config.effort
// alone asks for none either); by budget when enabled; output_config.effort
// when adaptive, and none when that sets no effort (the model's default
// then, since older models refuse "none").
func reasoningEffort(in *anthropic.Request) string {
	if !thinks(in) {
		return ""
	}
	if th := in.Thinking; th.Type == "enabled" {
		for _, e := range reasoningEfforts {
			if th.BudgetTokens >= e.floor {
				return e.effort
			}
		}
	}
	if oc := in.OutputConfig; oc != nil {
		return oc.Effort
	}
	return ""
}

// stopReasons maps OpenAI's finish_reason to Anthropic's stop_reason
// (docs/translators.md, "Finish reasons"); anything else is end_turn.
var stopReasons = map[string]string{
	"length":         "max_tokens",
	"tool_calls":     "tool_use",
	"function_call":  "tool_use",
	"content_filter": "refusal",
}

func stopReason(finish string, refusal bool) string {
	if refusal {
		return "refusal"
	}
	if r, ok := stopReasons[finish]; ok {
		return r
	}
	return "end_turn"
}

// messageID is the Anthropic id for an OpenAI answer's.
func messageID(id string) string { return "msg_" + id }

// Response returns the Messages answer for a whole chat completion.
func (t *FromAnthropic) Response(body []byte) ([]byte, error) {
	var in wire.Completion
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("openai answer: %w", err)
	}
	if in.Usage != nil {
		t.usage = in.Usage.Sluice()
	}
	out := anthropic.Message{ID: messageID(in.ID), Type: "message", Role: "assistant", Model: in.Model, Content: []anthropic.Block{}, Usage: anthropic.UsageOf(t.usage)}
	var finish string
	refusal := false
	if len(in.Choices) > 0 {
		c := &in.Choices[0]
		finish = c.FinishReason
		m := &c.Message
		if m.ReasoningContent != "" {
			out.Content = append(out.Content, anthropic.Block{Type: "thinking", Thinking: m.ReasoningContent})
		}
		if text := m.Content.PlainText(); text != "" {
			out.Content = append(out.Content, anthropic.Block{Type: "text", Text: text})
		}
		if m.Refusal != "" {
			out.Content = append(out.Content, anthropic.Block{Type: "text", Text: m.Refusal})
			refusal = true
		}
		for _, tc := range m.ToolCalls {
			out.Content = append(out.Content, anthropic.Block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: toolInput(tc.Function.Arguments)})
		}
	}
	reason := stopReason(finish, refusal)
	out.StopReason = &reason
	return json.Marshal(&out)
}

// toolInput is a tool call's arguments as an Anthropic input object. The
// model may write arguments that are not a JSON object: they are kept as
// {"_raw": "…"} rather than lost (docs/translators.md, "Tools").
func toolInput(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage(`{}`)
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	raw, _ := json.Marshal(map[string]string{"_raw": args})
	return raw
}

// Error returns Anthropic's error body for an OpenAI error answer, its
// type chosen by the status as Anthropic would send it.
func (t *FromAnthropic) Error(status int, body []byte) []byte {
	var in wire.ErrorEnvelope
	msg := http.StatusText(status)
	if json.Unmarshal(body, &in) == nil && in.Error.Message != "" {
		msg = in.Error.Message
	}
	out, _ := json.Marshal(&anthropic.ErrorEnvelope{Type: "error", Error: anthropic.ErrorBody{Type: anthropic.ErrorType(status), Message: msg}})
	return out
}
