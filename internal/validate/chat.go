package validate

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/jsonfield"
)

// chatRoles are the roles of an OpenAI chat message.
var chatRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// chat checks an OpenAI chat request: max_tokens and max_completion_tokens
// not 0; messages a non-empty array of objects with a chat role; a tool
// message's tool_call_id named by an earlier assistant message's
// tool_calls; each function tool's parameters a JSON Schema object. It
// notes image_url content parts in found.
func chat(body []byte, found *images) *Refusal {
	var msgs, tools, maxTokens, maxCompletion []byte
	_ = jsonfield.Fields(body, func(k, v []byte) error {
		switch string(k) {
		case "messages":
			msgs = v
		case "tools":
			tools = v
		case "max_tokens":
			maxTokens = v
		case "max_completion_tokens":
			maxCompletion = v
		}
		return nil
	})
	if r := zeroCap(maxTokens, "max_tokens"); r != nil {
		return r
	}
	if r := zeroCap(maxCompletion, "max_completion_tokens"); r != nil {
		return r
	}
	if !isArray(msgs) || empty(msgs) {
		return refuse(ReasonEmpty, "messages", "must be a non-empty array of messages")
	}
	if r := each(msgs, func(i int, m []byte) *Refusal { return chatMessage(msgs, i, m, found) }); r != nil {
		return r
	}
	return each(tools, func(i int, t []byte) *Refusal {
		if fault := schema(member(member(t, "function"), "parameters"), false); fault != schemaOK {
			return fault.refusal(fmt.Sprintf("tools[%d].function.parameters", i))
		}
		return nil
	})
}

// chatMessage checks m, the message at index i of msgs.
func chatMessage(msgs []byte, i int, m []byte, found *images) *Refusal {
	if !isObject(m) {
		return refuse(ReasonShape, fmt.Sprintf("messages[%d]", i), "must be an object")
	}
	var role, callID, content []byte
	_ = jsonfield.Fields(m, func(k, v []byte) error {
		switch string(k) {
		case "role":
			role = v
		case "tool_call_id":
			callID = v
		case "content":
			content = v
		}
		return nil
	})
	if !oneOf(role, chatRoles...) {
		return refuse(ReasonRole, fmt.Sprintf("messages[%d].role", i), "must be one of system, developer, user, assistant, tool")
	}
	found.typedParts(content, "image_url", "messages[%d].content[%d]", i)
	if !is(role, "tool") || escaped(role) {
		return nil
	}
	called := isString(callID) && anyBefore(msgs, i, func(prev []byte) bool {
		return is(member(prev, "role"), "assistant") && anyBefore(member(prev, "tool_calls"), -1, func(c []byte) bool {
			return sameString(member(c, "id"), callID)
		})
	})
	if !called {
		return refuse(ReasonToolResult, fmt.Sprintf("messages[%d].tool_call_id", i), "names no tool call of an earlier assistant message")
	}
	return nil
}
