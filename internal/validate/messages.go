package validate

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/jsonfield"
)

// messages checks an Anthropic Messages request (and a count_tokens one):
// max_tokens not 0; messages a non-empty array of objects whose role is
// user or assistant; a tool_result block's tool_use_id named by a tool_use
// block of an earlier message; each tool's input_schema, when it has one,
// a JSON Schema object with "type": "object", as Messages requires. It
// notes image blocks (also inside a tool_result's content) in found.
func messages(body []byte, found *images) *Refusal {
	var msgs, tools, maxTokens []byte
	_ = jsonfield.Fields(body, func(k, v []byte) error {
		switch string(k) {
		case "messages":
			msgs = v
		case "tools":
			tools = v
		case "max_tokens":
			maxTokens = v
		}
		return nil
	})
	if r := zeroCap(maxTokens, "max_tokens"); r != nil {
		return r
	}
	if !isArray(msgs) || empty(msgs) {
		return refuse(ReasonEmpty, "messages", "must be a non-empty array of messages")
	}
	if r := each(msgs, func(i int, m []byte) *Refusal { return messagesMessage(msgs, i, m, found) }); r != nil {
		return r
	}
	return each(tools, func(i int, t []byte) *Refusal {
		if fault := schema(member(t, "input_schema"), true); fault != schemaOK {
			return fault.refusal(fmt.Sprintf("tools[%d].input_schema", i))
		}
		return nil
	})
}

// messagesMessage checks m, the message at index i of msgs.
func messagesMessage(msgs []byte, i int, m []byte, found *images) *Refusal {
	if !isObject(m) {
		return refuse(ReasonShape, fmt.Sprintf("messages[%d]", i), "must be an object")
	}
	var role, content []byte
	_ = jsonfield.Fields(m, func(k, v []byte) error {
		switch string(k) {
		case "role":
			role = v
		case "content":
			content = v
		}
		return nil
	})
	if !oneOf(role, "user", "assistant") {
		return refuse(ReasonRole, fmt.Sprintf("messages[%d].role", i), "must be user or assistant")
	}
	return each(content, func(j int, block []byte) *Refusal {
		var typ, inner []byte
		_ = jsonfield.Fields(block, func(k, v []byte) error {
			switch string(k) {
			case "type":
				typ = v
			case "content":
				inner = v
			}
			return nil
		})
		if exactly(typ, "image") {
			found.note("messages[%d].content[%d]", [3]int{i, j})
		}
		if !exactly(typ, "tool_result") {
			return nil
		}
		found.typedParts(inner, "image", "messages[%d].content[%d].content[%d]", i, j)
		id := member(block, "tool_use_id")
		used := isString(id) && anyBefore(msgs, i, func(prev []byte) bool {
			return anyBefore(member(prev, "content"), -1, func(b []byte) bool {
				return is(member(b, "type"), "tool_use") && sameString(member(b, "id"), id)
			})
		})
		if !used {
			return refuse(ReasonToolResult, fmt.Sprintf("messages[%d].content[%d].tool_use_id", i, j), "names no tool_use block of an earlier message")
		}
		return nil
	})
}
