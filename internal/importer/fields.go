package importer

import (
	"fmt"
	"iter"
	"math"
	"sort"
	"strconv"
)

// object is a mapping of the source being read. It remembers which fields
// were taken, so that whatever the importer did not read is reported as
// not mapped instead of silently dropped. A field set to null counts as
// absent.
//
// Its readers keep the first error, as bufio.Scanner does: once a read
// has failed, later reads return zero values, of the object and of every
// object read from it or from the same parent (they share the error). So
// a function reads what it needs and checks err once where it ends, or
// sooner where a value it read decides that it returns: early, or with an
// error of its own.
type object struct {
	path   string
	fields map[string]any
	taken  map[string]bool
	failed *error // the first failed read's error, shared with related objects
}

func asObject(path string, v any) (*object, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be a mapping", path)
	}
	return &object{path: path, fields: m, taken: map[string]bool{}, failed: new(error)}, nil
}

// err is the first failed read's error, of o or of an object sharing it.
func (o *object) err() error { return *o.failed }

// fail records an error unless a read has failed already.
func (o *object) fail(format string, args ...any) {
	if *o.failed == nil {
		*o.failed = fmt.Errorf(format, args...)
	}
}

func (o *object) at(name string) string {
	if o.path == "" {
		return name
	}
	return o.path + "." + name
}

// take returns a field's value and marks it read; nil when absent or null,
// and once a read has failed.
func (o *object) take(name string) any {
	o.taken[name] = true
	if o.err() != nil {
		return nil
	}
	return o.fields[name]
}

func (o *object) has(name string) bool { return o.fields[name] != nil }

func (o *object) str(name string) string {
	switch v := o.take(name).(type) {
	case nil:
	case string:
		return v
	default:
		o.fail("%s: must be a string", o.at(name))
	}
	return ""
}

// required reads a string that must be given.
func (o *object) required(name string) string {
	s := o.str(name)
	if s == "" {
		o.fail("%s: is required", o.at(name))
	}
	return s
}

// number reads a number that may be written as a string ("100"), as
// LiteLLM's JSON and YAML both allow, and whether it was given.
func (o *object) number(name string) (float64, bool) {
	switch v := o.take(name).(type) {
	case nil:
		return 0, false
	case int:
		return float64(v), true
	case float64:
		return v, true
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err == nil {
			return f, true
		}
	}
	o.fail("%s: must be a number", o.at(name))
	return 0, false
}

func (o *object) count(name string) int {
	f, _ := o.number(name)
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		o.fail("%s: must be a whole number ≥ 0", o.at(name))
		return 0
	}
	return int(f)
}

// child is the object of fields at path, read from o: it shares o's error.
func (o *object) child(path string, fields map[string]any) *object {
	return &object{path: path, fields: fields, taken: map[string]bool{}, failed: o.failed}
}

// object reads a mapping, empty when absent.
func (o *object) object(name string) *object {
	switch v := o.take(name).(type) {
	case nil:
	case map[string]any:
		return o.child(o.at(name), v)
	default:
		o.fail("%s: must be a mapping", o.at(name))
	}
	return o.child(o.at(name), map[string]any{})
}

// objects reads a list of mappings and yields them one by one, with their
// index. It stops at the first failed read: of the list, of an item that
// is not a mapping, or of one of o's or the items' fields since.
func (o *object) objects(name string) iter.Seq2[int, *object] {
	list := o.list(name)
	return func(yield func(int, *object) bool) {
		for i, v := range list {
			path := fmt.Sprintf("%s[%d]", o.at(name), i)
			fields, ok := v.(map[string]any)
			if !ok {
				o.fail("%s: must be a mapping", path)
			}
			if o.err() != nil || !yield(i, o.child(path, fields)) {
				return
			}
		}
	}
}

func (o *object) list(name string) []any {
	switch v := o.take(name).(type) {
	case nil:
	case []any:
		return v
	default:
		o.fail("%s: must be a list", o.at(name))
	}
	return nil
}

func (o *object) strings(name string) []string {
	items := o.list(name)
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			o.fail("%s[%d]: must be a string", o.at(name), i)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// rest reports every field not read as not mapped, with reason (or, for
// the fields named in reasons, their own).
func (o *object) rest(r *Report, reason string, reasons map[string]string) {
	var names []string
	for name, v := range o.fields {
		if !o.taken[name] && v != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		why := reasons[name]
		if why == "" {
			why = reason
		}
		r.notMapped(o.at(name), "%s", why)
	}
}
