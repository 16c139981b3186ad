package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Recorder receives the usage record of every authenticated request.
type Recorder interface {
	Record(ctx context.Context, rec sluice.UsageRecord)
}

// Handler runs requests through the pipeline. Safe for concurrent use.
type Handler struct {
	live   *Live
	keys   *authn.Keyring
	caller *upstream.Caller
	usage  Recorder
	log    *slog.Logger
}

// NewHandler assembles a Handler from its stages.
func NewHandler(live *Live, keys *authn.Keyring, caller *upstream.Caller, usage Recorder, log *slog.Logger) *Handler {
	return &Handler{live: live, keys: keys, caller: caller, usage: usage, log: log}
}

// Outcome is what the edge logs about a request that went through Serve.
type Outcome struct {
	KeyID      string
	Status     int // what the caller saw; 0 when Serve returned an uncommitted error
	Committed  bool
	Executions int
	Usage      sluice.Usage
}

// Serve authenticates, admits, routes and calls. When it returns an error
// with Outcome.Committed false, nothing was written and the caller of Serve
// renders the error in the caller's protocol.
func (h *Handler) Serve(ctx context.Context, w http.ResponseWriter, req *sluice.Request, token string) (Outcome, error) {
	p, err := h.keys.Authenticate(token)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{KeyID: p.Key.ID}
	snap := h.live.Load() // one catalog for the whole request
	edges, err := route(snap, p, req)
	if err != nil {
		h.settle(ctx, p, req, out, upstream.Result{}, err)
		return out, err
	}
	res, err := h.caller.Call(ctx, w, req, edges)
	out.Committed, out.Executions, out.Usage = res.Committed, len(res.Executions), res.Usage
	if res.Committed {
		out.Status = res.Executions[len(res.Executions)-1].HTTPStatus
	}
	h.settle(ctx, p, req, out, res, err)
	return out, err
}

// route checks the key's scope and returns the alias's candidate edges.
func route(snap *Snapshot, p *sluice.Principal, req *sluice.Request) ([]*sluice.Edge, error) {
	if !p.Key.Allows(req.Model) {
		return nil, &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not use model " + req.Model}
	}
	alias := snap.Routes.Alias(req.Model)
	if alias == nil || alias.Protocol != req.Protocol {
		return nil, &sluice.Error{Code: sluice.CodeModelNotFound, Msg: "the model " + req.Model + " does not exist or does not support this endpoint"}
	}
	edges, _ := snap.Routes.Candidates(req.Model)
	if len(edges) == 0 {
		return nil, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "no upstream can serve model " + req.Model}
	}
	return edges, nil
}

// settle records the request's usage. It runs even if the caller has gone:
// the tokens were spent.
func (h *Handler) settle(ctx context.Context, p *sluice.Principal, req *sluice.Request, out Outcome, res upstream.Result, callErr error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	rec := sluice.UsageRecord{
		RequestID:  req.ID,
		KeyID:      p.Key.ID,
		Tenant:     p.Key.Tenant,
		Alias:      req.Model,
		Protocol:   req.Protocol,
		Stream:     req.Stream,
		Status:     out.Status,
		Started:    req.Received,
		Latency:    time.Since(req.Received),
		TTFT:       res.TTFT,
		Usage:      res.Usage,
		Executions: res.Executions,
	}
	if se, ok := errors.AsType[*sluice.Error](callErr); ok && !out.Committed {
		rec.Code, rec.Status = se.Code, se.Code.Status()
	} else if errors.Is(callErr, context.Canceled) && !out.Committed {
		rec.Status = 499
	}
	h.usage.Record(ctx, rec)
}
