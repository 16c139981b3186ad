package respcache

import (
	"bytes"
	"errors"
	"slices"
)

// errSyntax is canonical's error for a body that is not one JSON value.
var errSyntax = errors.New("respcache: the body is not valid JSON")

// canon writes the canonical form of a request body: no whitespace, every
// object's members sorted by their names as written, strings and numbers
// as written, the ignored members of the top-level object left out. top
// sees each top-level member kept, its name unquoted and its value
// canonical.
type canon struct {
	out []byte
	top func(name, value []byte)
}

// value appends the canonical form of the JSON value v starts with (after
// any whitespace) and returns what follows it in v.
func (c *canon) value(v []byte, depth int) ([]byte, error) {
	v = skipSpace(v)
	if len(v) == 0 {
		return nil, errSyntax
	}
	switch v[0] {
	case '{':
		return c.object(v[1:], depth)
	case '[':
		c.out = append(c.out, '[')
		v = skipSpace(v[1:])
		if len(v) > 0 && v[0] == ']' {
			c.out = append(c.out, ']')
			return v[1:], nil
		}
		for {
			var err error
			if v, err = c.value(v, depth+1); err != nil {
				return nil, err
			}
			v = skipSpace(v)
			switch {
			case len(v) == 0:
				return nil, errSyntax
			case v[0] == ',':
				c.out, v = append(c.out, ','), v[1:]
			case v[0] == ']':
				c.out = append(c.out, ']')
				return v[1:], nil
			default:
				return nil, errSyntax
			}
		}
	case '"':
		n := stringLen(v)
		if n == 0 {
			return nil, errSyntax
		}
		c.out = append(c.out, v[:n]...)
		return v[n:], nil
	}
	n := literalLen(v)
	if n == 0 {
		return nil, errSyntax
	}
	c.out = append(c.out, v[:n]...)
	return v[n:], nil
}

// member is an object member as written to canon.out: its quoted name,
// then its canonical value, by offsets.
type member struct{ name, value, end int }

// object writes the members of the object v is the inside of, each as it
// comes, then rewrites them sorted.
func (c *canon) object(v []byte, depth int) ([]byte, error) {
	start := len(c.out)
	var members []member
	v = skipSpace(v)
	if len(v) > 0 && v[0] == '}' {
		c.out = append(c.out, '{', '}')
		return v[1:], nil
	}
	for {
		v = skipSpace(v)
		n := 0
		if len(v) > 0 && v[0] == '"' {
			n = stringLen(v)
		}
		if n == 0 {
			return nil, errSyntax
		}
		name := v[:n]
		v = skipSpace(v[n:])
		if len(v) == 0 || v[0] != ':' {
			return nil, errSyntax
		}
		m := member{name: len(c.out)}
		c.out = append(c.out, name...)
		m.value = len(c.out)
		var err error
		if v, err = c.value(v[1:], depth+1); err != nil {
			return nil, err
		}
		m.end = len(c.out)
		if depth == 0 && isIgnored(name[1:n-1]) {
			c.out = c.out[:m.name]
		} else {
			members = append(members, m)
		}
		v = skipSpace(v)
		if len(v) == 0 || (v[0] != '}' && v[0] != ',') {
			return nil, errSyntax
		}
		if v[0] == '}' {
			v = v[1:]
			break
		}
		v = v[1:]
	}
	written := bytes.Clone(c.out[start:])
	name := func(m member) []byte { return written[m.name-start : m.value-start] }
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(name(a), name(b)) }) // stable: of duplicate names, the last stays last
	c.out = append(c.out[:start], '{')
	for i, m := range members {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(append(c.out, name(m)...), ':')
		c.out = append(c.out, written[m.value-start:m.end-start]...)
		if depth == 0 && c.top != nil {
			nm := name(m)
			c.top(nm[1:len(nm)-1], written[m.value-start:m.end-start])
		}
	}
	c.out = append(c.out, '}')
	return v, nil
}

func isIgnored(name []byte) bool {
	for _, n := range ignored {
		if string(name) == n {
			return true
		}
	}
	return false
}

func skipSpace(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t' || v[0] == '\n' || v[0] == '\r') {
		v = v[1:]
	}
	return v
}

// stringLen is the length of the string v starts with, quotes included;
// 0 when it does not end.
func stringLen(v []byte) int {
	for i := 1; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return 0
}

// literalLen is the length of the JSON number, true, false or null v
// starts with; 0 when it starts with none.
func literalLen(v []byte) int {
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(v, []byte(lit)) {
			return len(lit)
		}
	}
	i := 0
	digits := func() int {
		n := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case digits() == 0:
		return 0
	}
	if i < len(v) && v[i] == '.' {
		i++
		if digits() == 0 {
			return 0
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0
		}
	}
	return i
}

// isZero reports whether the canonical value v is a number equal to 0.
func isZero(v []byte) bool {
	v = bytes.TrimPrefix(v, []byte("-"))
	if len(v) == 0 || v[0] != '0' {
		return false
	}
	for _, c := range v {
		switch c {
		case '0', '.':
		case 'e', 'E':
			return true
		default:
			return false
		}
	}
	return true
}

// memberOf returns the value of the member name in the canonical object
// obj; nil when it has none.
func memberOf(obj []byte, name string) []byte {
	if len(obj) < 2 || obj[0] != '{' {
		return nil
	}
	v := obj[1:]
	for len(v) > 0 && v[0] == '"' {
		n := stringLen(v)
		if n == 0 || n >= len(v) {
			return nil
		}
		key := v[1 : n-1]
		v = v[n+1:] // the name and its colon
		end := valueEnd(v)
		if string(key) == name {
			return v[:end]
		}
		if end >= len(v) {
			return nil
		}
		v = v[end+1:] // the value and its comma
	}
	return nil
}

// valueEnd is the length of the canonical value v starts with.
func valueEnd(v []byte) int {
	depth := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			i += stringLen(v[i:]) - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return len(v)
}
