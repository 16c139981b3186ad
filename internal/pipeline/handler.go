package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Recorder receives the usage record of every authenticated request. It must
// not block for long, whatever ctx.
type Recorder interface {
	Record(ctx context.Context, rec sluice.UsageRecord)
}

// Handler runs requests through the pipeline. Safe for concurrent use.
type Handler struct {
	live      *Live
	capacity  *capacity.Engine
	statuses  *capacity.Statuses
	caller    *upstream.Caller
	usage     Recorder
	jobs      store.Jobs
	affinity  store.Affinity  // session-affinity bindings
	inspector store.Inspector // the capacity store's view, for affinity's placement
	view      *billing.View
	metrics   *metrics.Metrics
	log       *slog.Logger

	entitlements *Entitlements // end users' entitlements to quota profiles (profiles.go)
}

// Stages are the parts a Handler runs, built by app.
type Stages struct {
	Live      *Live
	Capacity  *capacity.Engine
	Statuses  *capacity.Statuses
	Caller    *upstream.Caller
	Usage     Recorder
	Jobs      store.Jobs      // async job bindings
	Affinity  store.Affinity  // session-affinity bindings; nil = strategy affinity orders as its fallback
	Inspector store.Inspector // read by affinity's placement
	Billing   *billing.View   // the balances admission reads (a catalog with billing)
	Metrics   *metrics.Metrics
	Log       *slog.Logger
	// Entitlements are the end users' entitlements to quota profiles, as
	// app's refresh keeps them; nil = none.
	Entitlements *Entitlements
}

// NewHandler assembles a Handler from its stages.
func NewHandler(s Stages) *Handler {
	return &Handler{live: s.Live, capacity: s.Capacity, statuses: s.Statuses, caller: s.Caller, usage: s.Usage, jobs: s.Jobs, affinity: s.Affinity, inspector: s.Inspector, view: s.Billing, metrics: s.Metrics, log: s.Log,
		entitlements: s.Entitlements}
}

// Outcome is what the edge logs about a request that went through Serve.
type Outcome struct {
	KeyID      string
	Status     int // what the caller saw; 0 when Serve returned an uncommitted error
	Committed  bool
	Executions []sluice.Execution
	Usage      sluice.Usage
	TTFT       time.Duration
	route      attemptRoute // the running attempt's expected accounts and fallback (call sets it)
	task       string       // the task type it runs as (admit sets it)
	class      int          // its priority class (Snapshot.class), fixed once its profile is known
	charging   *charging    // what admission fixed for its billing; nil without billing
	affinity   *affinity    // session affinity (Serve sets it); nil for none
}

// Serve admits, routes, waits for capacity and calls for the principal p,
// whom the caller of Serve authenticated from the request's headers before
// reading its body. When it returns an error with Outcome.Committed false,
// nothing was written and the caller of Serve renders the error in the
// caller's protocol.
func (h *Handler) Serve(ctx context.Context, w http.ResponseWriter, req *sluice.Request, p *sluice.Principal) (Outcome, error) {
	out := Outcome{KeyID: p.Key.ID}
	snap := h.live.Load() // one catalog for the whole request
	task, err := admit(snap, p.Key, req)
	out.task = task
	if err == nil {
		err = snap.resolveProfile(h.entitlements, p.Key, req)
	}
	out.class = snap.class(p.Key, req) // after the profile, which may raise it
	if err == nil {
		out.charging, err = h.charge(snap, p.Key, req, task)
	}
	var pin *store.Job // the binding of the response the request continues
	if err == nil {
		pin, err = h.previousResponse(ctx, p.Key, req)
	}
	var edges []*sluice.Edge
	if err == nil {
		edges, err = h.route(snap, p.Key, req, pin)
	}
	if err == nil {
		out.affinity = h.startAffinity(ctx, snap, p.Key, req, out.class, pin)
	}
	// An answer's usage is recorded (and safe) before its last bytes reach
	// the caller, so a caller that saw the end is never unbilled, even if
	// the process dies at once; a request that ends any other way is
	// settled after the call. A stored response is bound to its edge
	// before its first byte reaches the caller, so no answer leaves an id
	// the caller holds and Sluice does not.
	recorded := false
	hooks := upstream.Hooks{
		Stored: func(a upstream.Attempt) { h.bindResponse(ctx, p.Key, req, a) },
		Ending: func(a upstream.Attempt) {
			h.settle(ctx, snap, p, req, answered(out, a), nil)
			recorded = true
		},
	}
	if err == nil {
		err = h.call(ctx, snap, p.Key, req, task, edges, pin, &out, func(e *sluice.Edge, claim *capacity.Claim, start time.Time) (upstream.Attempt, bool) {
			return h.execute(ctx, w, req, e, start, claim, hooks), false
		})
	}
	if !recorded {
		h.settle(ctx, snap, p, req, out, err)
	}
	return out, err
}

// answered is out as it will be once the successful attempt a, whose
// answer is ending, is returned. The executions are a copy: out's slice
// gets a's final version later, and the record must not share it.
func answered(out Outcome, a upstream.Attempt) Outcome {
	out.route.stamp(&a.Exec)
	a.Exec.Status = sluice.ExecutionOK
	a.Exec.Duration = time.Since(a.Exec.Started)
	n := len(out.Executions)
	out.Executions = append(out.Executions[:n:n], a.Exec)
	out.answer(a)
	return out
}

// answer takes what the committed attempt a tells about the request.
func (o *Outcome) answer(a upstream.Attempt) {
	o.Committed, o.Usage, o.TTFT, o.Status = true, a.Exec.Usage, a.TTFT, a.Exec.HTTPStatus
}

// admit checks, in this order, after ingress authenticated the key from
// the headers: that the key is still what authenticated (the snapshot's
// keys follow every change to them, so one disabled, revoked, expired or
// rotated since is access_credential_inactive); that the alias exists
// (model_not_found, with the same message for every key, so a key learns
// nothing of aliases outside its scope); its scopes — the alias, the API
// path, the service tier, the task type (access_scope_denied); and that its
// policy is bound to accounts or a pool the catalog still has
// (access_key_unbound). It returns the request's task type.
func admit(snap *Snapshot, k *sluice.Key, req *sluice.Request) (string, error) {
	kp, ok := snap.keyActive(k, req.Received)
	if !ok {
		return "", errKeyInactive
	}
	k = kp.key // the scopes of the key as it is now
	if alias := snap.Routes.Alias(req.Model); alias == nil || !alias.Answers(req.Protocol) {
		return "", modelNotFound(req.Model)
	}
	if !k.Allows(req.Model) {
		return "", &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not use model " + req.Model}
	}
	if len(k.Paths) > 0 && !slices.Contains(k.Paths, sluice.KeyPaths[req.Protocol]) {
		return "", &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not call " + sluice.KeyPaths[req.Protocol]}
	}
	if req.ServiceTier != "" && len(k.ServiceTiers) > 0 && !slices.Contains(k.ServiceTiers, req.ServiceTier) {
		return "", &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not use service tier " + req.ServiceTier}
	}
	task, ok := snap.Task(k, req.Task)
	if !ok {
		return "", &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not declare task type " + req.Task}
	}
	if kp.unbound {
		return "", errKeyUnbound
	}
	return task, nil
}

var (
	errKeyInactive = &sluice.Error{Code: sluice.CodeCredentialInactive, Msg: "this API key is no longer active"}
	errKeyUnbound  = &sluice.Error{Code: sluice.CodeKeyUnbound, Msg: "this key's route policy names accounts or a pool that no longer exist"}
)

// modelNotFound is the answer for an alias that does not exist or does
// not speak the request's protocol.
func modelNotFound(model string) error {
	return &sluice.Error{Code: sluice.CodeModelNotFound, Msg: "the model " + model + " does not exist or does not support this endpoint"}
}

// route returns the alias's candidate edges that are in service (credential
// active, account not disabled) and that key's route policy allows, in the
// order of its strategy (its pool's, else the alias's); a preferred
// policy's bound accounts come first. A strict key whose bound accounts
// have no edge in service gets upstream_binding_unavailable. A request
// pinned to the edge of a stored response (pin, nil for none) may use that
// edge only, and gets upstream_binding_unavailable when it cannot serve.
func (h *Handler) route(snap *Snapshot, key *sluice.Key, req *sluice.Request, pin *store.Job) ([]*sluice.Edge, error) {
	alias := snap.Routes.Alias(req.Model)
	if alias == nil || !alias.Answers(req.Protocol) {
		return nil, modelNotFound(req.Model)
	}
	if alias.MaxOutputTokens > 0 && req.MaxTokens > alias.MaxOutputTokens {
		return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: fmt.Sprintf("%s must be at most %d for model %s", sluice.MaxTokensField[req.Protocol], alias.MaxOutputTokens, req.Model)}
	}
	rp := snap.policy(key, req)
	all, _ := snap.Routes.Candidates(req.Model, req.Protocol, rp.strategy)
	if req.Compact && !slices.ContainsFunc(all, compacts) {
		return nil, errCannotCompact(req.Model)
	}
	r := snap.ownerOf(key, req)
	own := snap.ownLevel(req.Model, rp, r) // owner.go: owned credentials serve their owner only
	edges := all[:0]
	for _, e := range all {
		if rp.allows(e.Account.ID) && ownership(e.Credential, r) == own && pinned(pin, e) && (!req.Compact || compacts(e)) && h.outOfService(snap, e) == "" {
			edges = append(edges, e)
		}
	}
	if len(edges) == 0 && own != platformOwn && pin == nil {
		if err := h.ownUnavailable(snap, key, req); err != nil {
			return nil, err
		}
	}
	switch {
	case len(edges) == 0 && pin != nil:
		return nil, errResponseBindingUnavailable
	case len(edges) == 0 && rp.mode == "strict":
		return nil, errBindingUnavailable
	case len(edges) == 0:
		return nil, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "no upstream can serve model " + req.Model}
	case rp.mode == "preferred":
		slices.SortStableFunc(edges, func(a, b *sluice.Edge) int { return rp.rank(a) - rp.rank(b) })
	}
	return edges, nil
}

// outOfService says why new claims may not go to e, "" when they may: a
// draining or disabled credential, an OAuth credential without a valid
// access token, or a disabled account, is "disabled" (a draining
// credential finishes what it runs but takes nothing new); an
// endpoint whose breaker another replica opened is "breaker_open" for the
// breaker's open period (this replica's own breaker then probes it).
func (h *Handler) outOfService(snap *Snapshot, e *sluice.Edge) string {
	if h.statuses.Credential(e.Credential.ID).State != sluice.UpstreamActive || h.statuses.Account(e.Account.ID).State == sluice.UpstreamDisabled || !e.Credential.InService() {
		return "disabled"
	}
	ep := h.statuses.Endpoint(e.Endpoint.ID)
	if ep.State != sluice.UpstreamOpen {
		return ""
	}
	if _, open := snap.BreakerSettings(e.Endpoint.ID); time.Since(ep.Since) < open {
		return "breaker_open"
	}
	return ""
}

// settle records the request's usage. It runs even if the caller has gone:
// the tokens were spent. (The Recorder bounds its own wait.) snap is the
// catalog the request was admitted under: its pool and its cost versions
// are the ones in force when it started, whatever was reloaded since.
func (h *Handler) settle(ctx context.Context, snap *Snapshot, p *sluice.Principal, req *sluice.Request, out Outcome, callErr error) {
	ctx = context.WithoutCancel(ctx)
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
		TTFT:       out.TTFT,
		Usage:      out.Usage,
		Executions: out.Executions,
		EndUser:    req.User,
		TaskType:   out.task,
		Profile:    req.Profile,
		Priority:   sluice.Priorities[out.class],
		Affinity:   out.affinity.placement(),
	}
	h.countCached(req, out.Executions)
	pol := snap.policy(p.Key, req)
	rec.Pool = pol.pool
	if n := len(out.Executions); n > 0 && out.Executions[n-1].Fallback != "" {
		rec.Pool = pol.fallbackPool
	}
	rec.Billing = out.charging.settle(h.view, snap.billing.costTable(), req, &out, nil)
	if se, ok := errors.AsType[*sluice.Error](callErr); ok && !out.Committed {
		rec.Code, rec.Status = se.Code, se.Code.Status()
	} else if errors.Is(callErr, context.Canceled) && !out.Committed {
		rec.Status = 499
	}
	h.usage.Record(ctx, rec)
}
