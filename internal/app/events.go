package app

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/settle"
)

// eventsOutbox starts the usage events publisher when the catalog turns
// events on (docs/events.md), and returns the option that makes the usage
// recorder publish through it; none when events are off. The publisher
// connects in the background, so a NATS that is down does not stop the
// gateway from starting: its records wait in the spool. It is closed with
// the shared-state clients, after the recorder has flushed.
func (g *Gateway) eventsOutbox(cat *config.Catalog, lookupEnv func(string) (string, bool), replica string) ([]settle.Option, error) {
	n := cat.Events.NATS
	if n == nil {
		return nil, nil
	}
	token, err := n.Token(lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("events.nats: %w", err)
	}
	// Read at scrape time: the recorder is made after this returns.
	counts := g.metrics.WatchOutbox(func() int64 { return g.recorder.Unpublished() })
	pub, err := events.NewPublisher(events.Connection{Config: n, Token: token, Name: "sluice " + replica, Log: g.log}, cat.Billing.Currency, counts)
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() error { pub.Close(); return nil })
	return []settle.Option{settle.WithOutbox(pub)}, nil
}
