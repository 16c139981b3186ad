// Package telemetry makes the OpenTelemetry traces of the requests Sluice
// serves (docs/tracing.md): a server span per request, begun when the
// request is admitted and ended when it has settled, and a client span per
// attempt on an upstream, whose context goes upstream in traceparent. The
// pipeline calls a few hooks; a nil *Tracer is tracing off, and then every
// hook returns at once without allocating. It imports nothing of ours but
// sluice and config.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/internal/config"
)

// Tracer makes the spans of requests and their attempts. Safe for
// concurrent use; nil is tracing off.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	servers  sync.Map // an endpoint's base URL → its server.address and server.port
}

// Service names this process in the traces' resource.
type Service struct {
	Version  string // service.version
	Instance string // service.instance.id: the replica
}

// exportTimeout bounds one export to the collector; closeTimeout bounds
// the flush at shutdown, so a collector that hangs delays a shutdown by no
// more than that.
const (
	exportTimeout = 10 * time.Second
	closeTimeout  = 5 * time.Second
)

// New returns the tracer of the catalog's telemetry section, exporting
// over OTLP/HTTP with the headers read through lookupEnv; nil when the
// section leaves tracing off. Spans are batched and sent in the
// background: when the collector is slow or away the batch's queue fills
// and further spans are dropped, so no request waits for it. Export
// failures are logged to log.
func New(ctx context.Context, t *config.Telemetry, lookupEnv func(string) (string, bool), svc Service, log *slog.Logger) (*Tracer, error) {
	if !t.On() {
		return nil, nil
	}
	headers, err := t.Headers(lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("telemetry.otlp: %w", err)
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(t.TracesURL()), otlptracehttp.WithHeaders(headers),
		otlptracehttp.WithTimeout(exportTimeout))
	if err != nil {
		return nil, fmt.Errorf("telemetry.otlp: %w", err)
	}
	logExportErrors(log)
	return NewWith(ctx, sdktrace.NewBatchSpanProcessor(exp), t.SampleRatio(), svc)
}

// NewWith returns a tracer whose spans go to p, recording the share
// sample of the traces that start here (a caller's traceparent decides
// for its own trace).
func NewWith(ctx context.Context, p sdktrace.SpanProcessor, sample float64, svc Service) (*Tracer, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("sluice"), semconv.ServiceVersion(svc.Version), semconv.ServiceInstanceID(svc.Instance)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(p),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(sample))),
		sdktrace.WithResource(res),
	)
	return &Tracer{provider: tp, tracer: tp.Tracer("github.com/sluicehq/sluice", trace.WithSchemaURL(semconv.SchemaURL))}, nil
}

// Close sends the spans still queued and stops the tracer, waiting at
// most closeTimeout for the collector. Call it once every request has
// ended. A nil Tracer has nothing to close.
func (t *Tracer) Close() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// exportLog is where the OpenTelemetry SDK's errors (a failed export) are
// logged. The SDK's error handler is one for the process; the latest
// tracer's log gets them.
var (
	exportLog     atomic.Pointer[slog.Logger]
	exportLogOnce sync.Once
)

func logExportErrors(log *slog.Logger) {
	exportLog.Store(log)
	exportLogOnce.Do(func() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			if l := exportLog.Load(); l != nil {
				l.LogAttrs(context.Background(), slog.LevelWarn, "trace export failed; spans may be dropped", slog.Any("err", err))
			}
		}))
	})
}

// propagator reads a caller's W3C traceparent.
var propagator = propagation.TraceContext{}
