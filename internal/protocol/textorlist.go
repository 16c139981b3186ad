package protocol

import (
	"bytes"
	"encoding/json"
)

// MarshalTextOr writes list when it is not nil, else text: the JSON of a
// field a protocol lets be either a string or a list (a message's content,
// a Responses input).
func MarshalTextOr[T any](text string, list []T) ([]byte, error) {
	if list != nil {
		return json.Marshal(list)
	}
	return json.Marshal(text)
}

// UnmarshalTextOr reads such a field: a string into text, anything else
// into list.
func UnmarshalTextOr[T any](b []byte, text *string, list *[]T) error {
	if bytes.HasPrefix(b, []byte(`"`)) {
		return json.Unmarshal(b, text)
	}
	return json.Unmarshal(b, list)
}
