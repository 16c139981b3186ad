package admin

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/internal/jsonfield"
)

// spelledOnce applies to a body the rule the data plane applies to the
// fields it reads: a member fills a field only when spelled exactly as the
// field's name, and only once. encoding/json takes the last of repeated
// members and matches names ignoring case, so without it
// {"amount":"1","amount":"1000"} (or "Amount" after "amount") applied 1000
// while a reviewer, a proxy or any reader that takes the first member saw
// 1. t is the type the body decodes into. Inside a struct, a member whose
// key folds (jsonfield.FoldKey) to a field's name but is not that name is
// refused, as is a repeated one; inside a map or an opaque value (an
// interface, json.RawMessage, a type with its own decoding) only an exact
// repetition is. Syntax errors are left to the decoder, which reports them
// with their offset. depth is the value's nesting: a body nested deeper than
// maxDepth, which no admin body is, is refused before the walk's recursion
// can grow large.
func spelledOnce(dec *json.Decoder, t reflect.Type, at string, depth int) error {
	if depth > maxDepth {
		return invalid("invalid JSON body: nested deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	t = shape(t)
	if d == '[' {
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := spelledOnce(dec, elem, fmt.Sprintf("%s[%d]", at, i), depth+1); err != nil {
				return err
			}
		}
		_, _ = dec.Token() // ']'
		return nil
	}
	fields := fieldsOf(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var inner reflect.Type
		switch {
		case seen[key]:
			return ambiguous(at, key)
		case fields != nil:
			f, exact := fields[key]
			if !exact {
				if name, ok := fields.folded(key); ok {
					return ambiguous(at, name)
				}
			}
			inner = f
		case t != nil && t.Kind() == reflect.Map:
			inner = t.Elem()
		}
		seen[key] = true
		if err := spelledOnce(dec, inner, dotted(at, key), depth+1); err != nil {
			return err
		}
	}
	_, _ = dec.Token() // '}'
	return nil
}

// maxDepth bounds the nesting of an admin body.
const maxDepth = 32

// ambiguous is the data plane's message for a member that is repeated or
// not spelled exactly.
func ambiguous(at, name string) error {
	return invalid("invalid JSON body: %q must appear at most once, spelled exactly so (no other case or escapes)", dotted(at, name))
}

func dotted(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shape is the type whose members a JSON value fills: t without its
// pointers, or nil when encoding/json does not fill it member by member
// (an interface, or a type that decodes itself).
func shape(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if p := reflect.PointerTo(t); p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// structFields are the JSON names of a struct's fields, with their types.
type structFields map[string]reflect.Type

// fieldsOf returns the fields of struct t as encoding/json names them
// (an embedded struct without a name lends its own), or nil for a type
// that is not a struct.
func fieldsOf(t reflect.Type) structFields {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	out := structFields{}
	for _, f := range reflect.VisibleFields(t) {
		if len(f.Index) > 1 && !embeddedPath(t, f.Index) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case f.Anonymous && name == "" && shape(f.Type) != nil && shape(f.Type).Kind() == reflect.Struct:
			continue // its fields are listed on their own
		case name == "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// embeddedPath reports whether every struct on the way to the field at
// index is embedded without a JSON name, so encoding/json promotes it.
func embeddedPath(t reflect.Type, index []int) bool {
	for _, i := range index[:len(index)-1] {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); !f.Anonymous || name != "" {
			return false
		}
		t = shape(f.Type)
		if t == nil {
			return false
		}
	}
	return true
}

// folded returns the name of the field key would fill by encoding/json's
// lenient matching, or by any other reader's (jsonfield.FoldKey).
func (fs structFields) folded(key string) (string, bool) {
	k := jsonfield.FoldKey([]byte(key))
	for name := range fs {
		if jsonfield.FoldKey([]byte(name)) == k {
			return name, true
		}
	}
	return "", false
}
