package config

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The bounds of the names an operator gives things, in the catalog and
// through the admin API alike.
const (
	// MaxID bounds a stable ID: IDs are parts of admin URLs, edge IDs and
	// store keys.
	MaxID = 128
	// MaxName bounds a key's name, text for people.
	MaxName = 256
	// MaxUser bounds an end user's name (a request's "user", an
	// entitlement's user): it is part of the limit-state keys of a key
	// with user_limits.
	MaxUser = 256
	// MaxLabels bounds the labels of one key, and MaxLabelValue a label's
	// value: labels are matched by selectors over every key.
	MaxLabels     = 64
	MaxLabelValue = 256
)

// CheckID returns what is wrong with a stable ID, or "": stable IDs
// (records' IDs, tenants, label names) appear in edge IDs
// ("credential/endpoint/model"), admin URLs, selectors and store keys, so
// they are at most MaxID bytes of letters, digits, '.', '_' and '-'. An
// empty one is the caller's to allow or refuse.
func CheckID(s string) string {
	if len(s) > MaxID {
		return fmt.Sprintf("is longer than %d bytes", MaxID)
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("%q may contain only letters, digits, '.', '_' and '-'", s)
		}
	}
	return ""
}

// CheckText returns what is wrong with a short text for people (a name,
// an end user), or "": longer than limit bytes, with control characters,
// or not valid UTF-8 (encoding/json reads invalid bytes as U+FFFD, which
// is refused too, so no two readers disagree on it).
func CheckText(s string, limit int) string {
	if len(s) > limit {
		return fmt.Sprintf("is longer than %d bytes", limit)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return "must be printable UTF-8 text, without control characters"
		}
	}
	return ""
}

// checkLabel returns what is wrong with a label, or "". Names are stable
// IDs, so that a selector can name them plainly; values are short text.
func checkLabel(name, value string) string {
	if name == "" {
		return "name required"
	}
	if msg := CheckID(name); msg != "" {
		return "name " + msg
	}
	if msg := CheckText(value, MaxLabelValue); msg != "" {
		return "value " + msg
	}
	return ""
}
