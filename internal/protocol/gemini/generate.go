package gemini

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
)

// Request is a generateContent request body: the fields a translator reads
// or writes. The model and whether to stream are in the URL, not here.
// Each translator says which other fields it drops or refuses.
type Request struct {
	Contents          []Content         `json:"contents"`
	SystemInstruction *Content          `json:"systemInstruction,omitempty"`
	Tools             []Tool            `json:"tools,omitempty"`
	ToolConfig        *ToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *GenerationConfig `json:"generationConfig,omitempty"`
	// CachedContent names an explicit cache resource of the Gemini API:
	// read so a translator can refuse it.
	CachedContent string `json:"cachedContent,omitempty"`
}

// Content is one turn of a conversation (role user or model; a user turn
// may leave its role out), or the system instruction (no role).
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

// Part is one part of a content. Which fields are set depends on its kind:
// text (with Thought for reasoning text), inline data, file data, a
// function call or a function's response. ThoughtSignature may be on any
// part of the model's; it is opaque and goes back with the part.
type Part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *Blob             `json:"inlineData,omitempty"`
	FileData         *FileData         `json:"fileData,omitempty"`
	FunctionCall     *FunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
	// Kinds no other protocol has: read so a translator can refuse them.
	ExecutableCode      json.RawMessage `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult,omitempty"`
	VideoMetadata       json.RawMessage `json:"videoMetadata,omitempty"`
}

// Blob is inline data: a media type and base64 bytes.
type Blob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

// FileData refers to a file by URI (a Files API URI, or a URL).
type FileData struct {
	MIMEType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

// FunctionCall is the model's call of a declared function. ID is optional:
// Gemini often sends none and pairs results by name and order.
type FunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"` // a JSON object
}

// FunctionResponse is a function's result: a JSON object whose "output"
// holds the result and "error" a failure (Google's guidance), with media in
// Parts.
type FunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
	Parts    []Part          `json:"parts,omitempty"`
}

// Tool is one entry of tools: function declarations, or one of Gemini's
// built-in tools (googleSearch, codeExecution …), whose names Builtin
// lists.
type Tool struct {
	FunctionDeclarations []FunctionDeclaration `json:"functionDeclarations,omitempty"`
	Builtin              []string              `json:"-"`
}

// UnmarshalJSON reads the declarations and names every other member.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	for name, v := range members {
		if name == "functionDeclarations" {
			if err := json.Unmarshal(v, &t.FunctionDeclarations); err != nil {
				return err
			}
			continue
		}
		t.Builtin = append(t.Builtin, name)
	}
	slices.Sort(t.Builtin) // the caller's error names them in a stable order
	return nil
}

// FunctionDeclaration declares a function: its parameters as JSON Schema
// (ParametersJSONSchema) or as Gemini's OpenAPI-subset Schema (Parameters).
type FunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	Parameters           json.RawMessage `json:"parameters,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

// ToolConfig holds the function calling config.
type ToolConfig struct {
	FunctionCallingConfig *FunctionCallingConfig `json:"functionCallingConfig,omitempty"`
}

// FunctionCallingConfig says whether the model may (AUTO), must (ANY) or
// must not (NONE) call functions, and which. VALIDATED is AUTO with calls
// checked against their schema.
type FunctionCallingConfig struct {
	Mode                 string   `json:"mode,omitempty"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

// GenerationConfig is a request's sampling and output settings.
type GenerationConfig struct {
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	TopK               *float64        `json:"topK,omitempty"`
	CandidateCount     *int64          `json:"candidateCount,omitempty"`
	MaxOutputTokens    *int64          `json:"maxOutputTokens,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	ResponseMIMEType   string          `json:"responseMimeType,omitempty"`
	ResponseSchema     json.RawMessage `json:"responseSchema,omitempty"` // OpenAPI-subset Schema
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *ThinkingConfig `json:"thinkingConfig,omitempty"`
	// Output other protocols cannot express: read so a translator can
	// refuse it.
	ResponseModalities []string        `json:"responseModalities,omitempty"`
	ResponseLogprobs   bool            `json:"responseLogprobs,omitempty"`
	Logprobs           *int64          `json:"logprobs,omitempty"`
	SpeechConfig       json.RawMessage `json:"speechConfig,omitempty"`
	ImageConfig        json.RawMessage `json:"imageConfig,omitempty"`
}

// ThinkingConfig asks for reasoning: a token budget (0 off, -1 dynamic)
// or a level (MINIMAL, LOW, MEDIUM, HIGH), and whether the answer carries
// the thoughts.
type ThinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int64 `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// Response is a whole answer, and each chunk of a stream (holding only
// what is new). A stream's error arrives as an object with Error set.
type Response struct {
	Candidates     []Candidate     `json:"candidates"`
	PromptFeedback *PromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *UsageMetadata  `json:"usageMetadata,omitempty"`
	ModelVersion   string          `json:"modelVersion,omitempty"`
	ResponseID     string          `json:"responseId,omitempty"`
	Error          *ErrorBody      `json:"error,omitempty"`
}

// Candidate is one answer; a stream's last chunk sets its FinishReason.
type Candidate struct {
	Content      *Content `json:"content,omitempty"`
	FinishReason string   `json:"finishReason,omitempty"`
	Index        int      `json:"index"`
}

// PromptFeedback says why a prompt was blocked (then there are no
// candidates).
type PromptFeedback struct {
	BlockReason string `json:"blockReason,omitempty"`
}

// UsageMetadata is an answer's usage. The prompt count includes the cached
// tokens; the candidates count excludes the thoughts, which have their own.
type UsageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount,omitempty"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

// ErrorEnvelope is Google's error body, also sent as a stream's error.
type ErrorEnvelope struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is an error's description: the HTTP code, a message and the
// gRPC status name.
type ErrorBody struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
	Details json.RawMessage `json:"details,omitempty"`
}

// opaque are the members whose values are the caller's own JSON (a call's
// arguments, a function's result, a schema, labels): their names are data
// and are kept as written.
var opaque = map[string]bool{
	"args": true, "response": true, "parameters": true, "parametersJsonSchema": true,
	"responseSchema": true, "responseJsonSchema": true, "labels": true,
}

// ReadRequest decodes a caller's request body. Google's JSON reader takes
// member names in lowerCamelCase or snake_case alike (REST examples write
// system_instruction and inline_data), so snake_case names are read as
// their lowerCamelCase, but within the caller's own JSON (opaque). camel
// is the body as read, every name in lowerCamelCase (body itself when none
// is in snake_case): where a translator looks for the caller's fields by
// their names.
func ReadRequest(body []byte) (r *Request, camel []byte, err error) {
	if camel, err = camelBody(body); err != nil {
		return nil, nil, err
	}
	r = new(Request)
	return r, camel, json.Unmarshal(camel, r)
}

// camelBody returns body with its member names in lowerCamelCase (see
// ReadRequest): body itself when it has no snake_case name.
func camelBody(body []byte) ([]byte, error) {
	if !bytes.Contains(body, []byte("_")) { // no snake_case name: the common case
		return body, nil
	}
	return camelNames(body)
}

// camelNames rewrites the member names of a JSON value in lowerCamelCase,
// but for the values of opaque members.
func camelNames(v json.RawMessage) (json.RawMessage, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return v, nil
	}
	switch v[0] {
	case '{':
		var members map[string]json.RawMessage
		if err := json.Unmarshal(v, &members); err != nil {
			return nil, err
		}
		out := make(map[string]json.RawMessage, len(members))
		for name, value := range members {
			name = lowerCamel(name)
			if !opaque[name] {
				var err error
				if value, err = camelNames(value); err != nil {
					return nil, err
				}
			}
			out[name] = value
		}
		return json.Marshal(out)
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			return nil, err
		}
		for i := range elems {
			var err error
			if elems[i], err = camelNames(elems[i]); err != nil {
				return nil, err
			}
		}
		return json.Marshal(elems)
	}
	return v, nil
}

// lowerCamel is a snake_case name in lowerCamelCase (inline_data:
// inlineData); other names are returned as they are.
func lowerCamel(name string) string {
	if !strings.Contains(name, "_") {
		return name
	}
	var b strings.Builder
	upper := false
	for _, r := range name {
		switch {
		case r == '_':
			upper = b.Len() > 0
		case upper:
			b.WriteRune(unicode.ToUpper(r))
			upper = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
