package importer

import (
	"fmt"
	"strings"
)

// Input names one of the files an import reads.
type Input string

const (
	ConfigInput Input = "config"
	KeysInput   Input = "keys"
	TeamsInput  Input = "teams"
)

// InputError is malformed input: Err names the field, Input the file.
type InputError struct {
	Input Input
	Err   error
}

func (e *InputError) Error() string { return string(e.Input) + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Result is what an import produces: the catalog and what the operator must
// know about it.
type Result struct {
	Catalog []byte // YAML that config loads and validates
	Report  Report
}

// Report says how each field of the source was carried over. Every field
// of the input appears in Mapped, Approximate or NotMapped.
type Report struct {
	Source      string
	Mapped      []Line // carried over with the same meaning
	Approximate []Line // carried over with a different meaning, Note says how
	NotMapped   []Line // left out, Note says why
	Accounts    []Line // Field is the account ID, Note how it was inferred
	Secrets     []Secret
	Keys        []KeyMapping
}

// Line is one field of the source (its path in the input) and a note.
type Line struct {
	Field string
	Note  string
}

// Secret is an environment variable the imported catalog reads and the
// operator must set. The importer never writes a secret's value anywhere.
type Secret struct {
	Env  string
	For  string // what reads it: "credential openai-api-key", "key web-app"
	From string // where its value is in the source, or that it is new
}

// KeyMapping ties a virtual key of the source to the Sluice key made for it.
type KeyMapping struct {
	Old       string // how the source shows the key (alias and masked name)
	NewID     string
	SecretEnv string
}

func (r *Report) mapped(field, format string, args ...any) {
	r.Mapped = append(r.Mapped, Line{field, fmt.Sprintf(format, args...)})
}

func (r *Report) approx(field, format string, args ...any) {
	r.Approximate = append(r.Approximate, Line{field, fmt.Sprintf(format, args...)})
}

func (r *Report) notMapped(field, format string, args ...any) {
	r.NotMapped = append(r.NotMapped, Line{field, fmt.Sprintf(format, args...)})
}

// String renders the report as Markdown.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Import report (%s)\n", r.Source)
	section := func(title string, lines []Line) {
		fmt.Fprintf(&b, "\n## %s (%d)\n\n", title, len(lines))
		if len(lines) == 0 {
			b.WriteString("none\n")
		}
		for _, l := range lines {
			fmt.Fprintf(&b, "- `%s`: %s\n", l.Field, l.Note)
		}
	}
	section("Accounts inferred", r.Accounts)
	fmt.Fprintf(&b, "\n## Environment variables to set (%d)\n\n", len(r.Secrets))
	if len(r.Secrets) == 0 {
		b.WriteString("none\n")
	}
	for _, s := range r.Secrets {
		fmt.Fprintf(&b, "- `%s` (%s): %s\n", s.Env, s.For, s.From)
	}
	if len(r.Keys) > 0 {
		fmt.Fprintf(&b, "\n## Virtual keys (%d)\n\nThe source stores only hashes of its keys, so each gets a new Sluice key: generate a secret for it, set it in the variable named, and hand it to the key's holder.\n\n", len(r.Keys))
		for _, k := range r.Keys {
			fmt.Fprintf(&b, "- %s → key `%s`, secret in `%s`\n", k.Old, k.NewID, k.SecretEnv)
		}
	}
	section("Mapped", r.Mapped)
	section("Mapped approximately", r.Approximate)
	section("Not mapped", r.NotMapped)
	return b.String()
}
