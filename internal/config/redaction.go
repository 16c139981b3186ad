package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sluicehq/sluice/internal/redact"
)

// Redaction is a sensitive-data policy (docs/redaction.md): what each
// detector does with the values it finds in a request's text. Keys,
// tenants and aliases attach policies by ID; a request gets their union.
type Redaction struct {
	ID string `yaml:"id"`
	// Detectors maps a built-in detector (redact.Detectors) to its
	// action: mask, block or log. A detector not named is off.
	Detectors map[string]string `yaml:"detectors"`
	// Patterns are the operator's own detectors.
	Patterns []RedactionPattern `yaml:"patterns"`
	// Restore puts masked values back in the answer.
	Restore bool `yaml:"restore"`
}

// RedactionPattern is an operator's detector: every match of Regex (Go
// syntax) is a finding named Name, and its placeholder is Name upper-cased.
type RedactionPattern struct {
	Name   string `yaml:"name"`
	Regex  string `yaml:"regex"`
	Action string `yaml:"action"`
}

// Compile turns the policy into the form requests apply; its errors name
// the field at fault.
func (r *Redaction) Compile() (*redact.Policy, error) {
	spec := redact.Spec{Detectors: r.Detectors, Restore: r.Restore}
	for _, p := range r.Patterns {
		spec.Patterns = append(spec.Patterns, redact.PatternSpec{Name: p.Name, Regex: p.Regex, Action: p.Action})
	}
	return redact.Compile(spec)
}

// redactions checks redaction[] (every detector, action and regex, by
// compiling it) and the keys', tenants' and aliases' references to it.
func (v *validator) redactions() {
	ids := v.unique("redaction", "id", len(v.c.Redaction), func(i int) string { return v.c.Redaction[i].ID })
	for i := range v.c.Redaction {
		r := &v.c.Redaction[i]
		if len(r.Detectors) == 0 && len(r.Patterns) == 0 {
			v.addf(fmt.Sprintf("redaction[%d]", i), "enables no detector and no pattern")
		}
		if _, err := r.Compile(); err != nil {
			// Compile's errors start with the field's path within the policy.
			v.errs = append(v.errs, fmt.Errorf("redaction[%d].%w", i, err))
		}
	}
	ref := func(at, id string) {
		if _, ok := ids[id]; id != "" && !ok {
			v.addf(at+".redaction", "unknown redaction policy %q (redaction[].id: %v)", id, slices.Sorted(maps.Keys(ids)))
		}
	}
	for i, k := range v.c.Keys {
		ref(fmt.Sprintf("keys[%d]", i), k.Redaction)
	}
	for i, t := range v.c.Tenants {
		ref(fmt.Sprintf("tenants[%d]", i), t.Redaction)
	}
	for i, m := range v.c.Models {
		ref(fmt.Sprintf("models[%d]", i), m.Redaction)
	}
}
