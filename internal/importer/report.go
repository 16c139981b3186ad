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
	// new-api and one-api
	ChannelsInput Input = "channels"
	TokensInput   Input = "tokens"
	// CLIProxyAPI: its auth folder
	AuthDirInput Input = "auth-dir"
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
	// SecretFiles are the secrets the source held in clear, by the path
	// the catalog reads them from; whoever writes them keeps them private.
	SecretFiles map[string][]byte
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
	KeysNote    string // whether the keys keep their secrets, and what to do
}

// Line is one field of the source (its path in the input) and a note.
type Line struct {
	Field string
	Note  string
}

// Secret is where the imported catalog reads a secret: an environment
// variable the operator must set (Env), or a file the import writes with
// the value the source held (File, one of Result.SecretFiles). The
// catalog and the report never hold a secret's value.
type Secret struct {
	Env  string
	File string
	For  string // what reads it: "credential openai-api-key", "key web-app"
	From string // where its value is in the source, or that it is new
}

// KeyMapping ties a virtual key of the source to the Sluice key made for it.
type KeyMapping struct {
	Old      string // how the source shows the key (alias and masked name)
	NewID    string
	SecretIn string // the variable or file holding its secret
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
	fmt.Fprintf(&b, "\n## Secrets: variables to set and files written (%d)\n\n", len(r.Secrets))
	if len(r.Secrets) == 0 {
		b.WriteString("none\n")
	}
	for _, s := range r.Secrets {
		if s.File != "" {
			fmt.Fprintf(&b, "- file `%s` (%s): %s\n", s.File, s.For, s.From)
		} else {
			fmt.Fprintf(&b, "- `%s` (%s): %s\n", s.Env, s.For, s.From)
		}
	}
	if len(r.Keys) > 0 {
		fmt.Fprintf(&b, "\n## Virtual keys (%d)\n\n%s\n\n", len(r.Keys), r.KeysNote)
		for _, k := range r.Keys {
			fmt.Fprintf(&b, "- %s → key `%s`, secret in `%s`\n", k.Old, k.NewID, k.SecretIn)
		}
	}
	section("Mapped", r.Mapped)
	section("Mapped approximately", r.Approximate)
	section("Not mapped", r.NotMapped)
	return b.String()
}
