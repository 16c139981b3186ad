package config

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string; numbers without a unit are refused.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q (want e.g. \"30s\")", n.Line, n.Value)
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %q must not be negative", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
