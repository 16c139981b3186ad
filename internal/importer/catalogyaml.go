package importer

import (
	"bytes"
	"encoding"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/config"
)

// marshalCatalog writes c as YAML with config's own field names and order,
// leaving out every field at its zero value: config's types carry no
// omitempty (a zero means "the default"), so encoding them as they are
// would spell out every default and hide what the import decided.
func marshalCatalog(c *config.Catalog, header string) ([]byte, error) {
	body, err := nodeOf(reflect.ValueOf(c))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var (
	yamlMarshaler = reflect.TypeFor[yaml.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func nodeOf(v reflect.Value) (*yaml.Node, error) {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Type().Implements(yamlMarshaler) || v.Type().Implements(textMarshaler) {
		return scalarNode(v.Interface())
	}
	switch v.Kind() {
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		if err := addFields(n, v); err != nil {
			return nil, err
		}
		return n, nil
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			val, err := nodeOf(v.MapIndex(k))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.String()}, val)
		}
		// A mapping of scalars (labels, a per-model unit's caps) reads best
		// on one line.
		n.Style = flowIfScalars(n.Content)
		return n, nil
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			item, err := nodeOf(v.Index(i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, item)
		}
		n.Style = flowIfScalars(n.Content)
		return n, nil
	default:
		return scalarNode(v.Interface())
	}
}

// addFields appends v's non-zero fields to the mapping n, in declaration
// order, inlining the fields tagged ",inline".
func addFields(n *yaml.Node, v reflect.Value) error {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if opts == "inline" {
			if err := addFields(n, v.Field(i)); err != nil {
				return err
			}
			continue
		}
		if v.Field(i).IsZero() {
			continue
		}
		if name == "" {
			return fmt.Errorf("importer: field %s has no yaml name", f.Name)
		}
		val, err := nodeOf(v.Field(i))
		if err != nil {
			return err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, val)
	}
	n.Style = flowIfScalars(n.Content)
	return nil
}

func scalarNode(v any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return &n, nil
}

func flowIfScalars(content []*yaml.Node) yaml.Style {
	for _, c := range content {
		if c.Kind != yaml.ScalarNode {
			return 0
		}
	}
	return yaml.FlowStyle
}
