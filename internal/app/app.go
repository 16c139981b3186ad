// Package app builds the gateway from its configuration and runs it: the
// subcommands of cmd/sluice, the stores, the catalog (with reload), the data
// plane and admin servers, and the built-in demo. It is the only package
// that imports implementations (stores, simulator); every other package sees
// interfaces.
package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/sluicehq/sluice/internal/adminclient"
)

// Run executes one subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	switch args[0] {
	case "serve":
		return serveCommand(ctx, args[1:], stdout, stderr)
	case "demo-upstream":
		return demoUpstreamCommand(ctx, args[1:], stdout, stderr)
	case "check":
		return checkCommand(args[1:], stdout, stderr, os.LookupEnv)
	case "import":
		return importCommand(args[1:], stdout, stderr)
	case "consume":
		return consumeCommand(ctx, args[1:], stderr, os.LookupEnv)
	case "version":
		fmt.Fprintln(stdout, "sluice", version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return adminclient.RunCLI(ctx, []string{"help"}, stdout, stderr, os.Getenv)
	default:
		// Every other command manages a running gateway through its admin
		// API; the CLI knows them all and refuses an unknown one.
		return adminclient.RunCLI(ctx, args, stdout, stderr, os.Getenv)
	}
}

// usage is what this package's commands are; `sluice help` prints it and
// then the admin commands' usage, once each.
const usage = `usage: sluice <command> [flags]

  sluice serve [--config FILE] [--listen ADDR] [--admin-listen ADDR] [--database URL] [--log-level LEVEL]
                                 run the gateway (no --config: the last applied catalog, else the built-in demo)
  sluice check --config FILE     validate a catalog offline, as serve would here: every problem listed, exit 1 if any
  sluice import litellm CONFIG [--keys KEYS.json] [--teams TEAMS.json] -o CATALOG [--report FILE]
                                 write a catalog from a LiteLLM proxy's config (and key and team exports) and print what mapped (docs/migrate-litellm.md)
  sluice import new-api CHANNELS [--tokens TOKENS.json] -o CATALOG [--secrets-dir DIR] [--report FILE]
                                 the same from a new-api or one-api console's channels and tokens (docs/migrate-new-api.md)
  sluice import cliproxyapi CONFIG [AUTH-DIR] -o CATALOG [--secrets-dir DIR] [--report FILE]
                                 the same from CLIProxyAPI's config.yaml and its auth folder's logins (docs/migrate-cliproxyapi.md)
  sluice consume --config FILE [--drain] [--log-level LEVEL]
                                 write the usage events stream into the reporting database of events.consumer (docs/events.md)
  sluice demo-upstream [--listen ADDR] [--latency D] [--chunk-delay D]
                                 run the simulated upstream provider on its own
  sluice version

`

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

func serveCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.ConfigPath, "config", "", "catalog YAML file (default: last applied catalog, else the built-in demo)")
	fs.StringVar(&o.Listen, "listen", "", "data plane address (overrides server.listen)")
	fs.StringVar(&o.AdminListen, "admin-listen", "", "admin API address (overrides server.admin_listen)")
	fs.StringVar(&o.DatabaseURL, "database", "", "database URL (overrides database.url)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "sluice serve: --log-level: %v\n", err)
		return 2
	}
	logs := newLogBuffer(stderr)
	defer logs.Close()
	o.Log = slog.New(flushingHandler{slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: lv}), logs})
	o.LookupEnv = os.LookupEnv
	o.Banner = stdout
	g, err := Start(ctx, o)
	if err != nil {
		fmt.Fprintf(logs, "sluice serve: %v\n", err) // after the log's lines, not among them
		return 1
	}
	<-ctx.Done()
	if err := g.Close(); err != nil {
		fmt.Fprintf(logs, "sluice serve: shutdown: %v\n", err)
		return 1
	}
	return 0
}
