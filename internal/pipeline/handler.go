package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/respcache"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/internal/validate"
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
	tracer    *telemetry.Tracer // nil: tracing off
	log       *slog.Logger
	// queueWaits observes each request's wait for capacity, by class
	// (index in sluice.Priorities); none without Metrics.
	queueWaits metrics.ClassWaits
	// executions counts upstream attempts by endpoint and failure class;
	// none without Metrics.
	executions *metrics.ExecutionCounts

	entitlements *Entitlements // end users' entitlements to quota profiles (profiles.go)
	suspensions  Suspensions   // suspended billing accounts and tenants (admit.go)

	caches  Caches            // the response cache's backends (cache.go)
	flights respcache.Flights // identical misses in flight on this replica
	// cacheCounts are sluice_cache_requests_total's series by result
	// (cacheHit, cacheMiss, cacheBypass); nil without Metrics.
	cacheCounts []prometheus.Counter
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
	Tracer    *telemetry.Tracer // nil: tracing off
	Log       *slog.Logger
	// Entitlements are the end users' entitlements to quota profiles, as
	// app's refresh keeps them; nil = none.
	Entitlements *Entitlements
	// Suspensions are the suspended billing accounts and tenants, whose
	// keys admission refuses; nil = none.
	Suspensions Suspensions
	// Caches are the response cache's backends; without Memory, the
	// catalog's cache settings are ignored.
	Caches Caches
}

// NewHandler assembles a Handler from its stages.
func NewHandler(s Stages) *Handler {
	h := &Handler{live: s.Live, capacity: s.Capacity, statuses: s.Statuses, caller: s.Caller, usage: s.Usage, jobs: s.Jobs, affinity: s.Affinity, inspector: s.Inspector, view: s.Billing, metrics: s.Metrics, tracer: s.Tracer, log: s.Log,
		entitlements: s.Entitlements, suspensions: s.Suspensions, caches: s.Caches}
	if s.Metrics != nil {
		for _, result := range []string{"hit", "miss", "bypass"} {
			h.cacheCounts = append(h.cacheCounts, s.Metrics.CacheRequests.WithLabelValues(result))
		}
		h.queueWaits = s.Metrics.ClassWaits(sluice.Priorities)
		var classes []string
		for c := upstream.ClassNone; c <= upstream.ClassCallerGone; c++ {
			classes = append(classes, c.String())
		}
		h.executions = s.Metrics.ExecutionCounts(classes)
	}
	return h
}

// Outcome is what the edge logs about a request that went through Serve.
type Outcome struct {
	KeyID      string
	Status     int // what the caller saw; 0 when Serve returned an uncommitted error
	Committed  bool
	Executions []sluice.Execution
	Usage      sluice.Usage
	TTFT       time.Duration
	route      attemptRoute // the running attempt's expected accounts and fallback (attempts.grant sets it)
}

// passage is one request on its way through the stages: Serve and
// SubmitJob differ only in what an attempt does (the try they give call)
// and when the usage is recorded. It lives on its caller's stack.
type passage struct {
	p *sluice.Principal
	// adm is the request's admission, as far as it got when it was
	// refused: the one its record is settled under, whatever reload
	// happened while it waited (its attempts rebase a copy of their own).
	adm admission
	err error // why it ended without an answer
	// restore is the redaction session whose masked values its answer
	// gets back (redact.go); nil for none.
	restore *redact.Session
	// cache is its use of the response cache (cache.go); nil for none.
	cache *cacheUse
	// translated is its body translated before the claim, for the first
	// attempt it fits (upstream.Untranslatable); nil for none.
	translated *upstream.Translation
	attempts
}

// begin starts r, the request req of principal p, with the stages before
// the call, in order: admit (scopes, profile, class, billing), validation
// of its body (validate.go), redaction of its text (redact.go), the stored
// response it continues, route, whether some edge can carry it
// (validate.go), session affinity. r.err is set when one refuses the
// request. (r is the caller's, so that it can stay on the caller's stack.)
func (h *Handler) begin(ctx context.Context, r *passage, req *sluice.Request, p *sluice.Principal) {
	*r = passage{p: p, attempts: attempts{h: h, ctx: ctx, req: req, out: Outcome{KeyID: p.Key.ID}}}
	snap := h.live.Load() // one catalog for the whole request
	r.adm, r.err = h.admit(snap, p.Key, req)
	if r.err == nil {
		r.err = h.validate(&r.adm, req)
	}
	if r.err == nil {
		r.restore, r.err = h.redact(&r.adm, req)
	}
	if r.err == nil {
		r.pin, r.err = h.previousResponse(ctx, p.Key, req)
	}
	if r.err == nil {
		r.edges, r.err = h.route(&r.adm, req, r.pin)
	}
	if r.err == nil {
		r.translated, r.err = h.translatable(req, r.edges)
	}
	if r.err == nil {
		r.affinity = h.startAffinity(ctx, &r.adm, req, r.pin)
	}
}

// Serve admits, routes, waits for capacity and calls for the principal p,
// whom the caller of Serve authenticated from the request's headers before
// reading its body. When it returns an error with Outcome.Committed false,
// nothing was written and the caller of Serve renders the error in the
// caller's protocol.
func (h *Handler) Serve(ctx context.Context, w http.ResponseWriter, req *sluice.Request, p *sluice.Principal) (Outcome, error) {
	ctx, w = h.tracer.Request(ctx, w, req, p.Key)
	defer h.tracer.End(ctx)
	var r passage
	h.begin(ctx, &r, req, p)
	// An answer's usage is recorded (and safe) before its last bytes reach
	// the caller, so a caller that saw the end is never unbilled, even if
	// the process dies at once; a request that ends any other way is
	// settled after the call. A stored response is bound to its edge
	// before its first byte reaches the caller, so no answer leaves an id
	// the caller holds and Sluice does not.
	recorded := false
	if r.err == nil {
		r.cache = h.startCache(&r.adm, req, r.restore != nil)
	}
	// A request its response cache answers is settled as a hit, then
	// replayed (recorded first, like any answer); a miss's answer is
	// captured on its way to the caller and kept once the call ends
	// (cache.go).
	if r.cache != nil {
		if e := h.lookup(ctx, r.cache); e != nil {
			r.out.Status, r.out.Committed, r.out.TTFT = http.StatusOK, true, time.Since(req.Received)
			h.settle(ctx, &r, r.out, nil)
			replay(w, e)
			return r.out, nil
		}
		w.Header().Set(CacheHeader, "miss")
		r.cache.capture = &capture{ResponseWriter: w, limit: r.cache.settings.EntryBytes()}
		w = r.cache.capture
	}
	if r.err == nil {
		hooks := upstream.Hooks{
			Translated: r.translated,
			Stored:     func(a upstream.Attempt) { h.bindResponse(ctx, &r.adm, req, a) },
			Ending: func(a upstream.Attempt) {
				h.settle(ctx, &r, answered(r.out, a), nil)
				recorded = true
			},
		}
		answer := w
		var restoring *restorer
		if r.restore != nil {
			restoring = newRestorer(w, r.restore, req.Protocol)
			answer = restoring
		}
		r.err = h.call(ctx, &r, func(e *sluice.Edge, claim *capacity.Claim, start time.Time) (upstream.Attempt, bool) {
			return h.execute(ctx, answer, req, e, start, claim, hooks), false
		})
		if restoring != nil {
			restoring.finish()
		}
		if r.cache != nil {
			h.keep(ctx, r.cache, &r)
		}
	}
	if !recorded {
		h.settle(ctx, &r, r.out, r.err)
	}
	return r.out, r.err
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

// route returns the alias's candidate edges that are in service (credential
// active, account not disabled) and that the request's route policy and
// ownership allow, in the order of its strategy (its pool's, else the
// alias's); a preferred policy's bound accounts come first. A strict key
// whose bound accounts have no edge in service gets
// upstream_binding_unavailable. A request pinned to the edge of a stored
// response (pin, nil for none) may use that edge only, and gets
// upstream_binding_unavailable when it cannot serve.
func (h *Handler) route(a *admission, req *sluice.Request, pin *store.Job) ([]*sluice.Edge, error) {
	alias := a.alias
	if alias == nil || !alias.Answers(req.Protocol) {
		return nil, modelNotFound(req.Model)
	}
	if ref := validate.MaxOutput(sluice.MaxTokensField[req.Protocol], req.MaxTokens, alias.MaxOutputTokens, req.Model); ref != nil {
		return nil, h.invalid(req, ref)
	}
	rp := a.policy
	all, _ := a.snap.Routes.Candidates(req.Model, req.Protocol, rp.strategy)
	all, err := h.images(a, req, all)
	if err != nil {
		return nil, err
	}
	if req.Compact && !slices.ContainsFunc(all, compacts) {
		return nil, errCannotCompact(req.Model)
	}
	edges := all[:0]
	for _, e := range all {
		if rp.allows(e.Account.ID) && ownership(e.Credential, a.owner) == a.own && pinned(pin, e) && (!req.Compact || compacts(e)) && h.outOfService(a.snap, e) == "" {
			edges = append(edges, e)
		}
	}
	if len(edges) == 0 && a.ownsRoute() && pin == nil {
		if err := h.ownUnavailable(a); err != nil {
			return nil, err
		}
	}
	switch {
	case len(edges) == 0 && pin != nil:
		return nil, errResponseBindingUnavailable
	case len(edges) == 0 && rp.mode == sluice.PolicyStrict:
		return nil, errBindingUnavailable
	case len(edges) == 0:
		return nil, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "no upstream can serve model " + req.Model}
	case rp.mode == sluice.PolicyPreferred:
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

// settle records the usage of request r, which ended with out and callErr.
// It runs even if the caller has gone: the tokens were spent. (The
// Recorder bounds its own wait.) The request's admission is the one of
// the catalog it was admitted under: its pool and its cost versions are
// the ones in force when it started, whatever was reloaded since.
func (h *Handler) settle(ctx context.Context, r *passage, out Outcome, callErr error) {
	ctx = context.WithoutCancel(ctx)
	req, k := r.req, r.p.Key
	rec := sluice.UsageRecord{
		RequestID:  req.ID,
		KeyID:      k.ID,
		Tenant:     k.Tenant,
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
		Affinity:   r.affinity.placement(),
	}
	h.countCached(req, out.Executions)
	a := &r.adm
	hit := r.cache != nil && r.cache.hit != nil
	rec.TaskType, rec.Profile, rec.Priority = a.task, a.profile, sluice.Priorities[a.class]
	if a.policy != nil { // nil for a request refused before its policy was known
		rec.Pool = a.policy.pool
		if n := len(out.Executions); n > 0 && out.Executions[n-1].Fallback != "" {
			rec.Pool = a.policy.fallbackPool
		}
	}
	if hit {
		rec.CacheHit = true
		rec.Billing = a.charging.hitCharge(h.view, req, r.cache.hit, r.cache.settings.Charge)
		h.saved(a.snap.billing.costTable(), req, r.cache.hit)
	} else {
		rec.Billing = a.charging.settle(h.view, a.snap.billing.costTable(), req, &out, nil)
	}
	if se, ok := errors.AsType[*sluice.Error](callErr); ok && !out.Committed {
		rec.Code, rec.Status = se.Code, se.Code.Status()
	} else if errors.Is(callErr, context.Canceled) && !out.Committed {
		rec.Status = 499
	}
	h.tracer.Settled(ctx, &rec)
	h.usage.Record(ctx, rec)
}
