package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
)

// Decode parses one YAML document into a Catalog, strictly: an unknown or
// repeated field anywhere, a value of the wrong type, an empty input or more
// than one document is an error. Every problem yaml reports is returned at
// once (errors.Join), each starting with its line and, where it can be
// placed, its path: `line 12: unknown field "bse_url" in endpoints[0]`.
// Decode applies no defaults and checks no references; see Load.
func Decode(data []byte) (*Catalog, error) {
	root, err := parse(data)
	if err != nil {
		return nil, err
	}
	// yaml.v3 decides what is accepted; the walk below only explains a
	// failure in the catalog's own words.
	var c Catalog
	err = decodeStrict(data, &c)
	if err == nil {
		return &c, nil
	}
	if errors.Is(err, errYAMLPanicked) {
		// Every problem the walk finds is reported: there are no yaml
		// messages to match them against.
		var w walker
		w.walk(root, reflect.TypeFor[Catalog](), "")
		if len(w.problems) == 0 {
			return nil, err
		}
		return nil, w.err()
	}
	te, ok := errors.AsType[*yaml.TypeError](err)
	if !ok {
		return nil, yamlError(err)
	}
	return nil, explain(root, te)
}

// errYAMLPanicked marks a document yaml.v3's decoder panicked on instead of
// returning an error: a merge key (<<) beside a mapping or list used as a
// key makes it hash an unhashable value. The walk names the key at fault.
var errYAMLPanicked = errors.New("catalog could not be decoded")

// decodeStrict decodes data into c with unknown fields refused, turning a
// panic inside yaml.v3 into errYAMLPanicked.
func decodeStrict(data []byte, c *Catalog) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errYAMLPanicked
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(c)
}

// parse returns the root node of the only document in data.
func parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("catalog is empty")
		}
		return nil, yamlError(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlError(err)
	default:
		return nil, fmt.Errorf("line %d: catalog must be a single YAML document", next.Line)
	}
	if len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		return nil, errors.New("catalog is empty")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: catalog must be a mapping, got %s", root.Line, describe(root))
	}
	return root, nil
}

// yamlError drops the "yaml: " prefix so syntax errors read like the rest:
// "line 3: did not find expected key".
func yamlError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// explain turns yaml's type errors into located, path-named messages. For
// each line yaml complained about it uses the walk's messages for that line
// when there are any, and yaml's own otherwise, so nothing yaml reported is
// lost and nothing yaml accepted is added.
func explain(root *yaml.Node, te *yaml.TypeError) error {
	var w walker
	w.walk(root, reflect.TypeFor[Catalog](), "")
	byLine := make(map[int][]string)
	for _, p := range w.problems {
		byLine[p.line] = append(byLine[p.line], p.msg)
	}
	var out []problem
	done := make(map[int]bool)
	for _, raw := range te.Errors {
		line, msg := splitLine(raw)
		switch {
		case line == 0:
			out = append(out, problem{msg: msg})
		case len(byLine[line]) == 0:
			out = append(out, problem{line: line, msg: msg})
		case !done[line]:
			done[line] = true
			for _, m := range byLine[line] {
				out = append(out, problem{line: line, msg: m})
			}
		}
	}
	return joinProblems(out)
}

// err joins the walk's problems, in line order.
func (w *walker) err() error { return joinProblems(w.problems) }

func joinProblems(ps []problem) error {
	slices.SortStableFunc(ps, func(a, b problem) int { return cmp.Compare(a.line, b.line) })
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// problem is one decode error at a line (0 when yaml gave none).
type problem struct {
	line int
	msg  string
}

func (p problem) Error() string {
	if p.line == 0 {
		return p.msg
	}
	return fmt.Sprintf("line %d: %s", p.line, p.msg)
}

// splitLine splits "line 12: rest" into 12 and "rest".
func splitLine(s string) (int, string) {
	rest, ok := strings.CutPrefix(s, "line ")
	if !ok {
		return 0, s
	}
	num, msg, ok := strings.Cut(rest, ": ")
	line, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, s
	}
	return line, msg
}

// walker follows the node tree alongside the Go types of the catalog and
// records what does not fit, by line and path. It mirrors what yaml.v3 does
// for the kinds the catalog uses: structs, slices and scalars.
type walker struct {
	problems []problem
	seen     map[anchored]bool
}

// anchored is an anchored node visited as a type; aliases to it are walked
// once, which also stops a self-referencing anchor.
type anchored struct {
	n *yaml.Node
	t reflect.Type
}

func (w *walker) addf(line int, format string, args ...any) {
	w.problems = append(w.problems, problem{line: line, msg: fmt.Sprintf(format, args...)})
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.ShortTag() == "!!null" {
		return
	}
	if n.Anchor != "" {
		k := anchored{n, t}
		if w.seen[k] {
			return
		}
		if w.seen == nil {
			w.seen = make(map[anchored]bool)
		}
		w.seen[k] = true
	}
	switch t.Kind() {
	case reflect.Struct:
		w.mapping(n, t, path)
	case reflect.Slice:
		w.sequence(n, t, path)
	default:
		w.scalar(n, t, path)
	}
}

func (w *walker) mapping(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		w.addf(n.Line, "%s: want a mapping, got %s", where(path), describe(n))
		return
	}
	fields := fieldsOf(t)
	first := make(map[string]int) // field name → line it was first set
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if isMerge(k) {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			w.addf(k.Line, "%s: field names must be plain strings, got %s", where(path), describe(k))
			continue
		}
		f, ok := fields[k.Value]
		if !ok {
			w.addf(k.Line, "unknown field %q%s%s", k.Value, in(path), suggest(k.Value, fields))
			continue
		}
		if line, dup := first[k.Value]; dup {
			w.addf(k.Line, "duplicate field %q%s (first set at line %d)", k.Value, in(path), line)
			continue
		}
		first[k.Value] = k.Line
		w.walk(v, f.Type, join(path, k.Value))
	}
	for _, m := range merges {
		if m.Kind == yaml.AliasNode {
			m = m.Alias
		}
		if m != nil && m.Kind == yaml.SequenceNode {
			for _, e := range m.Content {
				w.walk(e, t, path)
			}
			continue
		}
		w.walk(m, t, path)
	}
}

func (w *walker) sequence(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.SequenceNode {
		w.addf(n.Line, "%s: want a list, got %s", where(path), describe(n))
		return
	}
	for i, e := range n.Content {
		w.walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
	}
}

// scalar lets yaml decode the leaf alone, so the walk accepts exactly what
// the real decode accepts.
func (w *walker) scalar(n *yaml.Node, t reflect.Type, path string) {
	if t == reflect.TypeFor[sluice.Duration]() {
		t = reflect.TypeFor[Duration]() // the same values, refused in the catalog's words
	}
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return
	}
	if te, ok := errors.AsType[*yaml.TypeError](err); ok && ownMessage[t] && len(te.Errors) > 0 {
		_, msg := splitLine(te.Errors[0])
		w.addf(n.Line, "%s: %s", where(path), msg)
		return
	}
	w.addf(n.Line, "%s: want %s, got %s", where(path), kindName(t), describe(n))
}

// ownMessage are the scalar types whose UnmarshalYAML explains a bad value
// better than "want …, got …".
var ownMessage = map[reflect.Type]bool{reflect.TypeFor[Duration](): true, reflect.TypeFor[Money](): true, reflect.TypeFor[Days](): true}

// isMerge reports whether a mapping key is the merge key "<<", as yaml.v3 decides it.
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// fieldsOf maps the YAML names of t's fields to the fields; the fields of
// an ",inline" struct are t's own, as yaml.v3 decodes them.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	fields := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
			continue
		case opts == "inline" && f.Type.Kind() == reflect.Struct:
			maps.Copy(fields, fieldsOf(f.Type))
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		fields[name] = f
	}
	return fields
}

// suggest offers the known field closest to a misspelt one, if any is close.
func suggest(name string, fields map[string]reflect.StructField) string {
	best, bestDist := "", 3 // more than two edits apart is not a typo
	for known := range fields {
		if d := distance(name, known); d < bestDist || (d == bestDist && known < best) {
			best, bestDist = known, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// where names a path in a message; the root has none.
func where(path string) string {
	if path == "" {
		return "catalog"
	}
	return path
}

// in is " in path", or nothing at the root.
func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

// describe says what a node is without quoting more than a short value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 32 {
		v = v[:29] + "..."
	}
	return strconv.Quote(v)
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}
