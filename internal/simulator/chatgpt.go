package simulator

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The ChatGPT backend: Codex signed in with a ChatGPT account posts
// Responses requests under /backend-api/codex (routeResponses), with the
// account's access token as a bearer token. Beyond the Responses API, a
// create or a compaction there requires a chatgpt-account-id header (403
// without one, or with another account than the key's
// Behavior.ChatGPTAccount), and a create's body must have "instructions",
// "store": false and "stream": true, and no member the backend does not
// support; it refuses the rest with FastAPI's {"detail": "…"}, as the
// backend does. A usage limit (the key's cap or FailStatus 429) answers
// 429 usage_limit_reached, whose body says when the limit resets
// (resets_in_seconds) and which has no Retry-After.

// chatgptAccountHeader names the ChatGPT account a request is for.
const chatgptAccountHeader = "Chatgpt-Account-Id"

// chatgptAccountRefused answers a create or compaction on the backend
// whose chatgpt-account-id is missing or is not the key's account, and
// reports whether it did.
func (c *call) chatgptAccountRefused() bool {
	if c.ep != epResponses && c.ep != epCompact {
		return false
	}
	switch account := c.r.Header.Get(chatgptAccountHeader); {
	case account == "":
		c.fail(http.StatusForbidden, falDetail("Missing chatgpt-account-id header"))
	case c.b.ChatGPTAccount != "" && account != c.b.ChatGPTAccount:
		c.fail(http.StatusForbidden, falDetail("The chatgpt-account-id header does not name the token's account"))
	default:
		return false
	}
	return true
}

// chatgptUnsupported are the members of a Responses request the backend
// refuses.
var chatgptUnsupported = []string{
	"max_output_tokens", "temperature", "top_p", "truncation", "user",
	"safety_identifier", "prompt_cache_retention", "stream_options", "context_management",
}

// chatgptRefusal is the backend's 400 for a Responses body it does not
// take, checked in the order the backend reports them; nil when it takes
// it. A compaction is not streamed and keeps nothing: only its members
// and roles are checked.
func (c *call) chatgptRefusal(req *responsesRequest, body []byte) *apiError {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return nil // parseResponses has answered it
	}
	refuse := func(detail string) *apiError { return &apiError{http.StatusBadRequest, falDetail(detail)} }
	create := c.ep == epResponses
	if raw, ok := members["instructions"]; create && (!ok || string(raw) == "null") {
		return refuse("Instructions are required")
	}
	for _, name := range chatgptUnsupported {
		if _, ok := members[name]; ok {
			return refuse("Unsupported parameter: " + name)
		}
	}
	var items []inputItem
	if json.Unmarshal(req.Input, &items) == nil {
		for _, it := range items {
			if it.Role == "system" {
				return refuse("System messages are not allowed")
			}
		}
	}
	switch {
	case create && req.stores():
		return refuse("Store must be set to false")
	case create && !req.Stream:
		return refuse("Stream must be set to true")
	}
	return nil
}

// usageLimitReached is the backend's 429 body for a usage limit, which
// resets after reset (none said when it is 0).
func usageLimitReached(reset int64) []byte {
	b := []byte(`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus"`)
	if reset > 0 {
		b = append(b, `,"resets_in_seconds":`...)
		b = strconv.AppendInt(b, reset, 10)
	}
	return append(b, "}}"...)
}
