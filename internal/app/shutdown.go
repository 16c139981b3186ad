package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/upstream"
)

// After the shutdown grace, the requests still running are cut; settleBound
// is how long they then get to end their streams and settle (usage record,
// access-log line, claims). Cutting one is quick: its upstream call is
// cancelled, an error event is written and its usage recorded, each of
// which is bounded on its own.
const settleBound = 15 * time.Second

// adminBound is how long a running admin request may finish at shutdown;
// admin requests are short.
const adminBound = 5 * time.Second

// drain stops the data plane: it stops accepting requests and lets the
// running ones finish within server.shutdown_grace (as the catalog serving
// now says). Those still running then are cut: their contexts are cancelled
// with upstream.ErrShuttingDown as the cause, so a stream ends with an
// error event and an uncommitted request is answered 503; drain waits
// (bounded) until every handler has returned, so that every request has
// settled. Then it stops the admin API, which stays up meanwhile to show
// the drain.
func (g *Gateway) drain() error {
	if g.dataPlane == nil {
		return nil // Start failed before serving
	}
	g.draining.Store(true)
	grace := g.live.Load().Catalog.Server.ShutdownGrace.D()
	g.log.LogAttrs(context.Background(), slog.LevelInfo, "shutting down: draining requests",
		slog.Duration("grace", grace), slog.Int64("requests", g.handlers.running.Load()))
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := g.dataPlane.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = g.cut(grace)
	}
	actx, acancel := context.WithTimeout(context.Background(), adminBound)
	defer acancel()
	if g.adminAPI.Shutdown(actx) != nil {
		g.adminAPI.Close()
	}
	return err
}

// cut ends the requests still running after the grace and waits for them
// to settle.
func (g *Gateway) cut(grace time.Duration) error {
	g.log.LogAttrs(context.Background(), slog.LevelWarn, "shutdown grace ended: ending the requests still running",
		slog.Duration("grace", grace), slog.Int64("requests", g.handlers.running.Load()))
	g.stopRequests(upstream.ErrShuttingDown)
	ctx, cancel := context.WithTimeout(context.Background(), settleBound)
	defer cancel()
	if err := g.handlers.wait(ctx); err != nil {
		n := g.handlers.running.Load()
		g.dataPlane.Close()
		return fmt.Errorf("%d requests still running %s after the shutdown grace ended", n, settleBound)
	}
	// The handlers have returned; their answers' last bytes (the end of a
	// chunked body) go out before the connections close.
	if err := g.dataPlane.Shutdown(ctx); err != nil {
		g.dataPlane.Close()
	}
	return nil
}

// handlers counts the data plane's running handlers, because
// http.Server.Shutdown stops waiting for them when its context ends, and
// the requests cut then must still be waited for. Two atomic adds per
// request; safe for concurrent use.
type handlers struct {
	running  atomic.Int64
	draining atomic.Bool
	idle     chan struct{} // size 1: a handler that leaves none running while draining wakes wait
}

func newHandlers() *handlers { return &handlers{idle: make(chan struct{}, 1)} }

// track counts h's calls.
func (hs *handlers) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.running.Add(1)
		defer hs.leave()
		h.ServeHTTP(w, r)
	})
}

func (hs *handlers) leave() {
	if hs.running.Add(-1) == 0 && hs.draining.Load() {
		select {
		case hs.idle <- struct{}{}:
		default: // wait is already woken
		}
	}
}

// wait returns when no handler is running, or ctx's error when it ends
// first. Call it once new requests are no longer accepted.
func (hs *handlers) wait(ctx context.Context) error {
	hs.draining.Store(true)
	for hs.running.Load() > 0 {
		select {
		case <-hs.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
