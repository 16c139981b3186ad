package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/internal/importer"
)

// importCommand writes a Sluice catalog made from another gateway's
// configuration, and the report of what mapped and what did not. Exit 0
// written, 1 the input is malformed or a file cannot be read or written, 2
// usage.
func importCommand(args []string, stdout, stderr io.Writer) int {
	const usageLine = "usage: sluice import litellm CONFIG [--keys FILE] [--teams FILE] -o CATALOG [--report FILE]\n" +
		"       sluice import new-api CHANNELS [--tokens FILE] -o CATALOG [--secrets-dir DIR] [--report FILE]\n" +
		"       sluice import cliproxyapi CONFIG [AUTH-DIR] -o CATALOG [--secrets-dir DIR] [--report FILE]"
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.String("keys", "", "JSON answer of LiteLLM's /key/list (virtual keys)")
	teams := fs.String("teams", "", "JSON answer of LiteLLM's /team/list")
	tokens := fs.String("tokens", "", "new-api: JSON of its tokens (GET /api/token/)")
	secretsDir := fs.String("secrets-dir", "", "new-api, cliproxyapi: where the keys and tokens they hold in clear are written (default: secrets/ beside the catalog)")
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
	if len(positional) < 2 || *out == "" {
		fmt.Fprintln(stderr, usageLine)
		return 2
	}
	source, input := positional[0], positional[1]
	// Only cliproxyapi reads a second file (its auth folder).
	litellmFlags, tokenFlags := *keys != "" || *teams != "", *tokens != ""
	if len(positional) > 3 || len(positional) == 3 && source != "cliproxyapi" ||
		source == "litellm" && (tokenFlags || *secretsDir != "") || source != "litellm" && litellmFlags || source == "cliproxyapi" && tokenFlags {
		fmt.Fprintln(stderr, usageLine)
		return 2
	}
	dir := *secretsDir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(*out), "secrets")
	}
	var res *importer.Result
	var err error
	switch source {
	case "litellm":
		res, err = importFiles(func(b [][]byte) (*importer.Result, error) { return importer.LiteLLM(b[0], b[1], b[2]) },
			map[importer.Input]string{importer.ConfigInput: input, importer.KeysInput: *keys, importer.TeamsInput: *teams},
			importer.ConfigInput, importer.KeysInput, importer.TeamsInput)
	case "new-api":
		if dir, err = filepath.Abs(dir); err != nil {
			break
		}
		res, err = importFiles(func(b [][]byte) (*importer.Result, error) { return importer.NewAPI(b[0], b[1], dir) },
			map[importer.Input]string{importer.ChannelsInput: input, importer.TokensInput: *tokens},
			importer.ChannelsInput, importer.TokensInput)
		if err == nil {
			err = writeSecretFiles(dir, res.SecretFiles)
		}
	case "cliproxyapi":
		if dir, err = filepath.Abs(dir); err != nil {
			break
		}
		var authDir string
		if len(positional) == 3 {
			authDir = positional[2]
		}
		res, err = importCLIProxyAPI(input, authDir, dir)
		if err == nil {
			err = writeSecretFiles(dir, res.SecretFiles)
		}
	default:
		fmt.Fprintln(stderr, usageLine)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice import: %v\n", err)
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

// importFiles reads the files of an import (by input, in order; one not
// given is nil) and runs it; an error names the file and the field.
func importFiles(run func([][]byte) (*importer.Result, error), files map[importer.Input]string, order ...importer.Input) (*importer.Result, error) {
	docs := make([][]byte, len(order))
	for i, in := range order {
		if files[in] == "" {
			continue
		}
		b, err := os.ReadFile(files[in])
		if err != nil {
			return nil, err
		}
		docs[i] = b
	}
	res, err := run(docs)
	var ie *importer.InputError
	if errors.As(err, &ie) {
		return nil, fmt.Errorf("%s: %w", files[ie.Input], ie.Err)
	}
	return res, err
}

// writeSecretFiles writes the secrets an import carried over, readable by
// this user alone.
func writeSecretFiles(dir string, files map[string][]byte) error {
	if len(files) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for path, secret := range files {
		if err := os.WriteFile(path, secret, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// importCLIProxyAPI reads CLIProxyAPI's config.yaml and the JSON files of
// its auth folder ("" = none given) and imports them, writing secrets
// under secretsDir; an error names the file and the field.
func importCLIProxyAPI(configPath, authDir, secretsDir string) (*importer.Result, error) {
	config, err := os.ReadFile(configPath)
	if err != nil {
		return nil, err
	}
	var auth map[string][]byte
	if authDir != "" {
		names, err := filepath.Glob(filepath.Join(authDir, "*.json"))
		if err != nil {
			return nil, err
		}
		auth = make(map[string][]byte, len(names))
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				return nil, err
			}
			auth[filepath.Base(name)] = b
		}
	}
	res, err := importer.CLIProxyAPI(config, auth, secretsDir)
	var ie *importer.InputError
	if errors.As(err, &ie) {
		where := configPath
		if ie.Input == importer.AuthDirInput {
			where = authDir
		}
		return nil, fmt.Errorf("%s: %w", where, ie.Err)
	}
	return res, err
}
