package app

import (
	"context"
	"log/slog"
	"reflect"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// startTracing builds the tracer of the catalog's telemetry section (nil:
// tracing off), or one sending to o.Spans when a test gives it, with the
// section's sample.
func startTracing(ctx context.Context, t *config.Telemetry, o Options, replica string) (*telemetry.Tracer, error) {
	svc := telemetry.Service{Version: version(), Instance: replica}
	if o.Spans != nil {
		return telemetry.NewWith(ctx, o.Spans, t.SampleRatio(), svc)
	}
	return telemetry.New(ctx, t, o.LookupEnv, svc, o.Log)
}

// closeTracing sends the spans still queued, once every request has
// settled. Traces are not records: a collector that cannot take them is
// logged, and the shutdown goes on.
func (g *Gateway) closeTracing() {
	if err := g.tracer.Close(); err != nil {
		g.log.LogAttrs(context.Background(), slog.LevelWarn, "spans not sent at shutdown", slog.Any("err", err))
	}
}

// warnTracingChange says so when catalog c, which now serves, has another
// telemetry section than the one tracing started with: the section is read
// at startup only, and tracing goes on as it started until a restart.
func (s *catalogSource) warnTracingChange(c *config.Catalog) {
	if s.tracing != nil && !reflect.DeepEqual(*s.tracing, c.Telemetry) {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "the catalog's telemetry section changed; tracing keeps its settings until a restart")
	}
}
