package jsonfield

import (
	"bytes"
	"errors"
	"math"
	"unicode/utf8"
)

// ErrInvalid is returned by Members for input that is not exactly one
// well-formed JSON value, or nests deeper than maxDepth.
var ErrInvalid = errors.New("jsonfield: not valid JSON")

// maxDepth bounds the nesting Members checks. It is far below
// encoding/json's 10,000 so the recursion stays small; callers treat an
// error as "decode this body the slow way", which then gives the exact answer.
const maxDepth = 256

// Members checks that obj is exactly one well-formed JSON value, by the
// grammar encoding/json accepts (RFC 8259; invalid UTF-8 inside strings is
// allowed), and calls each with the key and raw value of every member of it
// at the top level, in order. key is the key's bytes between its quotes,
// escapes not undone (see PlainKey). It returns ErrNotObject when obj is a
// valid value but not an object, ErrInvalid when obj is not valid JSON, or
// the first error each returns; each may have been called for earlier
// members when an error is returned. It does not allocate.
func Members(obj []byte, each func(key, value []byte) error) error {
	i := skipSpace(obj, 0)
	if i < len(obj) && obj[i] != '{' {
		if end, err := validValue(obj, i, 0); err != nil || skipSpace(obj, end) != len(obj) {
			return ErrInvalid
		}
		return ErrNotObject
	}
	if i >= len(obj) {
		return ErrInvalid
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return trailing(obj, i+1)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return ErrInvalid
		}
		kStart := i
		kEnd, err := validString(obj, kStart)
		if err != nil {
			return err
		}
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return ErrInvalid
		}
		vStart := skipSpace(obj, i+1)
		vEnd, err := validValue(obj, vStart, 1)
		if err != nil {
			return err
		}
		if err := each(obj[kStart+1:kEnd-1], obj[vStart:vEnd]); err != nil {
			return err
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) {
			return ErrInvalid
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return trailing(obj, i+1)
		default:
			return ErrInvalid
		}
	}
}

// trailing checks that only white space follows the value ending at i.
func trailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return ErrInvalid
	}
	return nil
}

// validValue returns the index just past the well-formed value starting at
// b[i], at nesting depth.
func validValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, ErrInvalid
	}
	switch c := b[i]; {
	case c == '"':
		return validString(b, i)
	case c == '{' || c == '[':
		return validContainer(b, i, depth+1)
	case c == '-' || '0' <= c && c <= '9':
		return validNumber(b, i)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	}
	return 0, ErrInvalid
}

func literal(b []byte, i int, word string) (int, error) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return 0, ErrInvalid
	}
	return i + len(word), nil
}

// validContainer returns the index just past the object or array starting
// at b[i], which is at nesting depth.
func validContainer(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, ErrInvalid
	}
	object, closing := b[i] == '{', byte(']')
	if object {
		closing = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, nil
	}
	for {
		var err error
		if object {
			if i >= len(b) || b[i] != '"' {
				return 0, ErrInvalid
			}
			if i, err = validString(b, i); err != nil {
				return 0, err
			}
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return 0, ErrInvalid
			}
			i = skipSpace(b, i+1)
		}
		if i, err = validValue(b, i, depth); err != nil {
			return 0, err
		}
		if i = skipSpace(b, i); i >= len(b) {
			return 0, ErrInvalid
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case closing:
			return i + 1, nil
		default:
			return 0, ErrInvalid
		}
	}
}

// validString returns the index just past the string starting at
// b[i] == '"': no control characters, only JSON's escapes.
func validString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, nil
		case c < 0x20:
			return 0, ErrInvalid
		case c == '\\':
			if j+1 >= len(b) {
				return 0, ErrInvalid
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+6 > len(b) {
					return 0, ErrInvalid
				}
				for _, h := range b[j+2 : j+6] {
					if !isHex(h) {
						return 0, ErrInvalid
					}
				}
				j += 5
			default:
				return 0, ErrInvalid
			}
		}
	}
	return 0, ErrInvalid
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validNumber returns the index just past the number starting at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, ErrInvalid
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, ErrInvalid
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, ErrInvalid
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// PlainKey reports whether a key as Members passes it means just its
// bytes to encoding/json's field matching, which ignores case by Unicode
// folding: it has no escapes, no upper case and only ASCII. A plain key
// matches a lower-case ASCII field name exactly when it equals it; any other
// key may match one it does not equal ("Model", "mod\u0065l", "ſtream").
func PlainKey(key []byte) bool {
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// ErrNotPlain is returned by the Decode functions for a value they leave
// to encoding/json: one of another type, or one that needs more decoding
// than they do (escapes, invalid UTF-8, a fraction); and by PlainMembers
// for a key that is not plain.
var ErrNotPlain = errors.New("jsonfield: value left to encoding/json")

// PlainMembers is Members for a decoder that reads fields by lower-case
// ASCII names, as the Decode functions do values: it stops with ErrNotPlain
// at a key that is not plain (see PlainKey), which encoding/json might match
// to a field without being equal to it.
func PlainMembers(obj []byte, fn func(key, value []byte) error) error {
	return Members(obj, func(key, value []byte) error {
		if !PlainKey(key) {
			return ErrNotPlain
		}
		return fn(key, value)
	})
}

// The Decode functions set *dst from a value as Members passes it, exactly
// as encoding/json decodes it into a field of that type, for the values
// they handle, and return ErrNotPlain for the others. null leaves *dst as it
// was, as it does for encoding/json.

// DecodeString handles a string without escapes, in valid UTF-8.
func DecodeString(dst *string, value []byte) error {
	if string(value) == "null" {
		return nil
	}
	if len(value) < 2 || value[0] != '"' {
		return ErrNotPlain
	}
	raw := value[1 : len(value)-1]
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return ErrNotPlain
	}
	*dst = string(raw)
	return nil
}

// DecodeBool handles true and false.
func DecodeBool(dst *bool, value []byte) error {
	switch string(value) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return ErrNotPlain
	}
	return nil
}

// DecodeInt handles an integer literal (no fraction or exponent) within
// int64, which is what encoding/json (strconv.ParseInt) takes for an int64.
func DecodeInt(dst *int64, value []byte) error {
	if string(value) == "null" {
		return nil
	}
	neg := len(value) > 0 && value[0] == '-'
	digits := value
	if neg {
		digits = value[1:]
	}
	// 19 digits always fit in a uint64; a JSON integer of 20 or more digits
	// has no leading zeros, so it is out of range.
	if len(digits) == 0 || len(digits) > 19 {
		return ErrNotPlain
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return ErrNotPlain
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u <= math.MaxInt64:
		*dst = int64(u)
	case neg && u <= -math.MinInt64:
		*dst = -int64(u)
	default:
		return ErrNotPlain
	}
	return nil
}
