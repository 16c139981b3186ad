// Command sluice is the Sluice LLM gateway: `sluice serve` runs it, and the
// other subcommands manage it (see `sluice help`).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown (server.shutdown_grace);
	// a second one ends the process at once.
	context.AfterFunc(ctx, stop)
	code := app.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
