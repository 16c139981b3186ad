package config

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// TestRetentionDays reads whole days, and writes them back the same way.
func TestRetentionDays(t *testing.T) {
	var r Retention
	if err := yaml.Unmarshal([]byte("{usage: 90d, audit: 0}"), &r); err != nil {
		t.Fatal(err)
	}
	if r != (Retention{Usage: 90, Audit: 0}) {
		t.Errorf("decoded %+v, want usage 90 days, audit 0", r)
	}
	out, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "usage: 90d\naudit: 0d\n"; got != want {
		t.Errorf("encoded %q, want %q", got, want)
	}
}
