package config

import "testing"

func TestValidateRedaction(t *testing.T) {
	policy := func(c *Catalog) {
		c.Redaction = []Redaction{{ID: "pii", Detectors: map[string]string{"email": "mask", "card": "block"},
			Patterns: []RedactionPattern{{Name: "employee", Regex: `EMP-\d{6}`, Action: "log"}}, Restore: true}}
	}
	with := func(change func(c *Catalog)) func(c *Catalog) {
		return func(c *Catalog) { policy(c); change(c) }
	}
	checkValidate(t, []validateCase{
		{"Valid", with(func(c *Catalog) {
			c.Keys[0].Redaction, c.Models[0].Redaction = "pii", "pii"
			c.Tenants = append(c.Tenants, Tenant{ID: "t", Redaction: "pii"})
		}), ""},
		{"UnknownDetector", with(func(c *Catalog) { c.Redaction[0].Detectors["ssn"] = "mask" }), `redaction[0].detectors: unknown detector "ssn"`},
		{"UnknownAction", with(func(c *Catalog) { c.Redaction[0].Detectors["email"] = "hide" }), `redaction[0].detectors.email: unknown action "hide"`},
		{"BadRegex", with(func(c *Catalog) { c.Redaction[0].Patterns[0].Regex = "EMP-(" }), "redaction[0].patterns[0].regex: error parsing regexp"},
		{"PatternShadowsDetector", with(func(c *Catalog) { c.Redaction[0].Patterns[0].Name = "email" }), `redaction[0].patterns[0].name: "email" is already a detector's name`},
		{"Empty", with(func(c *Catalog) { c.Redaction[0].Detectors, c.Redaction[0].Patterns = nil, nil }), "redaction[0]: enables no detector and no pattern"},
		{"DuplicateID", with(func(c *Catalog) { c.Redaction = append(c.Redaction, c.Redaction[0]) }), `redaction[1].id: duplicate id "pii"`},
		{"UnknownOnKey", with(func(c *Catalog) { c.Keys[0].Redaction = "nope" }), `keys[0].redaction: unknown redaction policy "nope"`},
		{"UnknownOnModel", with(func(c *Catalog) { c.Models[0].Redaction = "nope" }), `models[0].redaction: unknown redaction policy "nope"`},
		{"UnknownOnTenant", with(func(c *Catalog) { c.Tenants = append(c.Tenants, Tenant{ID: "t", Redaction: "nope"}) }), `tenants[0].redaction: unknown redaction policy "nope"`},
	})
}
