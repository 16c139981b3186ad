// Package jsonvalid checks that bytes are one JSON object, whole or as it
// arrives in pieces. Sluice relays what an upstream streams, and a caller's
// SDK parses each event's data, and the fragments of a tool call's
// arguments once joined, as JSON: bytes that are not would fail it with a
// parse error instead of the protocol's error event. An Object is read one
// piece at a time without holding any (a streamed tool call may be long),
// fails at the first byte that no JSON object could have there (so a
// fragment that would make the joined text invalid is never passed on), and
// does not allocate, which lets it check every relayed event.
//
// It checks what RFC 8259 asks of the syntax, as encoding/json does: a
// string's bytes are not checked to be UTF-8 (readers replace what is not),
// and nesting is bounded (MaxDepth) where a parser's recursion would be.
package jsonvalid

import "errors"

// MaxDepth is the deepest nesting of objects and arrays an Object takes.
// The SDKs' parsers recurse per level (Python's stops near a thousand), so
// deeper JSON is what a caller could not read anyway.
const MaxDepth = 512

// Errors an Object reports.
var (
	ErrSyntax     = errors.New("not a JSON object")
	ErrIncomplete = errors.New("JSON object is not complete")
	ErrTooDeep    = errors.New("JSON nests too deep")
)

// state is what an Object expects next.
type state uint8

const (
	sTop          state = iota // white space, then the opening '{'
	sKeyOrClose                // after '{': a key or '}'
	sKey                       // after ',' in an object: a key
	sColon                     // after a key
	sValue                     // after ':' or ',' in an array
	sValueOrClose              // after '[': a value or ']'
	sNext                      // after a value in a container: ',' or its close
	sEnd                       // after the whole object: white space only
	sString                    // in a string (a key or a value)
	sEscape                    // after a backslash in a string
	sHex                       // in the four digits of \u
	sLiteral                   // in true, false or null
	sMinus                     // after a number's '-'
	sZero                      // after a number's leading 0
	sInt                       // in a number's integer digits
	sDot                       // after the '.'
	sFrac                      // in the fraction's digits
	sExp                       // after 'e'
	sExpSign                   // after the exponent's sign
	sExpDigits                 // in the exponent's digits
)

// Object checks bytes written to it, in any number of pieces, to be one
// JSON object, white space around it aside. Its zero value is ready; it
// is not safe for concurrent use.
type Object struct {
	state   state
	key     bool   // the string being read is a key
	hex     uint8  // \u digits still to come
	literal string // the rest of the literal being read
	depth   int
	arrays  [MaxDepth / 64]uint64 // bit d: the container at depth d is an array
	err     error
}

// Valid reports whether b is one JSON object, white space around it aside.
func Valid(b []byte) bool {
	var o Object
	return o.Write(b) == nil && o.End() == nil
}

// Started reports whether any byte but white space has been written.
func (o *Object) Started() bool { return o.state != sTop || o.err != nil }

// Write reads the next piece, and returns an error (the same from then
// on) at the first byte that no JSON object could have after what came
// before. The state is kept in a local variable while it reads, where the
// compiler can hold it in a register.
func (o *Object) Write(p []byte) error {
	if o.err != nil {
		return o.err
	}
	st := o.state
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch st {
		case sString:
			// Most bytes of most JSON are inside strings: skip them a
			// run at a time.
			for i < len(p) && plain[p[i]] {
				i++
			}
			if i == len(p) {
				o.state = st
				return nil
			}
			switch c = p[i]; {
			case c == '"':
				if o.key {
					st = sColon
				} else {
					st = o.valueEnded()
				}
			case c == '\\':
				st = sEscape
			default: // a control character
				return o.fail(ErrSyntax)
			}
		case sEscape:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				st = sString
			case 'u':
				st, o.hex = sHex, 4
			default:
				return o.fail(ErrSyntax)
			}
		case sHex:
			if !isHex(c) {
				return o.fail(ErrSyntax)
			}
			if o.hex--; o.hex == 0 {
				st = sString
			}
		case sLiteral:
			if c != o.literal[0] {
				return o.fail(ErrSyntax)
			}
			if o.literal = o.literal[1:]; o.literal == "" {
				st = o.valueEnded()
			}
		case sMinus, sZero, sInt, sDot, sFrac, sExp, sExpSign, sExpDigits:
			if next, ok := number(st, c); ok {
				st = next
				continue
			}
			if st == sMinus || st == sDot || st == sExp || st == sExpSign {
				return o.fail(ErrSyntax) // the number stops short
			}
			st = o.valueEnded()
			i-- // the byte after the number is read in the state after a value
		default:
			if isBlank(c) {
				continue
			}
			var err error
			if st, err = o.structural(st, c); err != nil {
				return err
			}
		}
	}
	o.state = st
	return nil
}

// End reports whether what was written is one whole JSON object.
func (o *Object) End() error {
	if o.err != nil {
		return o.err
	}
	if o.state != sEnd {
		return ErrIncomplete
	}
	return nil
}

// structural returns the state after c, not white space, read in state
// st, where no string, literal or number is being read.
func (o *Object) structural(st state, c byte) (state, error) {
	switch st {
	case sTop:
		if c != '{' {
			return st, o.fail(ErrSyntax)
		}
		return o.open(false)
	case sKeyOrClose, sKey:
		switch {
		case c == '"':
			o.key = true
			return sString, nil
		case c == '}' && st == sKeyOrClose:
			return o.close(), nil
		}
	case sColon:
		if c == ':' {
			return sValue, nil
		}
	case sValue, sValueOrClose:
		if c == ']' && st == sValueOrClose {
			return o.close(), nil
		}
		return o.value(c)
	case sNext:
		inArray := o.inArray()
		switch {
		case c == ',' && inArray:
			return sValue, nil
		case c == ',':
			return sKey, nil
		case c == ']' && inArray, c == '}' && !inArray:
			return o.close(), nil
		}
	}
	return st, o.fail(ErrSyntax) // sEnd, or a byte out of place
}

// value returns the state after c, the first byte of a value.
func (o *Object) value(c byte) (state, error) {
	switch c {
	case '{':
		return o.open(false)
	case '[':
		return o.open(true)
	case '"':
		o.key = false
		return sString, nil
	case 't':
		o.literal = "rue"
		return sLiteral, nil
	case 'f':
		o.literal = "alse"
		return sLiteral, nil
	case 'n':
		o.literal = "ull"
		return sLiteral, nil
	case '-':
		return sMinus, nil
	case '0':
		return sZero, nil
	}
	if c < '1' || c > '9' {
		return sValue, o.fail(ErrSyntax)
	}
	return sInt, nil
}

// number returns the state after c in a number read in state st, or
// false when c ends it.
func number(st state, c byte) (state, bool) {
	digit := c >= '0' && c <= '9'
	switch st {
	case sMinus:
		if c == '0' {
			return sZero, true
		}
		return sInt, digit && c != '0'
	case sZero, sInt:
		switch {
		case digit && st == sInt:
			return sInt, true
		case c == '.':
			return sDot, true
		case c == 'e' || c == 'E':
			return sExp, true
		}
		return 0, false
	case sDot, sFrac:
		if digit {
			return sFrac, true
		}
		if st == sFrac && (c == 'e' || c == 'E') {
			return sExp, true
		}
		return 0, false
	case sExp:
		if c == '+' || c == '-' {
			return sExpSign, true
		}
		return sExpDigits, digit
	}
	return sExpDigits, digit // sExpSign, sExpDigits
}

// open starts an object or an array one level down.
func (o *Object) open(array bool) (state, error) {
	if o.depth == MaxDepth {
		return sTop, o.fail(ErrTooDeep)
	}
	word, bit := o.depth/64, uint64(1)<<(o.depth%64)
	o.depth++
	if array {
		o.arrays[word] |= bit
		return sValueOrClose, nil
	}
	o.arrays[word] &^= bit
	return sKeyOrClose, nil
}

// close ends the innermost container, itself a value.
func (o *Object) close() state {
	o.depth--
	return o.valueEnded()
}

// valueEnded is the state after a value: the next member or element, or
// the end after the outermost object.
func (o *Object) valueEnded() state {
	if o.depth == 0 {
		return sEnd
	}
	return sNext
}

// inArray reports whether the innermost open container is an array.
func (o *Object) inArray() bool {
	d := o.depth - 1
	return o.arrays[d/64]&(1<<(d%64)) != 0
}

func (o *Object) fail(err error) error {
	o.err = err
	return err
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// plain marks the bytes a string holds as they are: all but the quote,
// the backslash and the control characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
