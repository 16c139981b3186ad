package validate

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/jsonfield"
)

// responses checks an OpenAI Responses request: max_output_tokens not 0;
// input, when present, not "" or []; each input item with a role has a
// Responses role; a function_call_output's call_id named by an earlier
// function_call of the same input, when the input is the whole
// conversation (no previous_response_id, conversation or item_reference
// that could hold the call); each function tool's parameters a JSON
// Schema object. An absent input passes: a stored prompt may supply it.
// It notes input_image parts of an item's content (or of a
// function_call_output's output) in found.
func responses(body []byte, found *images) *Refusal {
	var input, tools, maxTokens, previous, conversation []byte
	_ = jsonfield.Fields(body, func(k, v []byte) error {
		switch string(k) {
		case "input":
			input = v
		case "tools":
			tools = v
		case "max_output_tokens":
			maxTokens = v
		case "previous_response_id":
			previous = v
		case "conversation":
			conversation = v
		}
		return nil
	})
	if r := zeroCap(maxTokens, "max_output_tokens"); r != nil {
		return r
	}
	if input != nil && string(input) != "null" && empty(input) {
		return refuse(ReasonEmpty, "input", "must not be empty")
	}
	whole := empty(previous) && (conversation == nil || string(conversation) == "null") &&
		!anyBefore(input, -1, func(item []byte) bool { return is(member(item, "type"), "item_reference") })
	if r := each(input, func(i int, item []byte) *Refusal { return responsesItem(input, i, item, whole, found) }); r != nil {
		return r
	}
	return each(tools, func(i int, t []byte) *Refusal {
		if !is(member(t, "type"), "function") {
			return nil
		}
		if fault := schema(member(t, "parameters"), false); fault != schemaOK {
			return fault.refusal(fmt.Sprintf("tools[%d].parameters", i))
		}
		return nil
	})
}

// responsesItem checks item, the item at index i of input; whole says
// input is the whole conversation.
func responsesItem(input []byte, i int, item []byte, whole bool, found *images) *Refusal {
	if !isObject(item) {
		return refuse(ReasonShape, fmt.Sprintf("input[%d]", i), "must be an object")
	}
	var role, typ, callID, content, output []byte
	_ = jsonfield.Fields(item, func(k, v []byte) error {
		switch string(k) {
		case "role":
			role = v
		case "type":
			typ = v
		case "call_id":
			callID = v
		case "content":
			content = v
		case "output":
			output = v
		}
		return nil
	})
	if role != nil && !oneOf(role, "user", "assistant", "system", "developer") {
		return refuse(ReasonRole, fmt.Sprintf("input[%d].role", i), "must be one of user, assistant, system, developer")
	}
	found.typedParts(content, "input_image", "input[%d].content[%d]", i)
	found.typedParts(output, "input_image", "input[%d].output[%d]", i)
	if !whole || !is(typ, "function_call_output") || escaped(typ) {
		return nil
	}
	called := isString(callID) && anyBefore(input, i, func(prev []byte) bool {
		return is(member(prev, "type"), "function_call") && sameString(member(prev, "call_id"), callID)
	})
	if !called {
		return refuse(ReasonToolResult, fmt.Sprintf("input[%d].call_id", i), "names no function_call earlier in input")
	}
	return nil
}
