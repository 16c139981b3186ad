package validate

import (
	"bytes"
	"fmt"
	"strings"
)

// ReasonImage labels a request with an image for an alias none of whose
// deployments (for the caller's protocol) take images; it is judged at
// routing, where the deployments are known, from the Image Scan found.
const ReasonImage = "image_input"

// Image is where a request's first image part is, as Scan found it: a
// chat image_url part, a Responses input_image, a Messages image block
// (also inside a tool_result), a Gemini inlineData or fileData part with
// an image MIME type (also inside a functionResponse). The zero Image is
// none. Its path is built only when asked (Field), so finding one does
// not allocate.
type Image struct {
	path string // the format of its path, one %d per index; "" = none
	at   [3]int
}

// Found reports whether the request has an image part.
func (im Image) Found() bool { return im.path != "" }

// Field is the path of the image part (messages[1].content[0]).
func (im Image) Field() string {
	args := make([]any, strings.Count(im.path, "%d"))
	for i := range args {
		args[i] = im.at[i]
	}
	return fmt.Sprintf(im.path, args...)
}

// Refusal is the refusal of the request for model, whose deployments take
// no images.
func (im Image) Refusal(model string) *Refusal {
	return refuse(ReasonImage, im.Field(), "is an image, and no deployment of model %s takes images", model)
}

// images is one check's search for image parts, the first found; a nil
// *images (Request's) is not looking.
type images struct{ first Image }

// seeking reports whether the search still needs an image.
func (s *images) seeking() bool { return s != nil && s.first.path == "" }

// note records the image part at path (see Image) with the indices at
// (as many as path has), unless one was found before.
func (s *images) note(path string, at [3]int) {
	if s.seeking() {
		s.first = Image{path: path, at: at}
	}
}

// exactly reports whether raw, a JSON value, is the string s written
// without escapes: the image checks act on a match, so, unlike is, they
// take an escaped string for no match and leave it to the upstream.
func exactly(raw []byte, s string) bool {
	return len(raw) == len(s)+2 && raw[0] == '"' && raw[len(raw)-1] == '"' && string(raw[1:len(raw)-1]) == s
}

// imageMIME reports whether raw, a JSON string, is an image/* MIME type
// (ASCII case aside, as MIME types compare).
func imageMIME(raw []byte) bool {
	const prefix = `"image/`
	return len(raw) > len(prefix) && bytes.EqualFold(raw[:len(prefix)], []byte(prefix))
}

// typedParts notes the first element of parts (a JSON array of content
// parts) whose "type" is kind, at path, whose indices are outer's and
// then the part's.
func (s *images) typedParts(parts []byte, kind, path string, outer ...int) {
	if !s.seeking() {
		return
	}
	_ = each(parts, func(j int, part []byte) *Refusal {
		if exactly(member(part, "type"), kind) {
			var at [3]int
			copy(at[:], outer)
			at[len(outer)] = j
			s.note(path, at)
		}
		return nil
	})
}
