package openai

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	wire "github.com/sluicehq/sluice/internal/protocol/openai"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
)

// FromResponses carries one execution of an OpenAI Responses caller on an
// OpenAI chat upstream: the request's instructions and input items become
// chat messages, and the chat answer (whole or streamed) becomes a
// Responses response object or its stream of events.
//
// What chat cannot express is refused with a 400: state the Responses API
// keeps (previous_response_id, conversation, prompt, background, item
// references), a tool_choice forcing a tool the Responses API runs itself
// (web_search, file_search, …), tools of other kinds than function,
// namespace and those, images or files in a function call's output,
// logprobs. The functions of a namespace tool become chat functions named
// <namespace>__<name> (see toolNames). Tools the Responses API runs itself
// that are only offered are dropped, since a chat model could never call
// them; DroppedTools names them so that the caller can be told.
// Dropped, and named (Dropped): FromResponsesHints.
// Nothing is stored, which is answered differently from the Responses API,
// and the answer says so: the response object carries "store": false
// whatever the caller asked, since the default is true and most callers
// never set it; a later previous_response_id naming it is refused by this
// translator. The reasoning text some compatible servers send
// (reasoning_content, not OpenAI's) comes back as a reasoning item.
//
// One value per execution; not safe for concurrent use.
type FromResponses struct {
	req          wire.ResponsesRequest // the caller's request, echoed in the response object
	caller       []byte                // the caller's body, for Origin
	names        toolNames
	dropped      []string
	droppedTools []string
	stream       responsesStream
}

var _ adapter.Translator = (*FromResponses)(nil)

// NewFromResponses returns the translator of one execution.
func NewFromResponses() *FromResponses { return new(FromResponses) }

// FromResponsesHints are what FromResponses drops (adapter.Hints):
// max_tool_calls, which caps calls of built-in tools, which are refused or
// dropped; truncation ("auto" would drop the oldest items of an input too
// long for the model, where chat answers context_length_exceeded instead —
// a 400, never a different answer); and reasoning items in the input (see
// chatMessages). metadata is not sent either, but it is not lost: it is
// the response object's, which the answer echoes (chat takes it only for
// stored completions).
var FromResponsesHints = adapter.Hints{"max_tool_calls", "truncation", "input[type=reasoning]"}

// responsesOrigins are the Responses fields the chat fields FromResponses
// fills come from, where the names differ (adapter.Origins).
var responsesOrigins = adapter.Origins{
	"verbosity":                             "text.verbosity",
	"tools[].function.strict":               "tools[].strict",
	"messages[].content[].image_url.detail": "input[].content[].detail",
}

// Dropped names the caller's hints the last Request left out.
func (t *FromResponses) Dropped() []string { return t.dropped }

// Origin names the caller's field the chat field hub of the last Request
// came from; "" when the caller sent none.
func (t *FromResponses) Origin(hub string) string { return responsesOrigins.Sent(t.caller, hub) }

// chatRequestExtras are the chat request fields a Responses request sets
// that ChatRequest does not carry; embedded beside it they are written
// with it.
type chatRequestExtras struct {
	wire.ChatRequest
	PromptCacheKey       string          `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention json.RawMessage `json:"prompt_cache_retention,omitempty"`
	ServiceTier          string          `json:"service_tier,omitempty"`
	Verbosity            string          `json:"verbosity,omitempty"`
}

// Request returns the chat request for the caller's Responses request.
func (t *FromResponses) Request(req *sluice.Request, model string) ([]byte, error) {
	if err := json.Unmarshal(req.Body, &t.req); err != nil {
		return nil, adapter.Untranslatable("the body is not a valid Responses request: %v", err)
	}
	r := &t.req
	switch {
	case r.PreviousResponseID != "":
		return nil, adapter.Untranslatable("previous_response_id cannot be used with this model: its upstream speaks OpenAI chat, which keeps no responses; send the whole conversation in input instead")
	case adapter.Present(r.Conversation):
		return nil, adapter.Untranslatable("conversation cannot be used with this model: its upstream speaks OpenAI chat, which keeps no conversations; send the whole conversation in input instead")
	case r.Background:
		return nil, adapter.Untranslatable("background cannot be used with this model: its upstream speaks OpenAI chat, which keeps no responses to poll")
	case adapter.Present(r.Prompt):
		return nil, adapter.Untranslatable("prompt (a stored prompt template) cannot be used with this model: its upstream speaks OpenAI chat")
	case adapter.Present(r.ContextManagement):
		return nil, adapter.Untranslatable("context_management cannot be used with this model: its upstream speaks OpenAI chat")
	case r.TopLogprobs != nil && *r.TopLogprobs > 0:
		return nil, adapter.Untranslatable("top_logprobs is not translated to this model's upstream (OpenAI chat)")
	}
	t.caller = req.Body
	t.dropped = FromResponsesHints.Sent(req.Body)
	for _, inc := range r.Include {
		// Every other include names output chat cannot produce anyway
		// (reasoning.encrypted_content, built-in tools' results, which are
		// refused below) or echoes the input; logprobs would be lost.
		if inc == "message.output_text.logprobs" {
			return nil, adapter.Untranslatable("include %q is not translated to this model's upstream (OpenAI chat)", inc)
		}
	}
	msgs, err := chatMessages(r.Instructions, r.Input)
	if err != nil {
		return nil, err
	}
	out := chatRequestExtras{
		ChatRequest: wire.ChatRequest{
			Model:               model,
			Messages:            msgs,
			MaxCompletionTokens: r.MaxOutputTokens,
			Temperature:         r.Temperature,
			TopP:                r.TopP,
			Stream:              req.Stream,
			ParallelToolCalls:   r.ParallelToolCalls,
			User:                r.User,
			SafetyIdentifier:    r.SafetyIdentifier,
		},
		PromptCacheKey:       r.PromptCacheKey,
		PromptCacheRetention: r.PromptCacheRetain,
		ServiceTier:          r.ServiceTier,
	}
	if req.Stream {
		// Usage arrives only when asked for; Sluice counts on it.
		out.StreamOptions = &wire.StreamOptions{IncludeUsage: true}
	}
	if out.Tools, t.names, t.droppedTools, err = chatTools(r.Tools); err != nil {
		return nil, err
	}
	t.stream.names = t.names
	if out.ToolChoice, err = chatToolChoice(r.ToolChoice, out.Tools, t.names); err != nil {
		return nil, err
	}
	if len(out.Tools) == 0 {
		// Chat refuses parallel_tool_calls and tool_choice without tools;
		// the Responses API takes them, and they mean nothing there either
		// — but "required" when every tool was dropped forces one chat
		// cannot run.
		if len(t.droppedTools) > 0 && string(out.ToolChoice) == `"required"` {
			return nil, adapter.Untranslatable("tool_choice \"required\" forces a call of a tool the Responses API runs itself (%s); this model's upstream (OpenAI chat) has no such tool", strings.Join(t.droppedTools, ", "))
		}
		out.ParallelToolCalls = nil
		out.ToolChoice = nil
	}
	if r.Reasoning != nil {
		// reasoning.summary asks for summaries "when available": chat
		// returns no reasoning text, so none is; nothing is refused.
		out.ReasoningEffort = r.Reasoning.Effort
	}
	if r.Text != nil {
		out.Verbosity = r.Text.Verbosity
		if out.ResponseFormat, err = chatResponseFormat(r.Text.Format); err != nil {
			return nil, err
		}
	}
	return json.Marshal(out)
}

// chatMessages turns instructions and input into chat messages. Function
// calls join the assistant message before them (chat's tool_calls) and
// each function_call_output must answer a call made earlier in the input.
//
// Reasoning items are dropped: chat has no way to send reasoning back to
// a model, and what Responses clients replay (Codex sends
// encrypted_content) can only be read by the Responses API that wrote it,
// so no chat upstream could use it; the model answers from the visible
// conversation, as a chat caller's would.
func chatMessages(instructions json.RawMessage, in *wire.Input) ([]wire.ChatMessage, error) {
	var items []wire.InputItem
	if adapter.Present(instructions) {
		// instructions is a string, or (newer) a list of input items.
		var text string
		if err := json.Unmarshal(instructions, &text); err == nil {
			items = append(items, wire.InputItem{Role: "system", Content: &wire.InputContent{Text: text}})
		} else if err := json.Unmarshal(instructions, &items); err != nil {
			return nil, adapter.Untranslatable("instructions must be a string or a list of input items")
		}
	}
	if in != nil {
		if in.Items == nil {
			items = append(items, wire.InputItem{Role: "user", Content: &wire.InputContent{Text: in.Text}})
		}
		items = append(items, in.Items...)
	}
	msgs := make([]wire.ChatMessage, 0, len(items))
	calls := make(map[string]bool)
	for i, it := range items {
		switch it.Type {
		case "", "message":
			m, err := chatMessage(i, it)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		case "function_call":
			if it.CallID == "" {
				return nil, adapter.Untranslatable("input[%d]: a function_call needs a call_id", i)
			}
			calls[it.CallID] = true
			name := it.Name
			if it.Namespace != "" {
				name = flatName(it.Namespace, it.Name)
			}
			call := wire.ToolCall{ID: it.CallID, Type: "function", Function: wire.FunctionCall{Name: name, Arguments: it.Arguments}}
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				continue
			}
			msgs = append(msgs, wire.ChatMessage{Role: "assistant", ToolCalls: []wire.ToolCall{call}})
		case "function_call_output":
			if !calls[it.CallID] {
				return nil, adapter.Untranslatable("input[%d]: function_call_output %q answers no function_call earlier in the input (a chat upstream needs each call and its output in the same request)", i, it.CallID)
			}
			content, err := toolOutput(i, it.Output)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, wire.ChatMessage{Role: "tool", ToolCallID: it.CallID, Content: content})
		case "reasoning":
			// Dropped: see the function's comment.
		case "item_reference":
			return nil, adapter.Untranslatable("input[%d]: item_reference names an item stored by the Responses API; this model's upstream speaks OpenAI chat: send the item itself", i)
		default:
			return nil, adapter.Untranslatable("input[%d]: items of type %q cannot be expressed on this model's upstream (OpenAI chat)", i, it.Type)
		}
	}
	return msgs, nil
}

// chatMessage turns one message item into a chat message. Developer
// messages and instructions become system messages: every chat upstream
// knows that role, and OpenAI's reads it as developer on the models that
// have one.
func chatMessage(i int, it wire.InputItem) (wire.ChatMessage, error) {
	var m wire.ChatMessage
	switch it.Role {
	case "user":
		m.Role = "user"
	case "assistant":
		return assistantMessage(i, it)
	case "system", "developer":
		m.Role = "system"
	default:
		return m, adapter.Untranslatable("input[%d]: unknown role %q", i, it.Role)
	}
	if it.Content == nil {
		return m, adapter.Untranslatable("input[%d]: a message needs content", i)
	}
	if it.Content.Parts == nil {
		m.Content = wire.TextContent(it.Content.Text)
		return m, nil
	}
	parts := make([]wire.ContentPart, 0, len(it.Content.Parts))
	for j, p := range it.Content.Parts {
		cp, err := chatPart(p)
		if err == nil && m.Role == "system" && cp.Type != "text" {
			err = errors.New("a system or developer message holds text only")
		}
		if err != nil {
			return m, adapter.Untranslatable("input[%d].content[%d]: %v", i, j, err)
		}
		parts = append(parts, cp)
	}
	m.Content = &wire.Content{Parts: parts}
	return m, nil
}

// chatPart turns one input content part into a chat content part.
func chatPart(p wire.InputPart) (wire.ContentPart, error) {
	switch p.Type {
	case "input_text":
		return wire.ContentPart{Type: "text", Text: p.Text}, nil
	case "input_image":
		if p.ImageURL == "" {
			return wire.ContentPart{}, errors.New("an input_image by file_id cannot be expressed on OpenAI chat; send its image_url")
		}
		return wire.ContentPart{Type: "image_url", ImageURL: &wire.ImageURL{URL: p.ImageURL, Detail: p.Detail}}, nil
	case "input_file":
		if p.FileURL != "" {
			return wire.ContentPart{}, errors.New("an input_file by file_url cannot be expressed on OpenAI chat; send its file_data")
		}
		return wire.ContentPart{Type: "file", File: &wire.File{FileData: p.FileData, FileID: p.FileID, Filename: p.Filename}}, nil
	}
	return wire.ContentPart{}, fmt.Errorf("content of type %q cannot be expressed on OpenAI chat", p.Type)
}

// assistantMessage turns an assistant message replayed from an earlier
// answer into a chat assistant message: its text parts joined, its refusal
// in chat's refusal field.
func assistantMessage(i int, it wire.InputItem) (wire.ChatMessage, error) {
	m := wire.ChatMessage{Role: "assistant"}
	if it.Content == nil {
		return m, nil
	}
	if it.Content.Parts == nil {
		m.Content = wire.TextContent(it.Content.Text)
		return m, nil
	}
	var text, refusal strings.Builder // joined in place: += would copy the whole per part
	for j, p := range it.Content.Parts {
		switch p.Type {
		case "output_text", "input_text":
			text.WriteString(p.Text)
		case "refusal":
			refusal.WriteString(p.Refusal)
		default:
			return m, adapter.Untranslatable("input[%d].content[%d]: an assistant message's content of type %q cannot be expressed on OpenAI chat", i, j, p.Type)
		}
	}
	m.Refusal = refusal.String()
	if text.Len() > 0 || m.Refusal == "" {
		m.Content = wire.TextContent(text.String())
	}
	return m, nil
}

// toolOutput is a function_call_output's output as a chat tool message's
// content, which holds text only.
func toolOutput(i int, out *wire.InputContent) (*wire.Content, error) {
	if out == nil {
		return wire.TextContent(""), nil
	}
	if out.Parts == nil {
		return wire.TextContent(out.Text), nil
	}
	parts := make([]wire.ContentPart, 0, len(out.Parts))
	for j, p := range out.Parts {
		if p.Type != "input_text" {
			return nil, adapter.Untranslatable("input[%d].output[%d]: a function_call_output of type %q cannot be expressed on OpenAI chat, whose tool messages hold text only", i, j, p.Type)
		}
		parts = append(parts, wire.ContentPart{Type: "text", Text: p.Text})
	}
	return &wire.Content{Parts: parts}, nil
}

// qualifiedName is a function of a namespace tool: the namespace and the
// function's own name, which is what a Responses function_call names.
type qualifiedName struct{ namespace, name string }

// toolNames maps the chat name of each function flattened out of a
// namespace tool back to its namespace and name.
//
// The Responses wire shape relied on (OpenAI's API reference and Codex
// 0.171's requests): a namespace tool is {"type":"namespace","name","description",
// "tools":[function tools]}, and a call of one of its functions is a
// function_call item with the function's own name and "namespace" beside
// it, in the answer and in the input a caller sends back. Chat function
// names allow only a-zA-Z0-9_- (no dot), so the chat name joins the two
// with namespaceSeparator; the way back is this table, never a split,
// since either half may hold the separator.
type toolNames map[string]qualifiedName

const namespaceSeparator = "__"

// flatName is the chat name of function name of namespace.
func flatName(namespace, name string) string { return namespace + namespaceSeparator + name }

// callItem is a function_call output item for a chat tool call of
// chatName, named back into its namespace when it was flattened. Its item
// id is derived from the call id, which chat gives, so the same call has
// the same ids in every event.
func (n toolNames) callItem(callID, chatName, args, status string) wire.OutputItem {
	it := wire.OutputItem{ID: functionCallID(callID), Type: "function_call", Status: status, CallID: callID, Name: chatName, Arguments: &args}
	if q, ok := n[chatName]; ok {
		it.Namespace, it.Name = q.namespace, q.name
	}
	return it
}

// maxChatToolName is the longest function name chat takes.
const maxChatToolName = 64

// runByResponsesAPI reports whether tools of type typ are run by the
// Responses API itself: a chat model can never call them.
func runByResponsesAPI(typ string) bool {
	switch typ {
	case "file_search", "code_interpreter", "image_generation", "mcp":
		return true
	}
	return strings.HasPrefix(typ, "web_search") // web_search, web_search_preview and their dated versions
}

// chatTools turns function tools, and the functions of namespace tools,
// into chat's; it drops the tools the Responses API runs itself and
// returns their types. A function tool's strict is true unless said
// otherwise in the Responses API and false in chat, so it is always
// written.
func chatTools(tools []wire.ResponsesTool) ([]wire.Tool, toolNames, []string, error) {
	if len(tools) == 0 {
		return nil, nil, nil, nil
	}
	var (
		out     = make([]wire.Tool, 0, len(tools))
		names   toolNames
		dropped []string
	)
	add := func(tl wire.ResponsesTool, name string) {
		strict := tl.Strict == nil || *tl.Strict
		out = append(out, wire.Tool{Type: "function", Function: wire.FunctionDecl{
			Name: name, Description: tl.Description, Parameters: tl.Parameters, Strict: &strict,
		}})
	}
	taken := func(name string) bool {
		if _, ok := names[name]; ok {
			return true
		}
		for _, tl := range tools {
			if tl.Type == "function" && tl.Name == name {
				return true
			}
		}
		return false
	}
	for i, tl := range tools {
		switch {
		case tl.Type == "function":
			add(tl, tl.Name)
		case tl.Type == "namespace":
			for j, f := range tl.Tools {
				if f.Type != "function" {
					return nil, nil, nil, adapter.Untranslatable("tools[%d].tools[%d]: a tool of type %q cannot be expressed on this model's upstream (OpenAI chat)", i, j, f.Type)
				}
				name := flatName(tl.Name, f.Name)
				switch {
				case len(name) > maxChatToolName:
					return nil, nil, nil, adapter.Untranslatable("tools[%d].tools[%d]: function %q of namespace %q would be named %q on this model's upstream (OpenAI chat), longer than its %d characters", i, j, f.Name, tl.Name, name, maxChatToolName)
				case taken(name):
					return nil, nil, nil, adapter.Untranslatable("tools[%d].tools[%d]: function %q of namespace %q would be named %q on this model's upstream (OpenAI chat), as another tool already is", i, j, f.Name, tl.Name, name)
				}
				if names == nil {
					names = make(toolNames)
				}
				names[name] = qualifiedName{namespace: tl.Name, name: f.Name}
				add(f, name)
			}
		case runByResponsesAPI(tl.Type):
			dropped = append(dropped, tl.Type)
		default:
			return nil, nil, nil, adapter.Untranslatable("tools[%d]: a tool of type %q cannot be expressed on this model's upstream (OpenAI chat)", i, tl.Type)
		}
	}
	return out, names, dropped, nil
}

// DroppedTools names, by type, the tools of the caller's request that were
// left out of the chat request: tools the Responses API runs itself,
// offered but not forced, which a chat model could never have called.
func (t *FromResponses) DroppedTools() []string { return t.droppedTools }

// chatAllowedTools is chat's allowed_tools tool_choice.
type chatAllowedTools struct {
	Type         string `json:"type"`
	AllowedTools struct {
		Mode  string                    `json:"mode"`
		Tools []wire.ToolChoiceFunction `json:"tools"`
	} `json:"allowed_tools"`
}

// chatToolChoice turns a Responses tool_choice into chat's: the same
// strings, and the function and allowed_tools objects reshaped, each
// function by its chat name among tools (see chosenFunction).
func chatToolChoice(raw json.RawMessage, tools []wire.Tool, names toolNames) (json.RawMessage, error) {
	if !adapter.Present(raw) || raw[0] == '"' {
		return raw, nil
	}
	var c wire.ResponsesToolChoice
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, adapter.Untranslatable("tool_choice: %v", err)
	}
	switch c.Type {
	case "function":
		name, err := chosenFunction(c.Namespace, c.Name, tools, names)
		if err != nil {
			return nil, adapter.Untranslatable("tool_choice: %v", err)
		}
		f := wire.ToolChoiceFunction{Type: "function"}
		f.Function.Name = name
		return json.Marshal(f)
	case "allowed_tools":
		a := chatAllowedTools{Type: "allowed_tools"}
		a.AllowedTools.Mode = c.Mode
		for i, tl := range c.Tools {
			if tl.Type != "function" {
				return nil, adapter.Untranslatable("tool_choice.tools[%d]: %q is a tool the Responses API runs itself; this model's upstream (OpenAI chat) has no such tool", i, tl.Type)
			}
			name, err := chosenFunction(tl.Namespace, tl.Name, tools, names)
			if err != nil {
				return nil, adapter.Untranslatable("tool_choice.tools[%d]: %v", i, err)
			}
			f := wire.ToolChoiceFunction{Type: "function"}
			f.Function.Name = name
			a.AllowedTools.Tools = append(a.AllowedTools.Tools, f)
		}
		return json.Marshal(a)
	}
	return nil, adapter.Untranslatable("tool_choice of type %q names a tool the Responses API runs itself; this model's upstream (OpenAI chat) has no such tool", c.Type)
}

// chosenFunction is the chat name, among tools, of the function a
// tool_choice names: <namespace>__<name> when it gives a namespace; else
// name when a chat function has it (a top-level function, or one already
// flattened); else the one namespace function whose own name it is. A
// function the request does not declare, or a name two namespaces share,
// is an error: chat would refuse the choice less clearly.
func chosenFunction(namespace, name string, tools []wire.Tool, names toolNames) (string, error) {
	declared := func(n string) bool {
		return slices.ContainsFunc(tools, func(t wire.Tool) bool { return t.Function.Name == n })
	}
	if namespace != "" {
		if flat := flatName(namespace, name); declared(flat) {
			return flat, nil
		}
		return "", fmt.Errorf("function %q of namespace %q is not among the tools", name, namespace)
	}
	if declared(name) {
		return name, nil
	}
	var found []string
	for flat, q := range names {
		if q.name == name {
			found = append(found, flat)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("function %q is not among the tools", name)
	}
	slices.Sort(found)
	return "", fmt.Errorf("function %q is in more than one namespace (%s): name its namespace", name, strings.Join(found, ", "))
}

// chatResponseFormat turns text.format into chat's response_format.
func chatResponseFormat(f *wire.TextFormat) (*wire.ResponseFormat, error) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case "text", "json_object":
		return &wire.ResponseFormat{Type: f.Type}, nil
	case "json_schema":
		return &wire.ResponseFormat{Type: "json_schema", JSONSchema: &wire.JSONSchema{
			Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict,
		}}, nil
	}
	return nil, adapter.Untranslatable("text.format of type %q cannot be expressed on this model's upstream (OpenAI chat)", f.Type)
}

// Response returns the Responses response object for a whole chat answer.
func (t *FromResponses) Response(body []byte) ([]byte, error) {
	var c struct {
		wire.Completion
		ServiceTier string `json:"service_tier"` // the tier used, which may not be the one asked for
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("decode chat completion: %w", err)
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("chat completion %q has no choice", c.ID)
	}
	ch := c.Choices[0]
	a := answer{base: idBase(c.ID), created: c.Created, model: c.Model, tier: c.ServiceTier}
	var output []wire.OutputItem
	if r := ch.Message.ReasoningContent; r != "" {
		output = append(output, reasoningItem("rs_"+a.base, "completed", []wire.OutputPart{partOf("reasoning_text", r)}))
	}
	if m := ch.Message; m.Content.PlainText() != "" || m.Refusal != "" {
		var parts []wire.OutputPart
		if s := m.Content.PlainText(); s != "" {
			parts = append(parts, outputText(s))
		}
		if m.Refusal != "" {
			parts = append(parts, wire.OutputPart{Type: "refusal", Refusal: &m.Refusal})
		}
		output = append(output, wire.OutputItem{ID: "msg_" + a.base, Type: "message", Status: "completed", Role: "assistant", Content: parts})
	}
	for _, tc := range ch.Message.ToolCalls {
		output = append(output, t.names.callItem(tc.ID, tc.Function.Name, tc.Function.Arguments, "completed"))
	}
	return json.Marshal(t.response(a, ch.FinishReason, output, c.Usage))
}

// emptyAnnotations is the annotations of an output_text part: chat has none.
var emptyAnnotations = json.RawMessage(`[]`)

// outputText is an output_text part.
func outputText(s string) wire.OutputPart {
	return wire.OutputPart{Type: "output_text", Text: &s, Annotations: &emptyAnnotations}
}

// emptyList is an empty JSON list: the summary of a reasoning item that
// has none.
var emptyList = json.RawMessage(`[]`)

// reasoningItem is a reasoning output item with content, and no summary:
// chat gives the reasoning itself, where it gives any.
func reasoningItem(id, status string, content []wire.OutputPart) wire.OutputItem {
	return wire.OutputItem{ID: id, Type: "reasoning", Status: status, Summary: emptyList, Content: content}
}

// functionCallID is the item id of the function call callID.
func functionCallID(callID string) string { return "fc_" + strings.TrimPrefix(callID, "call_") }

// idBase is the part of a chat completion id that names the response and
// its items (chatcmpl-9x → resp_9x, msg_9x); a random one when the upstream
// sent none.
func idBase(chatID string) string {
	if s := strings.TrimPrefix(chatID, "chatcmpl-"); s != "" {
		return s
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// answer is what a chat answer says of itself that its response object
// shows: the id's base (see idBase), when, the model, the service tier.
type answer struct {
	base    string
	created int64
	model   string
	tier    string
}

// response is the response object for the caller's request: status from
// the finish reason ("" while in progress), usage in Responses' terms.
func (t *FromResponses) response(a answer, finish string, output []wire.OutputItem, u *wire.ChatUsage) *wire.Response {
	r := &t.req
	resp := &wire.Response{
		ID:                "resp_" + a.base,
		Object:            "response",
		CreatedAt:         a.created,
		Status:            "in_progress",
		Instructions:      r.Instructions,
		MaxOutputTokens:   r.MaxOutputTokens,
		Model:             a.model,
		Output:            output,
		ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls,
		Reasoning:         r.Reasoning,
		ServiceTier:       cmp.Or(a.tier, r.ServiceTier),
		Temperature:       r.Temperature,
		Text:              r.Text,
		ToolChoice:        r.ToolChoice,
		Tools:             r.Tools,
		TopP:              r.TopP,
		Truncation:        "disabled",
		PromptCacheKey:    r.PromptCacheKey,
		SafetyIdentifier:  r.SafetyIdentifier,
		User:              r.User,
		Metadata:          r.Metadata,
	}
	if output == nil {
		resp.Output = []wire.OutputItem{}
	}
	if !adapter.Present(resp.ToolChoice) {
		resp.ToolChoice = json.RawMessage(`"auto"`)
	}
	if resp.Tools == nil {
		resp.Tools = []wire.ResponsesTool{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	switch finish {
	case "":
	case "length":
		resp.Status, resp.IncompleteDetails = "incomplete", &wire.IncompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		resp.Status, resp.IncompleteDetails = "incomplete", &wire.IncompleteDetails{Reason: "content_filter"}
	default: // stop, tool_calls, function_call
		resp.Status = "completed"
	}
	if u != nil {
		resp.Usage = wire.ResponsesUsageOf(u.Sluice())
	}
	return resp
}

// Error returns the caller's error body for a chat upstream's error:
// chat and Responses share the envelope, so it is the upstream's, in a
// well-formed one.
func (t *FromResponses) Error(status int, body []byte) []byte {
	return wire.ErrorEnvelopeOf(status, body)
}
