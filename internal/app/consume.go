package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/events"
)

// consumeCommand runs `sluice consume`: it reads the usage events stream
// with a durable consumer and writes each event into the reporting
// database of the catalog's events.consumer, until ctx ends or, with
// --drain, until nothing is left (docs/events.md). Exit 0 done, 1 failed,
// 2 usage.
func consumeCommand(ctx context.Context, args []string, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "catalog YAML file; its events section names the stream and the reporting database (required)")
	drain := fs.Bool("drain", false, "exit once the consumer has nothing left to deliver or acknowledge")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var lv slog.Level
	if *path == "" || fs.NArg() > 0 || lv.UnmarshalText([]byte(*level)) != nil {
		fmt.Fprintln(stderr, "usage: sluice consume --config FILE [--drain] [--log-level LEVEL]")
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: lv}))
	if err := consume(ctx, *path, *drain, lookupEnv, log); err != nil {
		fmt.Fprintf(stderr, "sluice consume: %v\n", err)
		return 1
	}
	return 0
}

func consume(ctx context.Context, path string, drain bool, lookupEnv func(string) (string, bool), log *slog.Logger) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ev, err := config.LoadEvents(doc, lookupEnv)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if ev.NATS == nil || !ev.Consumer.Set() {
		return errors.New(path + ": needs events.nats (the stream) and events.consumer (the reporting database)")
	}
	dbURL, err := ev.Consumer.LoadURL(lookupEnv)
	if err != nil {
		return fmt.Errorf("events.consumer: %w", err)
	}
	token, err := ev.NATS.Token(lookupEnv)
	if err != nil {
		return fmt.Errorf("events.nats: %w", err)
	}
	host, _ := os.Hostname()
	c, err := events.NewConsumer(ctx, events.Connection{Config: ev.NATS, Token: token, Name: "sluice consume " + host, Log: log}, dbURL, ev.Consumer.Durable)
	if err != nil {
		return err
	}
	log.LogAttrs(ctx, slog.LevelInfo, "consuming usage events", slog.String("stream", ev.NATS.Stream),
		slog.String("durable", ev.Consumer.Durable), slog.String("table", events.Table))
	runErr := c.Run(ctx, drain)
	return errors.Join(runErr, c.Close())
}
