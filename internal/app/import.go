package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/internal/importer"
)

// importCommand writes a Sluice catalog made from another gateway's
// configuration, and the report of what mapped and what did not. Exit 0
// written, 1 the input is malformed or a file cannot be read or written, 2
// usage.
func importCommand(args []string, stdout, stderr io.Writer) int {
	const usageLine = "usage: sluice import litellm CONFIG [--keys FILE] [--teams FILE] -o CATALOG [--report FILE]"
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.String("keys", "", "JSON answer of LiteLLM's /key/list (virtual keys)")
	teams := fs.String("teams", "", "JSON answer of LiteLLM's /team/list")
	out := fs.String("o", "", "catalog file to write (required)")
	reportPath := fs.String("report", "", "also write the report to this file")
	// Flags may come before, between or after the source and its file.
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(positional) != 2 || positional[0] != "litellm" || *out == "" {
		fmt.Fprintln(stderr, usageLine)
		return 2
	}
	read := func(path string) ([]byte, error) {
		if path == "" {
			return nil, nil
		}
		return os.ReadFile(path)
	}
	files := map[string][]byte{}
	for _, path := range []string{positional[1], *keys, *teams} {
		b, err := read(path)
		if err != nil {
			fmt.Fprintf(stderr, "sluice import: %v\n", err)
			return 1
		}
		files[path] = b
	}
	res, err := importer.LiteLLM(files[positional[1]], files[*keys], files[*teams])
	if err != nil {
		fmt.Fprintf(stderr, "sluice import: %s\n", inputError(err, positional[1], *keys, *teams))
		return 1
	}
	if err := os.WriteFile(*out, res.Catalog, 0o644); err != nil {
		fmt.Fprintf(stderr, "sluice import: %v\n", err)
		return 1
	}
	report := res.Report.String()
	if *reportPath != "" {
		if err := os.WriteFile(*reportPath, []byte(report), 0o644); err != nil {
			fmt.Fprintf(stderr, "sluice import: %v\n", err)
			return 1
		}
	}
	fmt.Fprint(stdout, report)
	fmt.Fprintf(stdout, "\nwrote %s: check it with `sluice check --config %s` once the variables above are set\n", *out, *out)
	return 0
}

// inputError names the file an importer error is about.
func inputError(err error, config, keys, teams string) string {
	var ie *importer.InputError
	if !errors.As(err, &ie) {
		return err.Error()
	}
	file := map[importer.Input]string{importer.ConfigInput: config, importer.KeysInput: keys, importer.TeamsInput: teams}[ie.Input]
	return file + ": " + ie.Err.Error()
}
