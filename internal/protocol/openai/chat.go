package openai

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/sluicehq/sluice/internal/protocol"
)

// ChatRequest is a chat completions request body: the fields a translator
// reads or writes. Fields a translator does not know are not decoded; each
// translator says which of those it refuses and which it drops.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []ChatMessage   `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	Stop                Stop            `json:"stop,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	N                   *int64          `json:"n,omitempty"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"` // "auto" | "none" | "required" | {"type":"function",…}
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	User                string          `json:"user,omitempty"`
	SafetyIdentifier    string          `json:"safety_identifier,omitempty"`

	// Fields other protocols cannot express: read so a translator can
	// refuse them when set.
	Logprobs     bool            `json:"logprobs,omitempty"`
	TopLogprobs  *int64          `json:"top_logprobs,omitempty"`
	LogitBias    json.RawMessage `json:"logit_bias,omitempty"`
	Modalities   []string        `json:"modalities,omitempty"`
	Audio        json.RawMessage `json:"audio,omitempty"`
	Functions    json.RawMessage `json:"functions,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
	// WebSearchOptions asks a search model to search the web: no
	// translator turns it into the other side's web search tool.
	WebSearchOptions json.RawMessage `json:"web_search_options,omitempty"`
}

// Stop is the "stop" field: one string or a list of them, decoded to a list.
type Stop []string

// UnmarshalJSON accepts a string, a list of strings or null.
func (s *Stop) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(b, []byte(`"`)) {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

// StreamOptions are the stream's options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one message of a request, or the message of an answer.
type ChatMessage struct {
	Role             string     `json:"role"`
	Content          *Content   `json:"content,omitempty"`
	Name             string     `json:"name,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Refusal          string     `json:"refusal,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"` // non-standard: thinking text, as DeepSeek and others send it
	// Audio and FunctionCall have no equivalent elsewhere: read so a
	// translator can refuse them.
	Audio        json.RawMessage `json:"audio,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
}

// Content is a message's content: a plain string (Parts nil) or a list of
// parts. A null or absent content is a nil *Content.
type Content struct {
	Text  string
	Parts []ContentPart
}

// TextContent returns the content of a plain string.
func TextContent(s string) *Content { return &Content{Text: s} }

// MarshalJSON writes the parts when there are any, else the string.
func (c Content) MarshalJSON() ([]byte, error) {
	return protocol.MarshalTextOr(c.Text, c.Parts)
}

// UnmarshalJSON reads a string or a list of parts.
func (c *Content) UnmarshalJSON(b []byte) error {
	return protocol.UnmarshalTextOr(b, &c.Text, &c.Parts)
}

// PlainText is the content's text: the string, or its parts' text joined
// (an answer's content, whose parts are text). A nil content has none.
func (c *Content) PlainText() string {
	if c == nil {
		return ""
	}
	if c.Parts == nil {
		return c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// ContentPart is one part of a message's content.
type ContentPart struct {
	Type       string          `json:"type"` // text, image_url, input_audio, file, refusal
	Text       string          `json:"text,omitempty"`
	ImageURL   *ImageURL       `json:"image_url,omitempty"`
	InputAudio json.RawMessage `json:"input_audio,omitempty"`
	File       *File           `json:"file,omitempty"`
	Refusal    string          `json:"refusal,omitempty"`
}

// ImageURL is an image part's image: an https URL or a data URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// File is a file part's file: inline data (base64) or an OpenAI file id.
type File struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// Tool is one tool a request declares.
type Tool struct {
	Type     string       `json:"type"` // "function"; others ("custom") cannot be translated
	Function FunctionDecl `json:"function"`
}

// FunctionDecl declares a function tool.
type FunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema, passed through
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolChoiceFunction is the object form of tool_choice.
type ToolChoiceFunction struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// ToolCall is one call of a function tool: whole in an answer's message,
// a fragment (with Index) in a stream delta.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function: its name and its arguments, a
// JSON object encoded as a string (or a piece of one, in a delta).
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ResponseFormat asks for JSON output.
type ResponseFormat struct {
	Type       string      `json:"type"` // text, json_object, json_schema
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is a json_schema response format's schema.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Completion is a whole (non-streamed) chat completions answer.
type Completion struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"` // "chat.completion"
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []Choice   `json:"choices"`
	Usage   *ChatUsage `json:"usage,omitempty"`
}

// Choice is one choice of a whole answer.
type Choice struct {
	Index        int         `json:"index"`
	Message      ChatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

// Chunk is one event of a streamed answer. Choices is empty, and Usage
// set, in the last chunk of a stream with include_usage.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"` // "chat.completion.chunk"
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *ChatUsage    `json:"usage,omitempty"`
	// Error is set on an error sent mid-stream instead of a chunk.
	Error *ErrorBody `json:"error,omitempty"`
}

// ChunkChoice is one choice's delta; FinishReason is null until its last.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is what one chunk adds to a choice's message.
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	Refusal          string     `json:"refusal,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ErrorEnvelope is OpenAI's error body, also sent mid-stream.
type ErrorEnvelope struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is an error's description. Code is a string, a number or null
// depending on who sends it, and is passed through.
type ErrorBody struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Param   *string         `json:"param"`
	Code    json.RawMessage `json:"code"`
}
