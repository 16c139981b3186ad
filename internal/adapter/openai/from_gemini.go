package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

// FromGemini carries one Gemini generateContent execution (a Gemini CLI
// or Google SDK caller) to an OpenAI chat upstream. The caller's model and
// whether it streams are in its URL: Request takes the upstream model and
// req.Stream. It serves one execution and is not safe for concurrent use.
//
// Function calls without ids (Gemini pairs results with calls by name and
// order) get ids made from their place in the conversation, and each
// functionResponse the id of the first unanswered call of that name in the
// model turn before it; the upstream's call ids go to the caller, which
// sends them back. A result becomes the tool message's text: the string
// under "output", "Error: " and the string under "error", or the whole
// object as JSON (policy); its media follow in a user message (a tool
// message holds only text; lossy).
//
// Refused (CodeInvalidRequest), because OpenAI chat cannot express them:
// candidateCount > 1, logprobs, output other than text (responseModalities,
// speechConfig, imageConfig), response MIME types other than text and
// JSON, more than 4 stop sequences, built-in tools (googleSearch,
// codeExecution …), function names that are not OpenAI's
// (^[a-zA-Z0-9_-]{1,64}$), cachedContent, executable code and video
// metadata parts, media in a model turn, inline data other than images,
// PDFs, wav and mp3, file data other than image URLs (a Files API URI only
// Gemini can read), a functionResponse answering no call, and unknown
// roles and function calling modes.
//
// Dropped, and named (Dropped): FromGeminiHints.
type FromGemini struct {
	includeThoughts bool // the caller asked for the thoughts in the answer
	dropped         []string
	caller          []byte // the caller's body in lowerCamelCase names, for Origin

	// Stream state.
	started, done bool
	id, model     string
	calls         []heldCall // buffered whole until the finish: Gemini sends calls whole
	held          int        // bytes of arguments in calls, up to adapter.MaxHeldOutput
	finish        string
	refusal       bool
	usage         sluice.Usage
}

var _ adapter.Translator = (*FromGemini)(nil)

// NewFromGemini returns a translator for one execution.
func NewFromGemini() *FromGemini { return &FromGemini{} }

// FromGeminiHints are what FromGemini drops (adapter.Hints): topK (OpenAI
// has none), safetySettings (OpenAI's moderation is its own), thought
// signatures (an OpenAI upstream takes the reasoning text back, without
// one), mediaResolution, serviceTier and labels.
var FromGeminiHints = adapter.Hints{
	"generationConfig.topK", "safetySettings", "contents[].parts[].thoughtSignature",
	"generationConfig.mediaResolution", "serviceTier", "labels",
}

// geminiOrigins are the Gemini fields the chat fields FromGemini fills
// come from (adapter.Origins).
var geminiOrigins = adapter.Origins{
	"seed":                         "generationConfig.seed",
	"frequency_penalty":            "generationConfig.frequencyPenalty",
	"presence_penalty":             "generationConfig.presencePenalty",
	"messages[].reasoning_content": "contents[].parts[].thought",
}

// Dropped names the caller's hints the last Request left out.
func (t *FromGemini) Dropped() []string { return t.dropped }

// Origin names the caller's field the chat field hub of the last Request
// came from; "" when the caller sent none.
func (t *FromGemini) Origin(hub string) string { return geminiOrigins.Sent(t.caller, hub) }

// reasoningEffortsByLevel maps Gemini's thinkingLevel to OpenAI's
// reasoning_effort.
var reasoningEffortsByLevel = map[string]string{"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}

// openAIFunctionName is what OpenAI takes as a function's name; Gemini
// also takes dots and colons, and up to 128 characters.
var openAIFunctionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Request returns the chat body for the caller's generateContent request.
// The upstream is always asked for the usage of a stream (policy).
func (t *FromGemini) Request(req *sluice.Request, model string) ([]byte, error) {
	in, camel, err := gemini.ReadRequest(req.Body)
	if err != nil {
		return nil, adapter.Untranslatable("request body is not a valid generateContent request: %v", err)
	}
	if in.CachedContent != "" {
		return nil, adapter.Untranslatable("cachedContent is not supported by this model's upstream (OpenAI chat): it names a cache only Gemini has")
	}
	t.caller = camel
	t.dropped = FromGeminiHints.Sent(camel)
	out := wire.ChatRequest{Model: model, Stream: req.Stream}
	if req.Stream {
		out.StreamOptions = &wire.StreamOptions{IncludeUsage: true}
	}
	if si := in.SystemInstruction; si != nil {
		var text []string
		for _, p := range si.Parts {
			if !isTextPart(&p) {
				return nil, adapter.Untranslatable("systemInstruction: only text parts are supported")
			}
			text = append(text, p.Text)
		}
		out.Messages = append(out.Messages, wire.ChatMessage{Role: "system", Content: wire.TextContent(strings.Join(text, "\n\n"))})
	}
	var c geminiConversation
	for i := range in.Contents {
		if out.Messages, err = c.add(out.Messages, &in.Contents[i]); err != nil {
			if e, ok := errors.AsType[*sluice.Error](err); ok { // the caller learns which content
				e.Msg = fmt.Sprintf("contents[%d]: %s", i, e.Msg)
			}
			return nil, err
		}
	}
	if err := declareGeminiTools(in, &out); err != nil {
		return nil, err
	}
	if err := t.generationConfig(in.GenerationConfig, &out); err != nil {
		return nil, err
	}
	return json.Marshal(&out)
}

// isTextPart reports whether p is a text part (perhaps of empty text).
func isTextPart(p *gemini.Part) bool {
	return p.InlineData == nil && p.FileData == nil && p.FunctionCall == nil && p.FunctionResponse == nil &&
		p.ExecutableCode == nil && p.CodeExecutionResult == nil && p.VideoMetadata == nil
}

// geminiConversation is a conversation being translated: the calls made
// so far (for the ids of calls that have none) and the calls of the last
// model turn not yet answered.
type geminiConversation struct {
	calls   int
	pending []wire.ToolCall
}

// add appends the chat messages of one Gemini content. A user content's
// functionResponse parts become tool messages, which come first (they
// answer the model turn before), its other parts a user message after
// them, with the results' media. A model content becomes one assistant
// message: text, thoughts as reasoning_content, calls as tool_calls.
func (c *geminiConversation) add(out []wire.ChatMessage, content *gemini.Content) ([]wire.ChatMessage, error) {
	switch content.Role {
	case "user", "", "function": // "function": older examples' role of results
		var parts []wire.ContentPart
		for i := range content.Parts {
			p := &content.Parts[i]
			if fr := p.FunctionResponse; fr != nil {
				id, err := c.answer(fr)
				if err != nil {
					return nil, err
				}
				out = append(out, wire.ChatMessage{Role: "tool", ToolCallID: id, Content: wire.TextContent(resultText(fr.Response))})
				for j := range fr.Parts {
					media, err := geminiUserPart(&fr.Parts[j])
					if err != nil {
						return nil, err
					}
					parts = append(parts, media)
				}
				continue
			}
			if isTextPart(p) && p.Text == "" {
				continue // a signature alone, or nothing
			}
			part, err := geminiUserPart(p)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
		}
		if len(parts) > 0 {
			out = append(out, wire.ChatMessage{Role: "user", Content: &wire.Content{Parts: parts}})
		}
		return out, nil
	case "model":
		msg := wire.ChatMessage{Role: "assistant"}
		var text, reasoning strings.Builder
		c.pending = c.pending[:0]
		for i := range content.Parts {
			p := &content.Parts[i]
			switch {
			case p.FunctionCall != nil:
				tc := c.call(p.FunctionCall)
				msg.ToolCalls = append(msg.ToolCalls, tc)
				c.pending = append(c.pending, tc)
			case !isTextPart(p):
				return nil, adapter.Untranslatable("a model turn's parts other than text and function calls are not supported by this model's upstream (OpenAI chat)")
			case p.Thought:
				reasoning.WriteString(p.Text)
			default:
				text.WriteString(p.Text)
			}
		}
		if text.Len() > 0 || msg.ToolCalls == nil {
			msg.Content = wire.TextContent(text.String())
		}
		msg.ReasoningContent = reasoning.String()
		return append(out, msg), nil
	}
	return nil, adapter.Untranslatable("role %q is not supported", content.Role)
}

// call is the OpenAI tool call of a Gemini function call, with its id or,
// when it has none, one made from its place in the conversation.
func (c *geminiConversation) call(fc *gemini.FunctionCall) wire.ToolCall {
	c.calls++
	id := fc.ID
	if id == "" {
		id = fmt.Sprintf("call_%d", c.calls)
	}
	args := "{}"
	if adapter.Present(fc.Args) {
		args = string(fc.Args)
	}
	return wire.ToolCall{ID: id, Type: "function", Function: wire.FunctionCall{Name: fc.Name, Arguments: args}}
}

// answer is the tool_call_id of a function's response: its id, or that of
// the first unanswered call of its name in the model turn before.
func (c *geminiConversation) answer(fr *gemini.FunctionResponse) (string, error) {
	for i, tc := range c.pending {
		if (fr.ID != "" && tc.ID == fr.ID) || (fr.ID == "" && tc.Function.Name == fr.Name) {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return tc.ID, nil
		}
	}
	if fr.ID != "" {
		return fr.ID, nil // a call the caller made up itself: its id pairs it
	}
	return "", adapter.Untranslatable("functionResponse %q answers no functionCall of the model turn before it", fr.Name)
}

// resultText is a function's response as a tool message's text (policy):
// the string under "output" alone, or under "error" prefixed "Error: ",
// else the JSON of what is there.
func resultText(response json.RawMessage) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(response, &members) != nil || len(members) != 1 {
		return string(response)
	}
	for name, v := range members {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		switch name {
		case "output":
			return s
		case "error":
			return "Error: " + s
		}
	}
	return string(response)
}

// audioFormats are OpenAI's input_audio formats by media type.
var audioFormats = map[string]string{"audio/wav": "wav", "audio/x-wav": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3"}

// geminiUserPart translates one part of a user content (or a function
// response's media).
func geminiUserPart(p *gemini.Part) (wire.ContentPart, error) {
	switch {
	case p.InlineData != nil:
		b := p.InlineData
		switch {
		case strings.HasPrefix(b.MIMEType, "image/"):
			return wire.ContentPart{Type: "image_url", ImageURL: &wire.ImageURL{URL: "data:" + b.MIMEType + ";base64," + b.Data}}, nil
		case b.MIMEType == "application/pdf":
			return wire.ContentPart{Type: "file", File: &wire.File{FileData: "data:application/pdf;base64," + b.Data, Filename: "document.pdf"}}, nil
		case audioFormats[b.MIMEType] != "":
			audio, _ := json.Marshal(map[string]string{"data": b.Data, "format": audioFormats[b.MIMEType]})
			return wire.ContentPart{Type: "input_audio", InputAudio: audio}, nil
		}
		return wire.ContentPart{}, adapter.Untranslatable("inline data of type %q is not supported by this model's upstream (OpenAI chat): only images, PDFs, wav and mp3", b.MIMEType)
	case p.FileData != nil:
		u, err := url.Parse(p.FileData.FileURI)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http"):
			return wire.ContentPart{}, adapter.Untranslatable("file data %q is not an http(s) URL, which this model's upstream (OpenAI chat) needs", p.FileData.FileURI)
		case u.Host == "generativelanguage.googleapis.com":
			return wire.ContentPart{}, adapter.Untranslatable("file data %q is a Gemini Files API file, which only Gemini can read; send it inline", p.FileData.FileURI)
		case !strings.HasPrefix(p.FileData.MIMEType, "image/"):
			return wire.ContentPart{}, adapter.Untranslatable("file data of type %q is not supported by this model's upstream (OpenAI chat): only image URLs", p.FileData.MIMEType)
		}
		return wire.ContentPart{Type: "image_url", ImageURL: &wire.ImageURL{URL: p.FileData.FileURI}}, nil
	case isTextPart(p):
		return wire.ContentPart{Type: "text", Text: p.Text}, nil
	}
	return wire.ContentPart{}, adapter.Untranslatable("this kind of part (executable code, video metadata, a function call) is not supported in a user turn by this model's upstream (OpenAI chat)")
}

// declareGeminiTools translates the function declarations and the function
// calling config.
func declareGeminiTools(in *gemini.Request, out *wire.ChatRequest) error {
	for i, tl := range in.Tools {
		if len(tl.Builtin) > 0 {
			return adapter.Untranslatable("tools[%d]: built-in tool %q is not supported by this model's upstream (OpenAI chat)", i, tl.Builtin[0])
		}
		for _, d := range tl.FunctionDeclarations {
			if !openAIFunctionName.MatchString(d.Name) {
				return adapter.Untranslatable("tools[%d]: function name %q is not supported by this model's upstream (OpenAI chat), which takes ^[a-zA-Z0-9_-]{1,64}$", i, d.Name)
			}
			params := d.ParametersJSONSchema
			if len(params) == 0 && len(d.Parameters) > 0 {
				var err error
				if params, err = jsonSchemaOf(d.Parameters); err != nil {
					return adapter.Untranslatable("tools[%d]: function %s: parameters: %v", i, d.Name, err)
				}
			}
			out.Tools = append(out.Tools, wire.Tool{Type: "function", Function: wire.FunctionDecl{Name: d.Name, Description: d.Description, Parameters: params}})
		}
	}
	if in.ToolConfig == nil || in.ToolConfig.FunctionCallingConfig == nil || len(out.Tools) == 0 {
		return nil // without tools a choice says nothing, and OpenAI refuses it
	}
	cfg := in.ToolConfig.FunctionCallingConfig
	var choice any
	switch cfg.Mode {
	case "", "MODE_UNSPECIFIED", "AUTO", "VALIDATED":
		choice = allowedTools("auto", cfg.AllowedFunctionNames)
	case "ANY":
		if len(cfg.AllowedFunctionNames) == 1 {
			fn := wire.ToolChoiceFunction{Type: "function"}
			fn.Function.Name = cfg.AllowedFunctionNames[0]
			choice = fn
		} else {
			choice = allowedTools("required", cfg.AllowedFunctionNames)
		}
	case "NONE":
		choice = "none"
	default:
		return adapter.Untranslatable("functionCallingConfig mode %q is not supported", cfg.Mode)
	}
	var err error
	out.ToolChoice, err = json.Marshal(choice)
	return err
}

// allowedTools is the tool_choice of a mode (auto or required) limited to
// names: the mode alone when there are none.
func allowedTools(mode string, names []string) any {
	if len(names) == 0 {
		return mode
	}
	type function struct {
		Name string `json:"name"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	tools := make([]tool, len(names))
	for i, n := range names {
		tools[i] = tool{Type: "function", Function: function{Name: n}}
	}
	return map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": mode, "tools": tools}}
}

// jsonSchemaOf turns Gemini's OpenAPI-subset Schema into JSON Schema: its
// types are upper case (STRING) where JSON Schema's are lower case, and
// nullable is a type of its own in JSON Schema. The other keywords are
// JSON Schema's too.
func jsonSchemaOf(schema json.RawMessage) (json.RawMessage, error) {
	var s map[string]json.RawMessage
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	var typ string
	if json.Unmarshal(s["type"], &typ) == nil && typ != "" {
		s["type"], _ = json.Marshal(strings.ToLower(typ))
		if string(s["nullable"]) == "true" {
			s["type"], _ = json.Marshal([]string{strings.ToLower(typ), "null"})
		}
	}
	delete(s, "nullable")
	for _, key := range [...]string{"items", "not"} {
		if v, ok := s[key]; ok {
			var err error
			if s[key], err = jsonSchemaOf(v); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := s["properties"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(v, &props); err != nil {
			return nil, err
		}
		for name, p := range props {
			var err error
			if props[name], err = jsonSchemaOf(p); err != nil {
				return nil, err
			}
		}
		s["properties"], _ = json.Marshal(props)
	}
	if v, ok := s["anyOf"]; ok {
		var alts []json.RawMessage
		if err := json.Unmarshal(v, &alts); err != nil {
			return nil, err
		}
		for i, a := range alts {
			var err error
			if alts[i], err = jsonSchemaOf(a); err != nil {
				return nil, err
			}
		}
		s["anyOf"], _ = json.Marshal(alts)
	}
	return json.Marshal(s)
}

// generationConfig translates the sampling, output and reasoning settings.
// The output cap is max_completion_tokens when the caller asked for
// thinking, else max_tokens, as for an Anthropic caller (see thinks).
func (t *FromGemini) generationConfig(g *gemini.GenerationConfig, out *wire.ChatRequest) error {
	if g == nil {
		return nil
	}
	switch {
	case g.CandidateCount != nil && *g.CandidateCount > 1:
		return adapter.Untranslatable("candidateCount > 1 is not supported by this model's upstream (OpenAI chat): one candidate is asked for")
	case g.ResponseLogprobs || g.Logprobs != nil:
		return adapter.Untranslatable("logprobs are not supported by this model's upstream (OpenAI chat)")
	case len(g.SpeechConfig) > 0 || len(g.ImageConfig) > 0 || len(g.ResponseModalities) > 1 ||
		len(g.ResponseModalities) == 1 && g.ResponseModalities[0] != "TEXT":
		return adapter.Untranslatable("output other than text is not supported by this model's upstream (OpenAI chat)")
	case len(g.StopSequences) > 4:
		return adapter.Untranslatable("at most 4 stopSequences are supported by this model's upstream (OpenAI chat)")
	}
	out.Temperature, out.TopP, out.Stop, out.Seed = g.Temperature, g.TopP, g.StopSequences, g.Seed
	out.PresencePenalty, out.FrequencyPenalty = g.PresencePenalty, g.FrequencyPenalty
	switch g.ResponseMIMEType {
	case "", "text/plain":
	case "application/json":
		schema := g.ResponseJSONSchema
		if len(schema) == 0 && len(g.ResponseSchema) > 0 {
			var err error
			if schema, err = jsonSchemaOf(g.ResponseSchema); err != nil {
				return adapter.Untranslatable("generationConfig.responseSchema: %v", err)
			}
		}
		out.ResponseFormat = &wire.ResponseFormat{Type: "json_object"}
		if len(schema) > 0 {
			out.ResponseFormat = &wire.ResponseFormat{Type: "json_schema", JSONSchema: &wire.JSONSchema{Name: "output", Schema: schema}}
		}
	default:
		return adapter.Untranslatable("responseMimeType %q is not supported by this model's upstream (OpenAI chat): only text/plain and application/json", g.ResponseMIMEType)
	}
	if tc := g.ThinkingConfig; tc != nil {
		t.includeThoughts = tc.IncludeThoughts
		effort, err := geminiEffort(tc)
		if err != nil {
			return err
		}
		out.ReasoningEffort = effort
	}
	if g.MaxOutputTokens != nil {
		if out.ReasoningEffort != "" {
			out.MaxCompletionTokens = g.MaxOutputTokens
		} else {
			out.MaxTokens = g.MaxOutputTokens
		}
	}
	return nil
}

// geminiEffort is the reasoning_effort for a thinking config (policy): by
// level, or by budget as for an Anthropic caller (reasoningEfforts); none
// for a budget of 0 (thinking off) or -1 (the model decides), which leaves
// the upstream model's default, since older models refuse "none".
func geminiEffort(tc *gemini.ThinkingConfig) (string, error) {
	if tc.ThinkingLevel != "" {
		effort, ok := reasoningEffortsByLevel[tc.ThinkingLevel]
		if !ok {
			return "", adapter.Untranslatable("thinkingLevel %q is not supported", tc.ThinkingLevel)
		}
		return effort, nil
	}
	if tc.ThinkingBudget == nil || *tc.ThinkingBudget <= 0 {
		return "", nil
	}
	for _, e := range reasoningEfforts {
		if *tc.ThinkingBudget >= e.floor {
			return e.effort, nil
		}
	}
	return "", nil
}

// finishReasonsForGemini maps OpenAI's finish_reason to Gemini's
// (docs/translators.md, "Finish reasons"); anything else is STOP, tool calls included (Gemini
// has no reason of their own).
var finishReasonsForGemini = map[string]string{"length": "MAX_TOKENS", "content_filter": "SAFETY"}

func geminiFinish(finish string, refusal bool) string {
	if refusal {
		return "SAFETY"
	}
	if r, ok := finishReasonsForGemini[finish]; ok {
		return r
	}
	return "STOP"
}

// geminiCall is the functionCall part of an OpenAI tool call, its
// arguments an object (toolInput).
func geminiCall(tc *wire.ToolCall) gemini.Part {
	return gemini.Part{FunctionCall: &gemini.FunctionCall{ID: tc.ID, Name: tc.Function.Name, Args: toolInput(tc.Function.Arguments)}}
}

// Response returns the Gemini answer for a whole chat completion. The
// reasoning text is sent as thought parts only when the caller asked for
// thoughts (includeThoughts).
func (t *FromGemini) Response(body []byte) ([]byte, error) {
	var in wire.Completion
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("openai answer: %w", err)
	}
	content := &gemini.Content{Role: "model", Parts: []gemini.Part{}}
	finish, refusal := "", false
	if len(in.Choices) > 0 {
		c := &in.Choices[0]
		finish = c.FinishReason
		m := &c.Message
		if t.includeThoughts && m.ReasoningContent != "" {
			content.Parts = append(content.Parts, gemini.Part{Text: m.ReasoningContent, Thought: true})
		}
		if text := m.Content.PlainText(); text != "" {
			content.Parts = append(content.Parts, gemini.Part{Text: text})
		}
		if m.Refusal != "" {
			content.Parts = append(content.Parts, gemini.Part{Text: m.Refusal})
			refusal = true
		}
		for i := range m.ToolCalls {
			content.Parts = append(content.Parts, geminiCall(&m.ToolCalls[i]))
		}
	}
	var usage sluice.Usage
	if in.Usage != nil {
		usage = in.Usage.Sluice()
	}
	out := gemini.Response{
		Candidates:    []gemini.Candidate{{Content: content, FinishReason: geminiFinish(finish, refusal)}},
		UsageMetadata: gemini.UsageOf(usage),
		ModelVersion:  in.Model,
		ResponseID:    in.ID,
	}
	return json.Marshal(&out)
}

// Error returns Google's error body for an OpenAI error answer: its
// message, the status and the status's gRPC name.
func (t *FromGemini) Error(status int, body []byte) []byte { return googleErrorBody(status, body) }

// googleErrorBody is OpenAI's error answer body in Google's envelope (see
// FromGemini.Error), for every translator of a Gemini caller.
func googleErrorBody(status int, body []byte) []byte {
	var in wire.ErrorEnvelope
	msg := fmt.Sprintf("the upstream answered %d %s", status, http.StatusText(status))
	if json.Unmarshal(body, &in) == nil && in.Error.Message != "" {
		msg = in.Error.Message
	}
	out, _ := json.Marshal(&gemini.ErrorEnvelope{Error: gemini.ErrorBody{Code: status, Message: msg, Status: gemini.Status(status)}})
	return out
}
