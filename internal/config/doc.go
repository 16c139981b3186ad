// Package config decodes and validates the catalog YAML (docs/catalog-reference.md) into
// plain structs. It is the one path every catalog source takes before it is
// compiled: Decode (strict: unknown fields are errors, with their line) →
// ApplyDefaults → Validate (every problem at once, each with its path). Load
// runs the three in order.
//
// The structs are data, not behaviour: references are still IDs and secrets
// are still the names of environment variables or files until Secret reads
// them. Error messages name variables, files and fields, never a secret value.
//
// Package config imports only the sluice root package, gopkg.in/yaml.v3 and
// the standard library. It must not depend on any other package of the
// gateway; pipeline compiles its output, not the other way round.
package config
