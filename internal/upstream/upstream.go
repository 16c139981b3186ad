// Package upstream executes a request on the candidate edges the router
// chose: it prepares the body for the edge, calls the endpoint under phase
// timeouts (connect, first byte, idle between chunks, total), relays the
// answer to the caller as it arrives, classifies every failure, and fails
// over to the next edge only before the first byte has reached the caller.
// It records one sluice.Execution per attempt. It must not depend on
// pipeline, ingress or app.
package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/breaker"
)

// BreakerSettings configure an endpoint's breaker.
type BreakerSettings struct {
	Failures int
	Open     time.Duration
}

// Caller runs executions. It owns the HTTP transports (one per connect
// timeout, so connections are pooled across requests and reloads) and the
// endpoint breakers, which outlive catalog reloads because they are keyed by
// the endpoint's stable ID. Safe for concurrent use.
type Caller struct {
	log        *slog.Logger
	mu         sync.Mutex
	transports map[time.Duration]*http.Transport
	breakers   sync.Map // endpoint ID → *breaker.Breaker
	settings   func(endpointID string) BreakerSettings
	observe    func(Observation)
	protocols  *Protocols
}

// Observation tells the owner what happened to an endpoint's breaker, for
// metrics and logs.
type Observation struct {
	EndpointID string
	State      breaker.State
}

// New returns a Caller that speaks protocols. settings gives each
// endpoint's breaker settings when its breaker is first needed; observe (may
// be nil) is told breaker changes.
func New(log *slog.Logger, protocols *Protocols, settings func(endpointID string) BreakerSettings, observe func(Observation)) *Caller {
	if observe == nil {
		observe = func(Observation) {}
	}
	return &Caller{log: log, transports: map[time.Duration]*http.Transport{}, settings: settings, observe: observe, protocols: protocols}
}

// Breaker returns the endpoint's breaker, creating it on first use.
func (c *Caller) Breaker(endpointID string) *breaker.Breaker {
	if b, ok := c.breakers.Load(endpointID); ok {
		return b.(*breaker.Breaker)
	}
	s := c.settings(endpointID)
	b, _ := c.breakers.LoadOrStore(endpointID, breaker.New(s.Failures, s.Open))
	return b.(*breaker.Breaker)
}

func (c *Caller) transport(connect time.Duration) *http.Transport {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.transports[connect]; ok {
		return t
	}
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		TLSHandshakeTimeout: connect,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // relay the upstream's bytes as they are
	}
	c.transports[connect] = t
	return t
}

// Close releases idle upstream connections.
func (c *Caller) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.transports {
		t.CloseIdleConnections()
	}
}

// Execute runs one attempt of req on edge e, unless the endpoint's breaker
// refuses it (Attempt.Skipped) or Sluice answers it itself (Attempt.Local).
// callStart is when the request's first attempt began, for the time to
// first byte. The caller of Execute decides what follows from
// Attempt.Class; nothing was written to w unless Attempt.Committed. hooks
// are called at the moments of a successful attempt that the pipeline acts
// on.
func (c *Caller) Execute(ctx context.Context, w http.ResponseWriter, req *sluice.Request, e *sluice.Edge, callStart time.Time, hooks Hooks) Attempt {
	if req.CountTokens {
		// A translated count is answered here too: translators carry
		// generation, and the hub they meet at (OpenAI chat) has no count.
		if d := c.protocols.dialect(e); d != nil && (e.Protocol != req.Protocol || d.target(req, e.Endpoint, e.Model) == "") {
			// Before the breaker: the endpoint is not called.
			return countLocally(w, req, e, c.protocols.Dialects[req.Protocol].CountAnswer, callStart, hooks)
		}
	}
	if !e.Credential.InService() {
		// Its token expired since routing chose it: nothing is sent, and the
		// endpoint is not to blame.
		return Attempt{Class: ClassEndpoint, Skipped: true, Err: fmt.Errorf("credential %s: %w", e.Credential.ID, errNoAccessToken)}
	}
	br := c.Breaker(e.Endpoint.ID)
	if !br.Allow() {
		return Attempt{Class: ClassEndpoint, Skipped: true, Err: fmt.Errorf("endpoint %s: breaker open", e.Endpoint.ID)}
	}
	a := c.execute(ctx, w, req, e, callStart, hooks)
	c.report(br, e.Endpoint.ID, a.Class)
	if a.Class.Retryable() || a.Class == ClassCallerGone {
		level := slog.LevelWarn
		if a.Class == ClassCallerGone {
			level = slog.LevelDebug // a caller leaving is nobody's fault; the access log line records it
		}
		c.log.LogAttrs(ctx, level, "upstream attempt failed",
			slog.String("request_id", req.ID), slog.String("edge_id", e.ID),
			slog.String("class", a.Class.String()), slog.Int("status", a.Exec.HTTPStatus),
			slog.String("err", a.Exec.Error))
	}
	return a
}

// Hooks let the caller of Execute act at the moments of an attempt that
// succeeds. Any may be nil; each is called at most once, on the request's
// goroutine.
type Hooks struct {
	// Stored: the answer about to reach the caller is a response the
	// upstream stored (a.StoredID, known from the answer's first bytes; a
	// is the attempt so far); called before Committed, so that whatever is
	// bound to the id is bound before the caller can name it, however the
	// answer then ends.
	Stored func(a Attempt)
	// Committed: a 2xx answer is about to reach the caller, so the attempt
	// can no longer fail over (a post-cooldown probe has succeeded).
	Committed func()
	// Ending: the whole answer is in and its last bytes are not yet sent to
	// the caller; a is the attempt as it will be returned, but for its
	// duration. What is settled here is safe before the caller sees the end.
	Ending func(a Attempt)
	// Translated is the request's translation made before its claim
	// (Untranslatable): the first attempt on an edge it fits sends it
	// rather than translating again. nil for none.
	Translated *Translation
}

// committed calls Stored (for a stored answer) and Committed, a being
// the attempt so far.
func (h Hooks) committed(a Attempt) {
	if a.StoredID != "" && h.Stored != nil {
		h.Stored(a)
	}
	if h.Committed != nil {
		h.Committed()
	}
}

func (h Hooks) ending(a Attempt) {
	if h.Ending != nil {
		h.Ending(a)
	}
}

// report feeds an outcome to the endpoint's breaker. Only endpoint failures
// count against it; a 429 or a 4xx proves the endpoint is up.
func (c *Caller) report(br *breaker.Breaker, endpointID string, class Class) {
	before := br.State()
	switch class {
	case ClassEndpoint:
		br.Failure()
	case ClassCallerGone:
		br.Cancel()
	default:
		br.Success()
	}
	if after := br.State(); after != before {
		c.observe(Observation{EndpointID: endpointID, State: after})
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "endpoint breaker changed",
			slog.String("endpoint_id", endpointID), slog.String("state", after.String()))
	}
}
