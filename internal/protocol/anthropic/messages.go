package anthropic

import (
	"encoding/json"

	"github.com/sluicehq/sluice/internal/protocol"
)

// Request is a Messages request body: the fields a translator reads or
// writes. Each translator says which other fields it drops or refuses.
type Request struct {
	Model         string          `json:"model"`
	MaxTokens     int64           `json:"max_tokens"`
	System        *Content        `json:"system,omitempty"`
	Messages      []MessageParam  `json:"messages"`
	Stream        bool            `json:"stream,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int64          `json:"top_k,omitempty"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    *ToolChoice     `json:"tool_choice,omitempty"`
	Thinking      *Thinking       `json:"thinking,omitempty"`
	OutputConfig  *OutputConfig   `json:"output_config,omitempty"`
	Metadata      *Metadata       `json:"metadata,omitempty"`
	MCPServers    json.RawMessage `json:"mcp_servers,omitempty"` // read so a translator can refuse it
}

// MessageParam is one turn of a request's conversation.
type MessageParam struct {
	Role    string   `json:"role"` // user, assistant
	Content *Content `json:"content"`
}

// Content is a turn's (or the system prompt's, or a tool result's)
// content: a plain string (Blocks nil) or a list of blocks.
type Content struct {
	Text   string
	Blocks []Block
}

// MarshalJSON writes the blocks when there are any, else the string.
func (c Content) MarshalJSON() ([]byte, error) {
	return protocol.MarshalTextOr(c.Text, c.Blocks)
}

// UnmarshalJSON reads a string or a list of blocks.
func (c *Content) UnmarshalJSON(b []byte) error {
	return protocol.UnmarshalTextOr(b, &c.Text, &c.Blocks)
}

// AsBlocks returns the content as blocks: a plain string is one text
// block (none when empty).
func (c *Content) AsBlocks() []Block {
	switch {
	case c == nil:
		return nil
	case c.Blocks != nil:
		return c.Blocks
	case c.Text == "":
		return nil
	}
	return []Block{{Type: "text", Text: c.Text}}
}

// Block is one content block. Which fields are set depends on Type: text,
// image and document (Source), tool_use (ID, Name, Input), tool_result
// (ToolUseID, Content, IsError), thinking (Thinking, Signature),
// redacted_thinking (Data).
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *Source         `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   *Content        `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	// CacheControl marks a prompt-cache breakpoint: the prompt up to and
	// including this block is cached.
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// CacheControl is a prompt-cache breakpoint.
type CacheControl struct {
	Type string `json:"type"` // "ephemeral"
	TTL  string `json:"ttl,omitempty"`
}

// Source is an image's or a document's data: inline (base64) or a URL.
type Source struct {
	Type      string `json:"type"` // base64, url, text, file …
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// Tool is one tool a request declares. A Type other than "" or "custom"
// is a server tool (web search, code execution …) run by Anthropic.
type Tool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	// CacheControl on the last tool caches every tool declaration.
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// ToolChoice is auto, any, tool (with Name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Thinking turns extended thinking on (enabled, with a budget, or
// adaptive) or off (disabled).
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
}

// OutputConfig sets the effort and the format of the output.
type OutputConfig struct {
	Effort string  `json:"effort,omitempty"`
	Format *Format `json:"format,omitempty"`
}

// Format asks for JSON output that follows Schema.
type Format struct {
	Type   string          `json:"type"` // json_schema
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Metadata is a request's metadata: the end user only.
type Metadata struct {
	UserID string `json:"user_id,omitempty"`
}

// Message is a whole answer, and the message of a message_start event
// (with empty Content and a nil StopReason).
type Message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"` // "message"
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []Block `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
}

// Usage is an answer's usage. InputTokens counts only the uncached part
// of the prompt; OutputTokens includes the thinking tokens.
type Usage struct {
	InputTokens              int64                `json:"input_tokens"`
	CacheCreationInputTokens int64                `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64                `json:"cache_read_input_tokens"`
	OutputTokens             int64                `json:"output_tokens"`
	OutputTokensDetails      *OutputTokensDetails `json:"output_tokens_details,omitempty"`
}

// OutputTokensDetails splits the output tokens.
type OutputTokensDetails struct {
	ThinkingTokens int64 `json:"thinking_tokens"`
}

// StreamEvent is one event of a streamed answer, as read: which fields are
// set depends on Type (message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop,
// ping, error).
type StreamEvent struct {
	Type         string          `json:"type"`
	Message      *Message        `json:"message,omitempty"`
	Index        int             `json:"index"`
	ContentBlock *Block          `json:"content_block,omitempty"`
	Delta        *Delta          `json:"delta,omitempty"`
	Usage        json.RawMessage `json:"usage,omitempty"` // message_delta: cumulative; the fields present override earlier ones
	Error        *ErrorBody      `json:"error,omitempty"`
}

// Delta is a content_block_delta's delta (Type text_delta,
// input_json_delta, thinking_delta, signature_delta, citations_delta) or
// a message_delta's (StopReason, StopSequence).
type Delta struct {
	Type         string  `json:"type,omitempty"`
	Text         string  `json:"text,omitempty"`
	PartialJSON  string  `json:"partial_json,omitempty"`
	Thinking     string  `json:"thinking,omitempty"`
	Signature    string  `json:"signature,omitempty"`
	StopReason   *string `json:"stop_reason,omitempty"`
	StopSequence *string `json:"stop_sequence,omitempty"`
}

// ErrorEnvelope is Anthropic's error body, and the data of an error event.
type ErrorEnvelope struct {
	Type      string    `json:"type"` // "error"
	Error     ErrorBody `json:"error"`
	RequestID string    `json:"request_id,omitempty"`
}

// ErrorBody is an error's type (invalid_request_error, overloaded_error …)
// and message.
type ErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
