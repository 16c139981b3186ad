// Package gemini translates between the protocols callers speak and an
// upstream that speaks Gemini generateContent, one file per caller
// protocol (from_openai.go). The wire types and the status table are the
// protocol's own (internal/protocol/gemini, imported here as generate,
// since this package is named gemini too). The package depends only on
// package sluice, package adapter, the protocol packages, adapter/openai
// and the standard library.
package gemini

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	generate "github.com/sluicehq/sluice/internal/protocol/gemini"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// thinkingBudgets maps OpenAI's reasoning_effort to a Gemini thinking
// budget (docs/translators.md, "Request parameters"). A budget works on every Gemini model
// that thinks, where thinkingLevel is refused by the 2.5 models. "none"
// turns thinking off (a model that cannot, like 2.5 Pro, refuses it);
// "high" is 2.5 Flash's largest budget, "xhigh" and "max" 2.5 Pro's.
var thinkingBudgets = map[string]int64{
	"none":    0,
	"minimal": 512,
	"low":     2048,
	"medium":  8192,
	"high":    24576,
	"xhigh":   32768,
	"max":     32768,
}

// imageTypes are the media types of image URLs by extension: Gemini's
// fileData needs one, and a URL names it no other way.
var imageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
	".gif": "image/gif", ".heic": "image/heic", ".heif": "image/heif",
}

// audioTypes are the media types of OpenAI's input_audio formats.
var audioTypes = map[string]string{"wav": "audio/wav", "mp3": "audio/mp3"}

// FromOpenAI carries one OpenAI chat execution to a Gemini generateContent
// upstream. The body it sends has neither model nor stream: the upstream
// side puts both in the URL. It serves one execution and is not safe for
// concurrent use.
//
// Tool declarations go as parametersJsonSchema, which takes JSON Schema as
// OpenAI does, so a schema passes unchanged (Gemini's OpenAPI-subset
// "parameters" would lose keywords). Tool calls keep their ids both ways:
// Gemini's ids, or ids Sluice makes for calls that have none, go to the
// caller, and come back on functionCall and functionResponse parts; a tool
// message gets its function's name, which Gemini requires, from the call
// it answers. A call's thought signature, which Gemini wants back with the
// call, rides in its id (see callID).
//
// Refused (CodeInvalidRequest), because Gemini cannot express them or the
// answer could not carry them: n > 1 (one candidate is asked for),
// logprobs, top_logprobs, logit_bias, audio output (modalities with
// "audio", audio), input_audio other than wav and mp3, file parts by
// file_id, the deprecated functions/function_call and "function" role,
// non-function tools, tool-call arguments that are not a JSON object, a
// tool message answering no call, image URLs that are neither data URLs
// nor http(s) URLs naming an image type by extension, and response_format
// types other than text, json_object and json_schema.
//
// Dropped, and named (Dropped), because they are hints Gemini has no
// field for and the answer's shape does not depend on them: FromOpenAIHints.
type FromOpenAI struct {
	now          func() time.Time
	includeUsage bool // the caller asked for a usage chunk at the end of its stream
	dropped      []string

	// Stream state.
	started, done bool
	id, model     string
	responseID    string // Gemini's, for the ids of calls that have none
	created       int64
	nextTool      int
	usage         sluice.Usage
}

var _ adapter.Translator = (*FromOpenAI)(nil)

// NewFromOpenAI returns a translator for one execution.
func NewFromOpenAI() *FromOpenAI { return &FromOpenAI{now: time.Now} }

// FromOpenAIHints are what FromOpenAI drops (adapter.Hints): parallel_tool_calls
// (Gemini has no switch), a tool's strict, the end user, OpenAI's serving
// hints, prompt_cache_key (Gemini caches on its own), an image's detail,
// and an assistant message's reasoning_content (Gemini takes no thought
// text back).
var FromOpenAIHints = adapter.Hints{
	"parallel_tool_calls", "tools[].function.strict", "user", "safety_identifier", "metadata", "store",
	"service_tier", "prompt_cache_key", "prompt_cache_retention", "prediction", "verbosity",
	"messages[].content[].image_url.detail", "messages[].reasoning_content",
}

// Dropped names the caller's hints the last Request left out.
func (t *FromOpenAI) Dropped() []string { return t.dropped }

// Request returns the generateContent body for the caller's chat request.
func (t *FromOpenAI) Request(req *sluice.Request, _ string) ([]byte, error) {
	var in openai.ChatRequest
	if err := json.Unmarshal(req.Body, &in); err != nil {
		return nil, adapter.Untranslatable("request body is not a valid chat completions request: %v", err)
	}
	if err := adapter.RefuseOneChoice(&in, "Gemini"); err != nil {
		return nil, err
	}
	t.dropped = FromOpenAIHints.Sent(req.Body)
	t.includeUsage = in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	var c dialogue
	for i := range in.Messages {
		if err := c.add(&in.Messages[i]); err != nil {
			if e, ok := errors.AsType[*sluice.Error](err); ok { // the caller learns which message
				e.Msg = fmt.Sprintf("messages[%d]: %s", i, e.Msg)
			}
			return nil, err
		}
	}
	out := generate.Request{Contents: c.contents}
	if out.Contents == nil {
		out.Contents = []generate.Content{}
	}
	if len(c.system) > 0 {
		out.SystemInstruction = &generate.Content{Parts: c.system}
	}
	var err error
	if out.Tools, out.ToolConfig, err = tools(&in); err != nil {
		return nil, err
	}
	if out.GenerationConfig, err = generationConfig(&in); err != nil {
		return nil, err
	}
	return json.Marshal(&out)
}

// dialogue is a conversation being translated: the system instruction's
// parts (every system and developer message's text, in order) and the
// contents. Consecutive messages of one role become one content (policy,
// docs/translators.md, "System prompt and roles"), so consecutive tool messages become one user content
// of functionResponse parts.
type dialogue struct {
	system   []generate.Part
	contents []generate.Content
	calls    map[string]string // tool-call id → function name, for the results
}

func (c *dialogue) add(m *openai.ChatMessage) error {
	if adapter.Present(m.Audio) || adapter.Present(m.FunctionCall) {
		return adapter.Untranslatable("audio and function_call are not supported by this model's upstream (Gemini)")
	}
	switch m.Role {
	case "system", "developer":
		text, err := textOnly(m.Content)
		if text != "" {
			c.system = append(c.system, generate.Part{Text: text})
		}
		return err
	case "user":
		parts, err := userParts(m.Content)
		c.append("user", parts)
		return err
	case "assistant":
		parts, err := c.modelParts(m)
		c.append("model", parts)
		return err
	case "tool":
		id, _ := splitCallID(m.ToolCallID)
		name, ok := c.calls[id]
		if !ok {
			return adapter.Untranslatable("tool message answers tool_call_id %q, which no assistant message before it called", m.ToolCallID)
		}
		text, err := textOnly(m.Content)
		response, _ := json.Marshal(map[string]string{"output": text}) // Gemini wants an object: the result under "output"
		c.append("user", []generate.Part{{FunctionResponse: &generate.FunctionResponse{ID: id, Name: name, Response: response}}})
		return err
	}
	return adapter.Untranslatable("role %q is not supported by this model's upstream (Gemini)", m.Role)
}

// append adds parts to the conversation: to the last content when it has
// the same role. An empty message says nothing and adds nothing.
func (c *dialogue) append(role string, parts []generate.Part) {
	if len(parts) == 0 {
		return
	}
	if n := len(c.contents); n > 0 && c.contents[n-1].Role == role {
		c.contents[n-1].Parts = append(c.contents[n-1].Parts, parts...)
		return
	}
	c.contents = append(c.contents, generate.Content{Role: role, Parts: parts})
}

// textOnly is the text of a content that may only hold text parts
// (system, developer and tool messages).
func textOnly(c *openai.Content) (string, error) {
	if c == nil || c.Parts == nil {
		return c.PlainText(), nil
	}
	for _, p := range c.Parts {
		if p.Type != "text" {
			return "", adapter.Untranslatable("content part %q is not allowed here; only text is", p.Type)
		}
	}
	return c.PlainText(), nil
}

// userParts translates a user message's content.
func userParts(c *openai.Content) ([]generate.Part, error) {
	if c == nil || (c.Parts == nil && c.Text == "") {
		return nil, nil
	}
	if c.Parts == nil {
		return []generate.Part{{Text: c.Text}}, nil
	}
	parts := make([]generate.Part, 0, len(c.Parts))
	for _, p := range c.Parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				parts = append(parts, generate.Part{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, adapter.Untranslatable("image_url part without an image_url")
			}
			part, err := imagePart(p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
		case "input_audio":
			var audio struct{ Data, Format string }
			if err := json.Unmarshal(p.InputAudio, &audio); err != nil || audioTypes[audio.Format] == "" {
				return nil, adapter.Untranslatable("input_audio must have base64 data and a format of wav or mp3 for this model's upstream (Gemini)")
			}
			parts = append(parts, generate.Part{InlineData: &generate.Blob{MIMEType: audioTypes[audio.Format], Data: audio.Data}})
		case "file":
			if p.File == nil || p.File.FileData == "" {
				return nil, adapter.Untranslatable("file parts by file_id are not supported by this model's upstream (Gemini); send file_data")
			}
			blob := &generate.Blob{MIMEType: "application/pdf", Data: p.File.FileData} // bare base64 is a PDF, as OpenAI takes it
			if mediaType, data, ok := dataURL(p.File.FileData); ok {
				blob = &generate.Blob{MIMEType: mediaType, Data: data}
			}
			parts = append(parts, generate.Part{InlineData: blob})
		default:
			return nil, adapter.Untranslatable("content part %q is not supported by this model's upstream (Gemini)", p.Type)
		}
	}
	return parts, nil
}

// dataURL splits a base64 data URL into its media type and data.
func dataURL(s string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ";base64,")
}

// imagePart turns an image URL into inline data (a data URL) or file data
// (an http(s) URL, whose media type its extension names: Gemini requires
// one, and Sluice does not fetch the image to learn it).
func imagePart(s string) (generate.Part, error) {
	if strings.HasPrefix(s, "data:") {
		mediaType, data, ok := dataURL(s)
		if !ok {
			return generate.Part{}, adapter.Untranslatable("a data URL must be base64: data:<media type>;base64,<data>")
		}
		return generate.Part{InlineData: &generate.Blob{MIMEType: mediaType, Data: data}}, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return generate.Part{}, adapter.Untranslatable("an image URL must be a data URL or an http(s) URL")
	}
	mediaType, ok := imageTypes[strings.ToLower(path.Ext(u.Path))]
	if !ok {
		return generate.Part{}, adapter.Untranslatable("image URL %q names no image type (.png, .jpg, .jpeg, .webp, .gif, .heic, .heif), which this model's upstream (Gemini) requires; send it as a data URL", s)
	}
	return generate.Part{FileData: &generate.FileData{MIMEType: mediaType, FileURI: s}}, nil
}

// modelParts translates an assistant message: its text (and refusal, as
// text) then its tool calls as functionCall parts with the same ids.
func (c *dialogue) modelParts(m *openai.ChatMessage) ([]generate.Part, error) {
	var parts []generate.Part
	if ct := m.Content; ct != nil {
		for _, p := range ct.Parts {
			if p.Type != "text" && p.Type != "refusal" {
				return nil, adapter.Untranslatable("assistant content part %q is not supported by this model's upstream (Gemini)", p.Type)
			}
		}
		if text := ct.PlainText(); text != "" {
			parts = append(parts, generate.Part{Text: text})
		}
		for _, p := range ct.Parts {
			if p.Refusal != "" {
				parts = append(parts, generate.Part{Text: p.Refusal})
			}
		}
	}
	if m.Refusal != "" {
		parts = append(parts, generate.Part{Text: m.Refusal})
	}
	for _, tc := range m.ToolCalls {
		args := strings.TrimSpace(tc.Function.Arguments)
		if args == "" {
			args = "{}"
		} else if args[0] != '{' || !json.Valid([]byte(args)) {
			return nil, adapter.Untranslatable("tool call %s: arguments must be a JSON object", tc.ID)
		}
		id, signature := splitCallID(tc.ID)
		if c.calls == nil {
			c.calls = make(map[string]string)
		}
		c.calls[id] = tc.Function.Name
		parts = append(parts, generate.Part{
			FunctionCall:     &generate.FunctionCall{ID: id, Name: tc.Function.Name, Args: json.RawMessage(args)},
			ThoughtSignature: signature,
		})
	}
	return parts, nil
}

// signatureMark separates a tool-call id from the thought signature it
// carries (see callID).
const signatureMark = "__thought__"

// callID is the id an OpenAI caller gets for a Gemini function call: its
// id, and after signatureMark the call's thought signature, which Gemini
// wants back on the call when the conversation goes on (docs/translators.md, "Tools") and
// which a chat caller has nowhere else to keep. The signature is base64;
// it is written in the URL alphabet without padding so that the id stays
// within [a-zA-Z0-9_-], as Anthropic requires of the ids it is given.
func callID(id, signature string) string {
	if signature == "" {
		return id
	}
	s := strings.NewReplacer("+", "-", "/", "_", "=", "").Replace(signature)
	return id + signatureMark + s
}

// splitCallID undoes callID: the call's id and its signature in base64.
func splitCallID(s string) (id, signature string) {
	id, sig, ok := strings.Cut(s, signatureMark)
	if !ok {
		return s, ""
	}
	sig = strings.NewReplacer("-", "+", "_", "/").Replace(sig)
	if n := len(sig) % 4; n != 0 {
		sig += strings.Repeat("=", 4-n)
	}
	return id, sig
}

// tools translates the tool declarations and tool_choice. Without tools a
// choice says nothing and is left out.
func tools(in *openai.ChatRequest) ([]generate.Tool, *generate.ToolConfig, error) {
	decls := make([]generate.FunctionDeclaration, 0, len(in.Tools))
	for i, tl := range in.Tools {
		if tl.Type != "function" {
			return nil, nil, adapter.Untranslatable("tools[%d]: tool type %q is not supported by this model's upstream (Gemini)", i, tl.Type)
		}
		d := generate.FunctionDeclaration{Name: tl.Function.Name, Description: tl.Function.Description}
		if adapter.Present(tl.Function.Parameters) {
			d.ParametersJSONSchema = tl.Function.Parameters
		}
		decls = append(decls, d)
	}
	if len(decls) == 0 {
		return nil, nil, nil
	}
	cfg, decls, err := functionCalling(in.ToolChoice, decls)
	if err != nil {
		return nil, nil, err
	}
	out := []generate.Tool{{FunctionDeclarations: decls}}
	if cfg == nil {
		return out, nil, nil
	}
	return out, &generate.ToolConfig{FunctionCallingConfig: cfg}, nil
}

// modes maps OpenAI's tool_choice strings to Gemini's modes.
var modes = map[string]string{"auto": "AUTO", "none": "NONE", "required": "ANY"}

// choiceObject is tool_choice's object form: a named function, or
// allowed_tools.
type choiceObject struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
	AllowedTools struct {
		Mode  string `json:"mode"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	} `json:"allowed_tools"`
}

// functionCalling translates tool_choice: a named function is ANY with
// that one name allowed; allowed_tools "required" is ANY with those names,
// and "auto" declares only those tools (Gemini allows names only with
// ANY), the model free to call one or not.
func functionCalling(choice json.RawMessage, decls []generate.FunctionDeclaration) (*generate.FunctionCallingConfig, []generate.FunctionDeclaration, error) {
	if !adapter.Present(choice) {
		return nil, decls, nil
	}
	var name string
	if json.Unmarshal(choice, &name) == nil {
		mode, ok := modes[name]
		if !ok {
			return nil, nil, adapter.Untranslatable("tool_choice %q is not supported", name)
		}
		return &generate.FunctionCallingConfig{Mode: mode}, decls, nil
	}
	var obj choiceObject
	if err := json.Unmarshal(choice, &obj); err != nil {
		return nil, nil, adapter.Untranslatable("tool_choice is neither a string nor a tool choice object: %v", err)
	}
	switch {
	case obj.Type == "function" && obj.Function.Name != "":
		return &generate.FunctionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{obj.Function.Name}}, decls, nil
	case obj.Type == "allowed_tools":
		names := make([]string, 0, len(obj.AllowedTools.Tools))
		for _, tl := range obj.AllowedTools.Tools {
			names = append(names, tl.Function.Name)
		}
		switch obj.AllowedTools.Mode {
		case "required":
			return &generate.FunctionCallingConfig{Mode: "ANY", AllowedFunctionNames: names}, decls, nil
		case "auto":
			decls = slices.DeleteFunc(decls, func(d generate.FunctionDeclaration) bool { return !slices.Contains(names, d.Name) })
			if len(decls) == 0 {
				return &generate.FunctionCallingConfig{Mode: "NONE"}, nil, nil
			}
			return &generate.FunctionCallingConfig{Mode: "AUTO"}, decls, nil
		}
	}
	return nil, nil, adapter.Untranslatable("tool_choice must be auto, none, required, a named function or allowed_tools (auto or required)")
}

// generationConfig translates the sampling, output and reasoning settings;
// nil when the request sets none. The output cap counts the thoughts on
// both sides.
func generationConfig(in *openai.ChatRequest) (*generate.GenerationConfig, error) {
	g := &generate.GenerationConfig{
		Temperature:      in.Temperature,
		TopP:             in.TopP,
		StopSequences:    in.Stop,
		Seed:             in.Seed,
		PresencePenalty:  in.PresencePenalty,
		FrequencyPenalty: in.FrequencyPenalty,
		MaxOutputTokens:  cmp.Or(in.MaxCompletionTokens, in.MaxTokens),
	}
	if f := in.ResponseFormat; f != nil {
		switch f.Type {
		case "text":
		case "json_object":
			g.ResponseMIMEType = "application/json"
		case "json_schema":
			g.ResponseMIMEType = "application/json"
			if f.JSONSchema != nil && adapter.Present(f.JSONSchema.Schema) {
				g.ResponseJSONSchema = f.JSONSchema.Schema
			}
		default:
			return nil, adapter.Untranslatable("response_format %q is not supported by this model's upstream (Gemini)", f.Type)
		}
	}
	if effort := in.ReasoningEffort; effort != "" {
		budget, ok := thinkingBudgets[effort]
		if !ok {
			return nil, adapter.Untranslatable("reasoning_effort %q is not supported", effort)
		}
		g.ThinkingConfig = &generate.ThinkingConfig{ThinkingBudget: &budget, IncludeThoughts: budget > 0}
	}
	if reflect.ValueOf(*g).IsZero() {
		return nil, nil
	}
	return g, nil
}

// finishReasons maps Gemini's finishReason to OpenAI's finish_reason
// (docs/translators.md, "Finish reasons"); anything else (STOP, OTHER, the tool-call
// failures) is "stop". A turn with function calls is "tool_calls" whatever
// its reason.
var finishReasons = map[string]string{
	"MAX_TOKENS":               "length",
	"SAFETY":                   "content_filter",
	"RECITATION":               "content_filter",
	"LANGUAGE":                 "content_filter",
	"BLOCKLIST":                "content_filter",
	"PROHIBITED_CONTENT":       "content_filter",
	"SPII":                     "content_filter",
	"IMAGE_SAFETY":             "content_filter",
	"IMAGE_PROHIBITED_CONTENT": "content_filter",
	"IMAGE_RECITATION":         "content_filter",
}

func finishReason(reason string, called bool) string {
	if called {
		return "tool_calls"
	}
	return cmp.Or(finishReasons[reason], "stop")
}

// chatID is the chat completion id for a Gemini answer's.
func chatID(responseID string) string { return "chatcmpl-" + responseID }

// toolCall is the OpenAI tool call for the k-th function call of an
// answer: its id is Gemini's or, when Gemini sent none, made from the
// answer's, with the thought signature in it (callID).
func toolCall(p *generate.Part, responseID string, k int) openai.ToolCall {
	id := p.FunctionCall.ID
	if id == "" {
		id = fmt.Sprintf("call_%s_%d", responseID, k)
	}
	args := "{}"
	if adapter.Present(p.FunctionCall.Args) {
		args = string(p.FunctionCall.Args)
	}
	return openai.ToolCall{ID: callID(id, p.ThoughtSignature), Type: "function",
		Function: openai.FunctionCall{Name: p.FunctionCall.Name, Arguments: args}}
}

// Response returns the chat completion for a whole Gemini answer. Thoughts
// go to the non-standard reasoning_content, as the Anthropic translator
// sends thinking; the signatures of text parts are left out (a chat
// caller cannot send them back; Gemini does not require them).
func (t *FromOpenAI) Response(body []byte) ([]byte, error) {
	var in generate.Response
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("gemini answer: %w", err)
	}
	msg := openai.ChatMessage{Role: "assistant"}
	var text, reasoning strings.Builder
	reason := ""
	if len(in.Candidates) > 0 {
		c := &in.Candidates[0]
		reason = c.FinishReason
		if c.Content != nil {
			for i := range c.Content.Parts {
				p := &c.Content.Parts[i]
				switch {
				case p.FunctionCall != nil:
					msg.ToolCalls = append(msg.ToolCalls, toolCall(p, in.ResponseID, len(msg.ToolCalls)))
				case p.Thought:
					reasoning.WriteString(p.Text)
				default:
					text.WriteString(p.Text)
				}
			}
		}
	} else if in.PromptFeedback != nil && in.PromptFeedback.BlockReason != "" {
		reason = "SAFETY" // the prompt was blocked: no candidates
	}
	if text.Len() > 0 || msg.ToolCalls == nil {
		msg.Content = openai.TextContent(text.String())
	}
	msg.ReasoningContent = reasoning.String()
	var usage sluice.Usage
	if in.UsageMetadata != nil {
		usage = in.UsageMetadata.Sluice()
	}
	out := openai.Completion{
		ID:      chatID(in.ResponseID),
		Object:  "chat.completion",
		Created: t.now().Unix(),
		Model:   in.ModelVersion,
		Choices: []openai.Choice{{Message: msg, FinishReason: finishReason(reason, msg.ToolCalls != nil)}},
		Usage:   openai.UsageOf(usage),
	}
	return json.Marshal(&out)
}

// Error returns OpenAI's error body for a Gemini error answer: Google's
// message, a type for its status, and its gRPC status as the code. A body
// that is not Google's (a proxy's HTML page) gets the status text.
func (t *FromOpenAI) Error(status int, body []byte) []byte { return openAIErrorBody(status, body) }

// openAIErrorBody is Google's error answer body in OpenAI's envelope (see
// FromOpenAI.Error), for every translator of an OpenAI caller.
func openAIErrorBody(status int, body []byte) []byte {
	var in generate.ErrorEnvelope
	if json.Unmarshal(body, &in) != nil || in.Error.Message == "" {
		in.Error = generate.ErrorBody{Message: fmt.Sprintf("the upstream answered %d %s", status, http.StatusText(status))}
	}
	out, _ := json.Marshal(openAIError(status, &in.Error))
	return out
}

// openAIError is Google's error e in OpenAI's envelope, its type the one
// OpenAI's envelope gives the status and its code Google's status name.
func openAIError(status int, e *generate.ErrorBody) *openai.ErrorEnvelope {
	code := json.RawMessage("null")
	if e.Status != "" {
		code, _ = json.Marshal(e.Status)
	}
	return &openai.ErrorEnvelope{Error: openai.ErrorBody{Message: e.Message, Type: openai.ErrorType(status), Code: code}}
}
