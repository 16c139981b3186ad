package validate

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/jsonfield"
)

// generate checks a Gemini generateContent request (or a countTokens one,
// whose generateContentRequest holds it): contents a non-empty array of
// objects whose role, if any, is user, model or function; a
// functionResponse part after some functionCall part (Gemini pairs them
// by position, and its documentation does not say it refuses a name
// that differs, so names are not compared); each function declaration's parameters (or
// parametersJsonSchema) a JSON object. Google's reader takes member names
// in lowerCamelCase or snake_case alike, and so does this check. It notes
// inlineData and fileData parts of an image MIME type (also among a
// functionResponse's parts) in found.
func generate(body []byte, found *images) *Refusal {
	var contents, tools, inner []byte
	_ = jsonfield.Fields(body, func(k, v []byte) error {
		switch {
		case googleName(k, "contents"):
			contents = v
		case googleName(k, "tools"):
			tools = v
		case googleName(k, "generatecontentrequest"):
			inner = v
		}
		return nil
	})
	if contents == nil && isObject(inner) {
		return generate(inner, found)
	}
	if !isArray(contents) || empty(contents) {
		return refuse(ReasonEmpty, "contents", "must be a non-empty array of contents")
	}
	if r := each(contents, func(i int, c []byte) *Refusal { return generateContent(contents, i, c, found) }); r != nil {
		return r
	}
	return each(tools, func(i int, t []byte) *Refusal {
		return each(googleMember(t, "functiondeclarations"), func(j int, d []byte) *Refusal {
			var r *Refusal
			_ = jsonfield.Fields(d, func(k, v []byte) error {
				if !googleName(k, "parameters") && !googleName(k, "parametersjsonschema") {
					return nil
				}
				if fault := schema(v, false); fault == schemaNotObject && r == nil {
					r = fault.refusal(fmt.Sprintf("tools[%d].functionDeclarations[%d].%s", i, j, k))
				}
				return nil
			})
			return r
		})
	})
}

// generateContent checks c, the content at index i of contents.
func generateContent(contents []byte, i int, c []byte, found *images) *Refusal {
	if !isObject(c) {
		return refuse(ReasonShape, fmt.Sprintf("contents[%d]", i), "must be an object")
	}
	var role, parts []byte
	_ = jsonfield.Fields(c, func(k, v []byte) error {
		switch {
		case googleName(k, "role"):
			role = v
		case googleName(k, "parts"):
			parts = v
		}
		return nil
	})
	if role != nil && !oneOf(role, "user", "model", "function") {
		return refuse(ReasonRole, fmt.Sprintf("contents[%d].role", i), "must be user or model")
	}
	return each(parts, func(j int, part []byte) *Refusal {
		response := googleMember(part, "functionresponse")
		if imagePart(part, found) {
			found.note("contents[%d].parts[%d]", [3]int{i, j})
		}
		if response == nil {
			return nil
		}
		if found.seeking() {
			_ = each(googleMember(response, "parts"), func(k int, p []byte) *Refusal {
				if imagePart(p, found) {
					found.note("contents[%d].parts[%d].functionResponse.parts[%d]", [3]int{i, j, k})
				}
				return nil
			})
		}
		called := anyBefore(contents, i, func(prev []byte) bool {
			return anyBefore(googleMember(prev, "parts"), -1, func(p []byte) bool {
				return googleMember(p, "functioncall") != nil
			})
		})
		if !called {
			return refuse(ReasonToolResult, fmt.Sprintf("contents[%d].parts[%d].functionResponse", i, j), "answers no functionCall: no earlier content has one")
		}
		return nil
	})
}

// imagePart reports whether part, a Gemini part, carries an image
// (inlineData or fileData whose mimeType is image/*), when found is
// looking for one. A fileData without a mimeType is not judged.
func imagePart(part []byte, found *images) bool {
	if !found.seeking() {
		return false
	}
	image := false
	_ = jsonfield.Fields(part, func(k, v []byte) error {
		if googleName(k, "inlinedata") || googleName(k, "filedata") {
			image = image || imageMIME(googleMember(v, "mimetype"))
		}
		return nil
	})
	return image
}

// googleName reports whether key, a raw member name, is name (lower case,
// no underscores) as Google's reader matches it: ASCII case aside and
// underscores dropped, so functionCall and function_call both match.
// A key with escapes or non-ASCII bytes matches nothing.
func googleName(key []byte, name string) bool {
	n := 0
	for _, c := range key {
		switch {
		case c == '_':
			continue
		case n == len(name):
			return false
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if c != name[n] {
			return false
		}
		n++
	}
	return n == len(name)
}

// googleMember is member for a name Google's reader matches (googleName).
func googleMember(obj []byte, name string) []byte {
	var found []byte
	_ = jsonfield.Fields(obj, func(k, v []byte) error {
		if googleName(k, name) {
			found = v
		}
		return nil
	})
	return found
}
