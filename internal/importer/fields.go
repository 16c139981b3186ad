package importer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// object is a mapping of the source being read. It remembers which fields
// were taken, so that whatever the importer did not read is reported as
// not mapped instead of silently dropped. A field set to null counts as
// absent.
type object struct {
	path   string
	fields map[string]any
	taken  map[string]bool
}

func asObject(path string, v any) (*object, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be a mapping", path)
	}
	return &object{path: path, fields: m, taken: map[string]bool{}}, nil
}

func (o *object) at(name string) string {
	if o.path == "" {
		return name
	}
	return o.path + "." + name
}

// take returns a field's value and marks it read; nil when absent or null.
func (o *object) take(name string) any {
	o.taken[name] = true
	return o.fields[name]
}

func (o *object) has(name string) bool { return o.fields[name] != nil }

func (o *object) str(name string) (string, error) {
	switch v := o.take(name).(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", fmt.Errorf("%s: must be a string", o.at(name))
	}
}

// number reads a number that may be written as a string ("100"), as
// LiteLLM's JSON and YAML both allow.
func (o *object) number(name string) (float64, bool, error) {
	switch v := o.take(name).(type) {
	case nil:
		return 0, false, nil
	case int:
		return float64(v), true, nil
	case float64:
		return v, true, nil
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: must be a number", o.at(name))
		}
		return f, true, nil
	default:
		return 0, false, fmt.Errorf("%s: must be a number", o.at(name))
	}
}

func (o *object) count(name string) (int, error) {
	f, _, err := o.number(name)
	if err != nil {
		return 0, err
	}
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, fmt.Errorf("%s: must be a whole number ≥ 0", o.at(name))
	}
	return int(f), nil
}

func (o *object) object(name string) (*object, error) {
	v := o.take(name)
	if v == nil {
		return &object{path: o.at(name), fields: map[string]any{}, taken: map[string]bool{}}, nil
	}
	return asObject(o.at(name), v)
}

func (o *object) list(name string) ([]any, error) {
	switch v := o.take(name).(type) {
	case nil:
		return nil, nil
	case []any:
		return v, nil
	default:
		return nil, fmt.Errorf("%s: must be a list", o.at(name))
	}
}

func (o *object) strings(name string) ([]string, error) {
	items, err := o.list(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: must be a string", o.at(name), i)
		}
		out = append(out, s)
	}
	return out, nil
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
