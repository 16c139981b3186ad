package config

import (
	"encoding"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/billing"
)

// referenceDoc is the catalog reference: a table row for every field a
// catalog may set, named by its path in the first cell.
const referenceDoc = "../../docs/catalog-reference.md"

// TestCatalogReferenceDocumentsEveryField fails when a catalog field has
// no row in docs/catalog-reference.md, or a row names a field that does
// not exist: the reference and the structs cannot drift apart.
func TestCatalogReferenceDocumentsEveryField(t *testing.T) {
	doc, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	fields := catalogFieldPaths()
	for _, p := range fields {
		if !documented[p] {
			t.Errorf("%s: catalog field has no row in docs/catalog-reference.md", p)
		}
	}
	for p := range documented {
		if !slices.Contains(fields, p) {
			t.Errorf("%s: docs/catalog-reference.md documents a field the catalog does not have", p)
		}
	}
}

// sharedBlocks are the types several sections use, documented once under
// their own name (limits.rpm) rather than at every place they appear.
var sharedBlocks = map[reflect.Type]string{
	reflect.TypeFor[Limits]():           "limits",
	reflect.TypeFor[Timeouts]():         "timeouts",
	reflect.TypeFor[Affinity]():         "affinity",
	reflect.TypeFor[Budgets]():          "budgets",
	reflect.TypeFor[Cache]():            "cache",
	reflect.TypeFor[billing.RateText](): "rates",
}

// catalogFieldPaths lists the path of every field of Catalog as the
// reference names it: sections joined by dots, [] after a list, <name>
// for a map's key; a type that decodes itself (a duration, an amount of
// money) is one field; a shared block's fields are listed once, under
// its name, and where it appears it is one field (or, inlined, nothing).
func catalogFieldPaths() []string {
	var paths []string
	var walk func(prefix string, t reflect.Type)
	walked := map[reflect.Type]bool{}
	block := func(t reflect.Type) bool {
		name, ok := sharedBlocks[t]
		if ok && !walked[t] {
			walked[t] = true
			walk(name+".", t)
		}
		return ok
	}
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				if !block(f.Type) {
					walk(prefix, f.Type)
				}
				continue
			}
			path := prefix + name
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case decodesItself(ft) || block(ft):
				paths = append(paths, path)
			case ft.Kind() == reflect.Struct && ft.NumField() == 0:
				paths = append(paths, path) // a block without settings (chatgpt: {}): its presence is the field
			case ft.Kind() == reflect.Struct:
				walk(path+".", ft)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && !decodesItself(ft.Elem()) && !block(ft.Elem()):
				walk(path+"[].", ft.Elem())
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct && !decodesItself(ft.Elem()):
				walk(path+".<"+mapKeyName(path)+">.", ft.Elem())
			default:
				paths = append(paths, path)
			}
		}
	}
	walk("", reflect.TypeFor[Catalog]())
	return paths
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(yamlUnmarshaler) || p.Implements(yamlUnmarshaler) || p.Implements(textUnmarshaler) ||
		p.Implements(reflect.TypeFor[interface{ UnmarshalYAML(func(any) error) error }]())
}

// mapKeyName is what a map's keys are, by the map's path.
func mapKeyName(path string) string {
	switch {
	case strings.HasSuffix(path, "priorities"):
		return "class"
	case strings.HasSuffix(path, "task_limits"):
		return "task"
	default:
		return "model"
	}
}
