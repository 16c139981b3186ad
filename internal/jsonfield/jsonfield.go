// Package jsonfield finds and replaces the value of a top-level field in a
// JSON object without decoding the rest, so the gateway can rewrite a model
// name or add a stream option while keeping every other byte of the caller's
// body. Members reads an object's top-level fields in one pass that also
// validates all of it, and the Decode functions decode plain values exactly
// as encoding/json does, so the request path reads the few fields it needs
// without reflection. It depends only on the standard library.
package jsonfield

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// ErrNotObject is returned for input that is not a well-formed JSON object.
var ErrNotObject = errors.New("jsonfield: not a JSON object")

// Find returns the byte span [start, end) of the value of the top-level field
// key in obj. ok is false when the field is absent. When the key occurs more
// than once, the last occurrence wins, as it does for encoding/json (the
// ingress refuses such bodies, so the field the gateway rewrites is the one
// every upstream parser reads). It does not allocate for keys without
// escapes.
func Find(obj []byte, key string) (start, end int, ok bool, err error) {
	start, end = -1, -1
	err = walk(obj, func(kStart, kEnd, vStart, vEnd int) error {
		if keyEquals(obj[kStart:kEnd], key) {
			start, end = vStart, vEnd
		}
		return nil
	})
	if err != nil {
		return 0, 0, false, err
	}
	return start, end, start >= 0, nil
}

// Fields calls each with the key and raw value of every top-level member of
// obj, in order, as Members does, for input already known to be valid JSON:
// it skips values by their quotes and brackets without checking them, so it
// has no nesting limit. It returns ErrNotObject when obj is not an object,
// or the first error each returns. It does not allocate.
func Fields(obj []byte, each func(key, value []byte) error) error {
	return walk(obj, func(kStart, kEnd, vStart, vEnd int) error {
		return each(obj[kStart+1:kEnd-1], obj[vStart:vEnd])
	})
}

// walk calls each with the spans of every top-level member's quoted key
// and value in obj.
func walk(obj []byte, each func(kStart, kEnd, vStart, vEnd int) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrNotObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		if obj[i] != '"' {
			return ErrNotObject
		}
		kEnd, err := skipString(obj, i)
		if err != nil {
			return err
		}
		kStart := i
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return ErrNotObject
		}
		i = skipSpace(obj, i+1)
		vEnd, err := skipValue(obj, i)
		if err != nil {
			return err
		}
		if err := each(kStart, kEnd, i, vEnd); err != nil {
			return err
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) {
			break
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return nil
		default:
			return ErrNotObject
		}
	}
	return ErrNotObject
}

// Set returns obj with the top-level field key set to the raw JSON value.
// An existing value is replaced in place; a missing field is added first in
// the object. obj is not modified.
func Set(obj []byte, key string, value []byte) ([]byte, error) {
	start, end, ok, err := Find(obj, key)
	if err != nil {
		return nil, err
	}
	if ok {
		out := make([]byte, 0, len(obj)-(end-start)+len(value))
		out = append(out, obj[:start]...)
		out = append(out, value...)
		return append(out, obj[end:]...), nil
	}
	open := skipSpace(obj, 0) + 1
	rest := skipSpace(obj, open)
	quoted := strconv.Quote(key)
	out := make([]byte, 0, len(obj)+len(quoted)+len(value)+2)
	out = append(out, obj[:open]...)
	out = append(out, quoted...)
	out = append(out, ':')
	out = append(out, value...)
	if obj[rest] != '}' {
		out = append(out, ',')
	}
	return append(out, obj[open:]...), nil
}

// SetString is Set with a JSON string value, encoded as encoding/json
// encodes it.
func SetString(obj []byte, key, value string) ([]byte, error) {
	var buf [64]byte // enough for a model name: the value stays off the heap
	return Set(obj, key, appendQuoted(buf[:0], value))
}

// appendQuoted appends s encoded as a JSON string. A model name needs no
// escapes and is copied as it is; anything else goes through encoding/json,
// which also escapes <, > and & and replaces invalid UTF-8.
func appendQuoted(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			v, _ := json.Marshal(s) // a string always marshals
			return append(dst, v...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func keyEquals(quoted []byte, key string) bool {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == key
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == key
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, ErrNotObject
}

// skipValue returns the index just past the value starting at b[i]. Nested
// containers are skipped by bracket depth, strings by their quotes; the
// contents of scalars are not validated (the body was validated at ingress).
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, ErrNotObject
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, ErrNotObject
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return 0, ErrNotObject
		}
		return j, nil
	}
}

// errStop ends a walk early.
var errStop = errors.New("stop")

// Delete returns obj without its top-level field key (every occurrence),
// the member's comma and the white space around it going with it; obj
// itself when the field is absent. obj is not modified.
func Delete(obj []byte, key string) ([]byte, error) {
	for {
		from, to, prevEnd, first := -1, -1, -1, false
		err := walk(obj, func(kStart, kEnd, vStart, vEnd int) error {
			switch {
			case first:
				to = kStart // the first member goes up to the next one's key
				return errStop
			case keyEquals(obj[kStart:kEnd], key) && prevEnd >= 0:
				from, to = prevEnd, vEnd // from the previous value's end: its comma goes
				return errStop
			case keyEquals(obj[kStart:kEnd], key):
				from, to, first = kStart, vEnd, true
			}
			prevEnd = vEnd
			return nil
		})
		if err != nil && err != errStop {
			return nil, err
		}
		if from < 0 {
			return obj, nil
		}
		out := make([]byte, 0, len(obj)-(to-from))
		out = append(out, obj[:from]...)
		obj = append(out, obj[to:]...)
	}
}
