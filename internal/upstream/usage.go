package upstream

import (
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

// answerFields are the top-level members Sluice reads of an answer
// (OpenAI's, or Anthropic's, whose "usage" is top-level too) or an OpenAI
// stream chunk, as raw values: nil when absent, the last one when
// repeated (as encoding/json reads a repeated key).
type answerFields struct {
	usage, choices []byte
	// id, object and store name a stored Responses response (storedID).
	id, object, store []byte
}

// readAnswer checks that obj is one well-formed JSON object and picks the
// members Sluice reads, in one pass that does not allocate. ok is false
// for anything else: an upstream that answers a JSON route with something
// that is not a JSON object (an HTML page, a cut chunk) has failed. Keys
// are matched as written ("usage", not "Usage" or an escaped spelling that
// encoding/json would also take): upstreams write them plainly.
func readAnswer(obj []byte) (f answerFields, ok bool) {
	err := jsonfield.Members(obj, func(key, value []byte) error {
		switch string(key) {
		case "usage", gemini.UsageKey:
			f.usage = value
		case "choices":
			f.choices = value
		case "id":
			f.id = value
		case "object":
			f.object = value
		case "store":
			f.store = value
		}
		return nil
	})
	return f, err == nil
}
