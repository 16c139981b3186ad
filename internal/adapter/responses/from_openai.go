// Package responses translates between the protocols callers speak and an
// upstream that speaks OpenAI Responses, one file per caller protocol
// (from_openai.go: an OpenAI chat caller). The Responses wire types live in
// package adapter/openai (responses.go), which the reverse translation
// shares. The package depends only on package sluice, package adapter,
// package adapter/openai and the standard library.
package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// FromOpenAI carries one execution of an OpenAI chat caller on an OpenAI
// Responses upstream: messages become instructions and input items, and
// the Responses answer (whole or streamed) becomes a chat completion or
// its chunks. The upstream is always asked not to store the response: a
// chat caller can never refer to it. What Responses cannot express and
// would change the answer (n > 1, stop sequences, logprobs, audio, custom
// tools, …) is refused with a 400 (refuse). Dropped, and named (Dropped):
// FromOpenAIHints.
//
// One value per execution; not safe for concurrent use.
type FromOpenAI struct {
	includeUsage bool // the caller asked for a usage chunk
	usage        sluice.Usage
	stream       chatStream
	dropped      []string
}

var _ adapter.Translator = (*FromOpenAI)(nil)

// NewFromOpenAI returns the translator of one execution.
func NewFromOpenAI() *FromOpenAI { return new(FromOpenAI) }

// FromOpenAIHints are what FromOpenAI drops (adapter.Hints): seed and the
// penalties, sampling hints the Responses API has no field for, store (a
// stored chat completion, for OpenAI's evals and distillation, is not a
// stored response, and a translated request is sent with store false, as
// toward Messages and Gemini, where nothing is stored either), prediction
// (a latency hint it has none for), and an assistant message's
// reasoning_content (a Responses upstream takes only its own reasoning
// items back).
var FromOpenAIHints = adapter.Hints{"seed", "frequency_penalty", "presence_penalty", "store", "prediction", "messages[].reasoning_content"}

// Dropped names the caller's hints the last Request left out.
func (t *FromOpenAI) Dropped() []string { return t.dropped }

// chatRequest is a chat request with the fields Responses shares that
// openai.ChatRequest does not read.
type chatRequest struct {
	openai.ChatRequest
	PromptCacheKey       string            `json:"prompt_cache_key"`
	PromptCacheRetention json.RawMessage   `json:"prompt_cache_retention"`
	ServiceTier          string            `json:"service_tier"`
	Verbosity            string            `json:"verbosity"`
	Metadata             map[string]string `json:"metadata"`
}

// Request returns the Responses request for the caller's chat request.
func (t *FromOpenAI) Request(req *sluice.Request, model string) ([]byte, error) {
	var in chatRequest
	if err := json.Unmarshal(req.Body, &in); err != nil {
		return nil, adapter.Untranslatable("the body is not a valid chat completions request: %v", err)
	}
	if err := refuse(&in); err != nil {
		return nil, err
	}
	t.dropped = FromOpenAIHints.Sent(req.Body)
	t.includeUsage = req.IncludeUsage
	f := false
	out := openai.ResponsesRequest{
		Model:             model,
		Stream:            req.Stream,
		Store:             &f,
		ParallelToolCalls: in.ParallelToolCalls,
		MaxOutputTokens:   in.MaxCompletionTokens,
		Temperature:       in.Temperature,
		TopP:              in.TopP,
		ServiceTier:       in.ServiceTier,
		PromptCacheKey:    in.PromptCacheKey,
		PromptCacheRetain: in.PromptCacheRetention,
		SafetyIdentifier:  in.SafetyIdentifier,
		User:              in.User,
		Metadata:          in.Metadata,
	}
	if out.MaxOutputTokens == nil {
		out.MaxOutputTokens = in.MaxTokens
	}
	var err error
	if out.Instructions, out.Input, err = input(in.Messages); err != nil {
		return nil, err
	}
	if out.Tools, err = tools(in.Tools); err != nil {
		return nil, err
	}
	if out.ToolChoice, err = toolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	if in.ReasoningEffort != "" {
		out.Reasoning = &openai.Reasoning{Effort: in.ReasoningEffort}
	}
	format, err := textFormat(in.ResponseFormat)
	if err != nil {
		return nil, err
	}
	if format != nil || in.Verbosity != "" {
		out.Text = &openai.TextConfig{Format: format, Verbosity: in.Verbosity}
	}
	return json.Marshal(&out)
}

// refuse returns the 400 for the first field the Responses API has no
// equivalent of.
func refuse(in *chatRequest) error {
	field := ""
	switch {
	case in.N != nil && *in.N > 1:
		field = "n > 1"
	case len(in.Stop) > 0:
		field = "stop"
	case in.Logprobs || in.TopLogprobs != nil && *in.TopLogprobs > 0:
		field = "logprobs"
	case adapter.Present(in.LogitBias):
		field = "logit_bias"
	case adapter.Present(in.Audio) || len(in.Modalities) > 1 || len(in.Modalities) == 1 && in.Modalities[0] != "text":
		field = "audio output"
	case adapter.Present(in.WebSearchOptions):
		field = "web_search_options"
	case adapter.Present(in.Functions) || adapter.Present(in.FunctionCall):
		field = "functions and function_call (use tools and tool_choice)"
	default:
		return nil
	}
	return adapter.Untranslatable("%s cannot be expressed on this model's upstream (OpenAI Responses)", field)
}

// input turns chat messages into instructions (the leading system or
// developer message, when it is text) and input items: each message a
// message item, an assistant's tool calls function_call items after it,
// and each tool message a function_call_output, which must answer a call
// made earlier.
func input(msgs []openai.ChatMessage) (json.RawMessage, *openai.Input, error) {
	var instructions json.RawMessage
	if len(msgs) > 0 && (msgs[0].Role == "system" || msgs[0].Role == "developer") && msgs[0].Content != nil && msgs[0].Content.Parts == nil && msgs[0].Name == "" {
		instructions, _ = json.Marshal(msgs[0].Content.Text)
		msgs = msgs[1:]
	}
	items := make([]openai.InputItem, 0, len(msgs))
	calls := make(map[string]bool)
	for i, m := range msgs {
		if m.Name != "" || adapter.Present(m.Audio) || adapter.Present(m.FunctionCall) {
			return nil, nil, adapter.Untranslatable("messages[%d]: name, audio and function_call cannot be expressed on this model's upstream (OpenAI Responses)", i)
		}
		switch m.Role {
		case "system", "developer", "user":
			content, err := inputContent(i, m.Role, m.Content)
			if err != nil {
				return nil, nil, err
			}
			items = append(items, openai.InputItem{Type: "message", Role: m.Role, Content: content})
		case "assistant":
			// A refusal replayed becomes the assistant's text: what the
			// model said. Reasoning text some compatible servers return
			// (reasoning_content) is not replayed (FromOpenAIHints).
			text := m.Content.PlainText()
			if text == "" {
				text = m.Refusal
			}
			if text != "" || len(m.ToolCalls) == 0 {
				items = append(items, openai.InputItem{Type: "message", Role: "assistant", Content: &openai.InputContent{Text: text}})
			}
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = true
				items = append(items, openai.InputItem{Type: "function_call", CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
		case "tool":
			if !calls[m.ToolCallID] {
				return nil, nil, adapter.Untranslatable("messages[%d]: tool_call_id %q answers no tool call earlier in the messages", i, m.ToolCallID)
			}
			out, err := inputContent(i, "tool", m.Content)
			if err != nil {
				return nil, nil, err
			}
			items = append(items, openai.InputItem{Type: "function_call_output", CallID: m.ToolCallID, Output: out})
		default:
			return nil, nil, adapter.Untranslatable("messages[%d]: role %q cannot be expressed on this model's upstream (OpenAI Responses)", i, m.Role)
		}
	}
	return instructions, &openai.Input{Items: items}, nil
}

// inputContent turns a message's content into an input message's (or a
// function call output's): text, images and files; only text outside a
// user message.
func inputContent(i int, role string, c *openai.Content) (*openai.InputContent, error) {
	if c == nil {
		return &openai.InputContent{}, nil
	}
	if c.Parts == nil {
		return &openai.InputContent{Text: c.Text}, nil
	}
	parts := make([]openai.InputPart, 0, len(c.Parts))
	for j, p := range c.Parts {
		var ip openai.InputPart
		switch {
		case p.Type == "text":
			ip = openai.InputPart{Type: "input_text", Text: p.Text}
		case p.Type == "image_url" && p.ImageURL != nil && role == "user":
			ip = openai.InputPart{Type: "input_image", ImageURL: p.ImageURL.URL, Detail: p.ImageURL.Detail}
			if ip.Detail == "" {
				ip.Detail = "auto" // required by the Responses API, chat's default
			}
		case p.Type == "file" && p.File != nil && role == "user":
			ip = openai.InputPart{Type: "input_file", FileData: p.File.FileData, FileID: p.File.FileID, Filename: p.File.Filename}
		default:
			return nil, adapter.Untranslatable("messages[%d].content[%d]: a %s message's content of type %q cannot be expressed on this model's upstream (OpenAI Responses)", i, j, role, p.Type)
		}
		parts = append(parts, ip)
	}
	return &openai.InputContent{Parts: parts}, nil
}

// noParameters is the schema of a function declared without parameters.
var noParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// tools turns chat function tools into Responses ones. strict is always
// written: chat's default is false, the Responses API's true.
func tools(in []openai.Tool) ([]openai.ResponsesTool, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]openai.ResponsesTool, 0, len(in))
	for i, tl := range in {
		if tl.Type != "function" {
			return nil, adapter.Untranslatable("tools[%d]: tools of type %q cannot be expressed on this model's upstream (OpenAI Responses)", i, tl.Type)
		}
		strict := tl.Function.Strict != nil && *tl.Function.Strict
		params := tl.Function.Parameters
		if !adapter.Present(params) {
			params = noParameters
		}
		out = append(out, openai.ResponsesTool{Type: "function", Name: tl.Function.Name, Description: tl.Function.Description, Parameters: params, Strict: &strict})
	}
	return out, nil
}

// chatAllowedTools is chat's allowed_tools tool_choice, as read.
type chatAllowedTools struct {
	AllowedTools struct {
		Mode  string                      `json:"mode"`
		Tools []openai.ToolChoiceFunction `json:"tools"`
	} `json:"allowed_tools"`
}

// toolChoice turns chat's tool_choice into the Responses one: the same
// strings, and the function and allowed_tools objects reshaped.
func toolChoice(raw json.RawMessage) (json.RawMessage, error) {
	if !adapter.Present(raw) || raw[0] == '"' {
		return raw, nil
	}
	var c struct {
		openai.ToolChoiceFunction
		chatAllowedTools
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, adapter.Untranslatable("tool_choice: %v", err)
	}
	switch c.Type {
	case "function":
		return json.Marshal(openai.ResponsesToolChoice{Type: "function", Name: c.Function.Name})
	case "allowed_tools":
		out := openai.ResponsesToolChoice{Type: "allowed_tools", Mode: c.AllowedTools.Mode}
		for _, f := range c.AllowedTools.Tools {
			if f.Type != "function" {
				return nil, adapter.Untranslatable("tool_choice.allowed_tools: tools of type %q cannot be expressed on this model's upstream (OpenAI Responses)", f.Type)
			}
			out.Tools = append(out.Tools, openai.ResponsesToolRef{Type: "function", Name: f.Function.Name})
		}
		return json.Marshal(out)
	}
	return nil, adapter.Untranslatable("tool_choice of type %q cannot be expressed on this model's upstream (OpenAI Responses)", c.Type)
}

// textFormat turns response_format into text.format.
func textFormat(f *openai.ResponseFormat) (*openai.TextFormat, error) {
	switch {
	case f == nil:
		return nil, nil
	case f.Type == "text" || f.Type == "json_object":
		return &openai.TextFormat{Type: f.Type}, nil
	case f.Type == "json_schema" && f.JSONSchema != nil:
		s := f.JSONSchema
		return &openai.TextFormat{Type: "json_schema", Name: s.Name, Description: s.Description, Schema: s.Schema, Strict: s.Strict}, nil
	}
	return nil, adapter.Untranslatable("response_format of type %q cannot be expressed on this model's upstream (OpenAI Responses)", f.Type)
}

// completion is a chat completion with the service tier the upstream used.
type completion struct {
	openai.Completion
	ServiceTier string `json:"service_tier,omitempty"`
}

// Response returns the chat completion for a whole Responses answer.
func (t *FromOpenAI) Response(body []byte) ([]byte, error) {
	var r openai.Response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	if r.Status == "failed" {
		msg := "the upstream response failed"
		if r.Error != nil {
			msg = r.Error.Message
		}
		return nil, &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: msg, Err: fmt.Errorf("response %s failed", r.ID)}
	}
	if r.Usage != nil {
		t.usage = r.Usage.Sluice()
	}
	msg := openai.ChatMessage{Role: "assistant"}
	var text, reasoning, refusal strings.Builder // joined in place: += would copy the whole per part
	for _, it := range r.Output {
		switch it.Type {
		case "reasoning":
			reasoningText(&reasoning, &it)
		case "message":
			for _, p := range it.Content {
				if p.Text != nil {
					text.WriteString(*p.Text)
				}
				if p.Refusal != nil {
					refusal.WriteString(*p.Refusal)
				}
			}
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: it.CallID, Type: "function", Function: openai.FunctionCall{Name: it.Name, Arguments: args}})
		}
		// Other items answer tools a chat caller cannot declare.
	}
	msg.ReasoningContent, msg.Refusal = reasoning.String(), refusal.String()
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content = openai.TextContent(text.String())
	}
	out := completion{
		Completion: openai.Completion{
			ID:      chatID(r.ID),
			Object:  "chat.completion",
			Created: r.CreatedAt,
			Model:   r.Model,
			Choices: []openai.Choice{{Message: msg, FinishReason: finishReason(&r, len(msg.ToolCalls) > 0)}},
		},
		ServiceTier: r.ServiceTier,
	}
	if r.Usage != nil {
		out.Usage = openai.UsageOf(t.usage)
	}
	return json.Marshal(&out)
}

// reasoningText writes a reasoning item's text to b, for chat's
// non-standard reasoning_content (as compatible servers send it, and the
// other translators do): the reasoning itself, else its summary, which is
// all OpenAI's models give.
func reasoningText(b *strings.Builder, it *openai.OutputItem) {
	parts := it.Content
	if len(parts) == 0 && adapter.Present(it.Summary) {
		_ = json.Unmarshal(it.Summary, &parts) // a summary that is not a list of parts has no text
	}
	for _, p := range parts {
		if p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
}

// chatID is the chat completion id of a response id (resp_9x →
// chatcmpl-9x), as the reverse translation derives one from the other.
func chatID(respID string) string { return "chatcmpl-" + strings.TrimPrefix(respID, "resp_") }

// finishReason is chat's finish_reason for how a response ended.
func finishReason(r *openai.Response, toolCalls bool) string {
	if r.Status == "incomplete" && r.IncompleteDetails != nil {
		switch r.IncompleteDetails.Reason {
		case "max_output_tokens":
			return "length"
		case "content_filter":
			return "content_filter"
		}
	}
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

// Error returns the caller's error body for a Responses upstream's error:
// chat and Responses share the envelope, so it is the upstream's, in a
// well-formed one.
func (t *FromOpenAI) Error(status int, body []byte) []byte {
	return openai.ErrorEnvelopeOf(status, body)
}
