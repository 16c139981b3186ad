package config

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "30s" in YAML. A zero Duration means
// "not set" wherever a default applies.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string; numbers without a unit and
// negative values are refused. Errors are *yaml.TypeError so that Decode
// collects them with every other problem instead of stopping at the first.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return durationError(n, "want a duration such as \"30s\"")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return durationError(n, fmt.Sprintf("invalid duration %q (want e.g. \"30s\")", n.Value))
	}
	if v < 0 {
		return durationError(n, fmt.Sprintf("duration %q must not be negative", n.Value))
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration in the form UnmarshalYAML reads ("1m30s").
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func durationError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}
