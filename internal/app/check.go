package app

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// checkCommand validates a catalog file without serving it: the checks
// `serve` runs before it listens (decode, defaults, validation, compiling
// the routes), every problem listed. Exit 0 valid, 1 invalid, 2 usage.
// Secrets are read as serve reads them, from this process's environment
// and files: a catalog is checked for the place it will run in.
func checkCommand(args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "catalog YAML file to check (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: sluice check --config FILE")
		return 2
	}
	doc, err := os.ReadFile(*path)
	if err != nil {
		fmt.Fprintf(stderr, "sluice check: %v\n", err)
		return 1
	}
	c, err := config.LoadServing(doc, lookupEnv, dialects.CanServe)
	if err == nil {
		_, err = pipeline.CompileServing(c, lookupEnv, "file:"+*path, dialects.CanServe)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid\n%v\n", *path, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid (%d models, %d endpoints, %d accounts, %d credentials, %d keys)\n",
		*path, len(c.Models), len(c.Endpoints), len(c.Accounts), len(c.Credentials), len(c.Keys))
	return 0
}
