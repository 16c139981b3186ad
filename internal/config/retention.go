package config

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Retention is how long the database keeps history, in whole UTC days:
// usage records (with their executions) and audit log entries older than
// that are removed by a job every gateway runs (one replica at a time).
// What outlives the records is kept: per-day roll-ups for reports, and
// every charge and balance. 0, the default, keeps them forever.
type Retention struct {
	Usage Days `yaml:"usage"`
	Audit Days `yaml:"audit"`
}

// Days is a whole number of days, written "90d" in YAML ("0" or "0d":
// none). History goes by UTC day (a partition per day on PostgreSQL), so
// a finer duration is refused rather than rounded.
type Days int

// maxDays bounds a retention at 100 years: beyond that it is a typo.
const maxDays = 36500

// UnmarshalYAML parses "90d". Errors are *yaml.TypeError, as Duration's.
func (d *Days) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return durationError(n, `want a number of days such as "90d"`)
	}
	v, err := strconv.Atoi(strings.TrimSuffix(n.Value, "d"))
	if err != nil || (v != 0 && !strings.HasSuffix(n.Value, "d")) {
		return durationError(n, fmt.Sprintf(`invalid number of days %q (want whole days such as "90d"; "0" keeps forever)`, n.Value))
	}
	if v < 0 || v > maxDays {
		return durationError(n, fmt.Sprintf("%q: want 0 to %dd", n.Value, maxDays))
	}
	*d = Days(v)
	return nil
}

// MarshalYAML writes the days in the form UnmarshalYAML reads.
func (d Days) MarshalYAML() (any, error) { return fmt.Sprintf("%dd", int(d)), nil }
