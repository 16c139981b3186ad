package openai

import (
	"encoding/json"

	"github.com/sluicehq/sluice/internal/protocol"
)

// This file holds the OpenAI Responses wire types, shared by the two
// translations between Responses and chat: adapter/openai/from_responses.go
// (a Responses caller, a chat upstream) and package adapter/responses (a
// chat caller, a Responses upstream).

// ResponsesRequest is a Responses request body: the fields a translator
// reads or writes. Fields that need state the upstream keeps
// (previous_response_id, conversation, prompt, background) are read so a
// translator can refuse them.
type ResponsesRequest struct {
	Model              string            `json:"model"`
	Input              *Input            `json:"input,omitempty"`
	Instructions       json.RawMessage   `json:"instructions,omitempty"` // a string, or a list of input items
	Stream             bool              `json:"stream,omitempty"`
	StreamOptions      json.RawMessage   `json:"stream_options,omitempty"`
	Store              *bool             `json:"store,omitempty"` // the API's default is true
	Tools              []ResponsesTool   `json:"tools,omitempty"`
	ToolChoice         json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens    *int64            `json:"max_output_tokens,omitempty"`
	MaxToolCalls       *int64            `json:"max_tool_calls,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"top_p,omitempty"`
	TopLogprobs        *int64            `json:"top_logprobs,omitempty"`
	Reasoning          *Reasoning        `json:"reasoning,omitempty"`
	Text               *TextConfig       `json:"text,omitempty"`
	Truncation         string            `json:"truncation,omitempty"`
	Include            []string          `json:"include,omitempty"`
	ServiceTier        string            `json:"service_tier,omitempty"`
	PromptCacheKey     string            `json:"prompt_cache_key,omitempty"`
	PromptCacheRetain  json.RawMessage   `json:"prompt_cache_retention,omitempty"`
	SafetyIdentifier   string            `json:"safety_identifier,omitempty"`
	User               string            `json:"user,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	Conversation       json.RawMessage   `json:"conversation,omitempty"`
	Background         bool              `json:"background,omitempty"`
	Prompt             json.RawMessage   `json:"prompt,omitempty"`
	ContextManagement  json.RawMessage   `json:"context_management,omitempty"`
}

// Input is a Responses request's input: a plain string (Items nil) or a
// list of items.
type Input struct {
	Text  string
	Items []InputItem
}

// MarshalJSON writes the items when there are any, else the string.
func (in Input) MarshalJSON() ([]byte, error) {
	return protocol.MarshalTextOr(in.Text, in.Items)
}

// UnmarshalJSON reads a string or a list of items.
func (in *Input) UnmarshalJSON(b []byte) error {
	return protocol.UnmarshalTextOr(b, &in.Text, &in.Items)
}

// InputItem is one item of a Responses input, of any type: a message
// (Type "message" or empty, with Role and Content), a function_call
// (CallID, Name, Arguments), a function_call_output (CallID, Output), a
// reasoning item, or a type no translation carries.
type InputItem struct {
	Type      string          `json:"type,omitempty"`
	ID        string          `json:"id,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   *InputContent   `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Namespace string          `json:"namespace,omitempty"` // a function_call's: the namespace tool its function is in
	Arguments string          `json:"arguments,omitempty"`
	Output    *InputContent   `json:"output,omitempty"`
	Status    string          `json:"status,omitempty"`
	Summary   json.RawMessage `json:"summary,omitempty"`
	Encrypted string          `json:"encrypted_content,omitempty"`
}

// InputContent is a message's content or a function call's output: a
// plain string (Parts nil) or a list of parts.
type InputContent struct {
	Text  string
	Parts []InputPart
}

// MarshalJSON writes the parts when there are any, else the string.
func (c InputContent) MarshalJSON() ([]byte, error) {
	return protocol.MarshalTextOr(c.Text, c.Parts)
}

// UnmarshalJSON reads a string or a list of parts.
func (c *InputContent) UnmarshalJSON(b []byte) error {
	return protocol.UnmarshalTextOr(b, &c.Text, &c.Parts)
}

// InputPart is one part of an input message's content: input_text,
// input_image, input_file, or, in an assistant message replayed from an
// earlier answer, output_text and refusal.
type InputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Refusal  string `json:"refusal,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// ResponsesTool is one tool a Responses request declares. Function tools
// are flat (no "function" object, unlike chat's); every other type is a
// tool the Responses API runs itself (web_search, file_search, …).
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"` // the Responses API's default is true, chat's false
	Tools       []ResponsesTool `json:"tools,omitempty"`  // a namespace tool's functions
}

// ResponsesToolChoice is the object form of a Responses tool_choice:
// {"type":"function","name"} or {"type":"allowed_tools","mode","tools"}.
// A function of a namespace tool is named with its namespace, as a
// function_call item names it ({"type":"function","namespace","name"}),
// or by its flattened chat name.
type ResponsesToolChoice struct {
	Type      string             `json:"type"`
	Name      string             `json:"name,omitempty"`
	Namespace string             `json:"namespace,omitempty"`
	Mode      string             `json:"mode,omitempty"`
	Tools     []ResponsesToolRef `json:"tools,omitempty"`
}

// ResponsesToolRef is a tool an allowed_tools tool_choice names.
type ResponsesToolRef struct {
	Type      string `json:"type"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Reasoning is a Responses request's reasoning settings.
type Reasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// TextConfig is a Responses request's text settings: the output format
// (plain text or JSON) and the verbosity.
type TextConfig struct {
	Format    *TextFormat `json:"format,omitempty"`
	Verbosity string      `json:"verbosity,omitempty"`
}

// TextFormat is the output format: text, json_object, or json_schema with
// the schema's fields flat beside the type (unlike chat's response_format).
type TextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Response is a Responses answer: the whole body, and the response object
// that the lifecycle events of a stream carry.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // "response"
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"` // completed, incomplete, failed, in_progress, …
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       json.RawMessage    `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          *Reasoning         `json:"reasoning,omitempty"`
	ServiceTier        string             `json:"service_tier,omitempty"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               *TextConfig        `json:"text,omitempty"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []ResponsesTool    `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation,omitempty"`
	PromptCacheKey     string             `json:"prompt_cache_key,omitempty"`
	SafetyIdentifier   string             `json:"safety_identifier,omitempty"`
	User               string             `json:"user,omitempty"`
	Metadata           map[string]string  `json:"metadata"`
	Usage              *ResponsesUsage    `json:"usage"`
}

// ResponseError is why a response failed.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete: max_output_tokens
// or content_filter.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// OutputItem is one item of a response's output, of any type: a message
// (Role, Content), a function_call (CallID, Name, Arguments), or another
// (reasoning, a built-in tool's call) that chat cannot carry.
type OutputItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Status    string          `json:"status,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   []OutputPart    `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Namespace string          `json:"namespace,omitempty"` // a function_call's: the namespace tool its function is in
	Arguments *string         `json:"arguments,omitempty"` // a pointer so that "" is written in an added event
	Summary   json.RawMessage `json:"summary,omitempty"`   // a reasoning item's: summary_text parts
}

// OutputPart is one part of an output item's content: output_text (Text,
// Annotations) or refusal (Refusal) in a message, reasoning_text (Text) in
// reasoning; or one of a reasoning item's summary_text parts (Text).
type OutputPart struct {
	Type        string           `json:"type"`
	Text        *string          `json:"text,omitempty"`
	Refusal     *string          `json:"refusal,omitempty"`
	Annotations *json.RawMessage `json:"annotations,omitempty"`
}

// StreamEvent is one event of a Responses stream, of any type: the fields
// of every type a translator reads. Response is set on the lifecycle
// events (response.created … response.completed, .incomplete, .failed);
// Item on output_item.added/.done; Delta on the *.delta events; Code,
// Message and Param on an error event.
type StreamEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int64           `json:"sequence_number"`
	Response       *Response       `json:"response,omitempty"`
	OutputIndex    int             `json:"output_index"`
	ContentIndex   int             `json:"content_index"`
	ItemID         string          `json:"item_id,omitempty"`
	Item           *OutputItem     `json:"item,omitempty"`
	Delta          string          `json:"delta,omitempty"`
	Code           json.RawMessage `json:"code,omitempty"`
	Message        string          `json:"message,omitempty"`
	Param          *string         `json:"param,omitempty"`
}
