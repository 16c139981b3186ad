package simulator

import (
	"encoding/json"
	"strings"
)

// ToolWord in the text of a request's last message, when that message is the
// user's, makes a Messages or Responses answer a call of one of the request's
// tools instead of text. A tool_choice that requires a tool (Anthropic "any"
// or "tool", OpenAI "required" or a named function) does the same, and
// "none" prevents it. The tool called is the one tool_choice names, else the
// first; its arguments give each required property of its schema a value of
// its type. The answer to a tool result (the last message is not a user's
// text) is text again, so a tool round trip ends.
const ToolWord = "use_tool"

// convo accumulates the seed of an answer and the prompt tokens over the
// messages of a conversation, in order: the answer depends on roles and
// texts alone, so one conversation asked in any protocol gets the same
// words. prompt = words of text + 3 per message + 3, as for chat.
type convo struct {
	seed   uint64
	prompt int
	// With track, points collects each prefix of the prompt that ends at
	// a message (for the prompt cache, Options.PromptCache).
	track    bool
	messages int
	points   []prefixPoint
}

func newConvo() convo { return convo{seed: fnvOffset, prompt: 3} }

func (cv *convo) message(role string) {
	if cv.track && cv.messages > 0 {
		cv.points = append(cv.points, prefixPoint{cv.seed, cv.prompt})
	}
	cv.messages++
	cv.seed = fnvAdd(cv.seed, role)
	cv.seed = fnvAdd(cv.seed, "\x00")
	cv.prompt += 3
}

func (cv *convo) text(s string) {
	cv.seed = fnvAdd(cv.seed, s)
	cv.seed = fnvAdd(cv.seed, "\x00")
	cv.prompt += countWords(s)
}

// thinkingWords is the length of a thinking block (Anthropic) or the
// reasoning tokens of a reasoning item (Responses).
const thinkingWords = 8

// reply is the deterministic answer to a Messages or Responses request:
// text (answer), or a call of one of the request's tools, after some
// thinking when the request enables it.
type reply struct {
	answer
	thinking int       // thinking or reasoning tokens; 0 for none
	tool     *toolCall // nil for a text answer
}

// replyFor answers the conversation cv. limit is the request's output cap
// (nil for none): the text is min(limit, defaultCompletionTokens) words,
// and finish is "length" when the cap cut it short.
func replyFor(cv convo, limit *int) reply {
	r := reply{answer: answer{seed: cv.seed, prompt: cv.prompt, completion: defaultCompletionTokens, finish: "stop", points: cv.points}}
	if limit != nil && *limit < defaultCompletionTokens {
		r.completion = max(*limit, 0)
		r.finish = "length"
	}
	return r
}

// output is the output tokens of the reply.
func (r *reply) output() int {
	if r.tool != nil {
		return r.thinking + r.tool.tokens()
	}
	return r.thinking + r.completion
}

// text is the answer's text: its words, and with EchoAuth the credential
// header quoted after them. A string, so streams send slices of it.
func (c *call) text(r *reply) string {
	b := appendWords(make([]byte, 0, r.completion*8), r.seed, r.completion)
	if c.b.EchoAuth {
		b = append(b, ' ')
		b = append(b, c.credentialHeader()...)
	}
	return string(b)
}

// nextDelta returns the first piece of text as a stream sends it (a word
// with its leading space) and the rest.
func nextDelta(text string) (piece, rest string) {
	i := 1
	for i < len(text) && text[i] != ' ' {
		i++
	}
	return text[:i], text[i:]
}

// countDeltas is how many pieces nextDelta cuts text into.
func countDeltas(text string) int {
	n := 0
	for rest := text; len(rest) > 0; n++ {
		_, rest = nextDelta(rest)
	}
	return n
}

// toolDef is a function tool of a request.
type toolDef struct {
	name   string
	schema json.RawMessage
}

// toolCall is a reply that calls a tool.
type toolCall struct {
	name string
	args []byte // a JSON object
}

// argsPiece is the size of the pieces a stream sends a tool call's
// arguments in.
const argsPiece = 12

// tokens counts a tool call's output as about four bytes per token.
func (t *toolCall) tokens() int { return 1 + len(t.args)/4 }

// chooseTool decides, as ToolWord says, whether the reply calls a tool.
// choice is the tool_choice type ("auto", "none", "any", "required", …),
// named the tool it names, asked whether the last message asks for one.
func chooseTool(tools []toolDef, choice, named string, asked bool, seed uint64) *toolCall {
	forced := choice == "any" || choice == "required" || named != ""
	if len(tools) == 0 || choice == "none" || (!forced && !asked) {
		return nil
	}
	t := tools[0]
	for _, d := range tools {
		if d.name == named {
			t = d
		}
	}
	return &toolCall{name: t.name, args: toolArgs(t.schema, seed)}
}

// toolArgs gives each required property of a JSON schema a value of its
// type: a word for strings, 1 for numbers, true, [] or {}.
func toolArgs(schema json.RawMessage, seed uint64) []byte {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"` // a name, or a list of names
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s) // a schema we can't read asks for nothing
	b := []byte{'{'}
	x := seed
	for i, name := range s.Required {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, ':')
		typ := strings.Trim(string(s.Properties[name].Type), `[]" `)
		typ, _, _ = strings.Cut(typ, `"`)
		switch typ {
		case "string":
			b = appendString(b, nextWord(&x))
		case "integer", "number":
			b = append(b, '1')
		case "boolean":
			b = append(b, "true"...)
		case "array":
			b = append(b, "[]"...)
		case "object":
			b = append(b, "{}"...)
		default:
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// askedForTool reports whether a text of the last message names ToolWord.
func askedForTool(text string) bool { return strings.Contains(text, ToolWord) }
