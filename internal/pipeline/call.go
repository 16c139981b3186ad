package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/upstream"
)

// call runs attempts until one answers or none is left: each attempt first
// claims capacity on one of the remaining edges (waiting in the queue when
// none has room), then executes there and releases the claim with its
// outcome. What a failure means decides which edges remain: a rate limit
// keeps them all (its unit is now cooling, so the store skips it until its
// probe, and the request waits or goes to another unit — never to a sibling
// credential of the cooled account); an auth failure disables the credential;
// a billing failure disables the account; an endpoint failure drops the edge.
// Nothing is retried after the first byte reached the caller, nor after an
// attempt that says it is final.
//
// The request's route policy filters and orders the edges the engine waits
// for (see attempts.plan): a strict key's requests wait for their bound
// accounts only; a preferred key's wait for theirs until the policy's wait
// passes or they are known unusable, and then for the fallback's as well,
// bound first. A request pinned to a stored response's edge (r.pin, see
// route) waits for that edge alone, like a strict key's. Session affinity
// (r.affinity) uses the same mechanism inside the policy's order: its
// bound account first and alone, until the class's affinity wait passes or
// the account is known unusable or cooling, then the rest by free room.
// The state the attempts change is an attempts value; call only drives
// its transitions.
func (h *Handler) call(ctx context.Context, r *passage, try tryFunc) error {
	start := time.Now() // when the first attempt began
	at := &r.attempts
	at.start(&r.adm, start)
	var waited time.Duration // in the queue, over every ticket: observed once, however the request ends
	defer func() { h.queueWaits.Observe(at.cur.class, waited); h.tracer.Waited(ctx, waited) }()
	for {
		acq, until, sticky := at.ticket()
		var claim *capacity.Claim
		var err error
		asked := time.Now()
		if sticky {
			claim, err = h.capacity.WaitOpen(ctx, acq, until, at.plan) // a cooling bound account is left at once
		} else {
			claim, err = h.capacity.Wait(ctx, acq, until, at.plan)
		}
		waited += time.Since(asked)
		if err != nil {
			if err = at.waitFailed(err, sticky, until); err != nil {
				return err
			}
			continue
		}
		if err := h.granted(at.cur.charging, r.req); err != nil {
			claim.Release(ctx, store.Outcome{}) // nothing ran
			return err
		}
		e := at.current[claim.Index]
		h.affinityGranted(ctx, at.cur.snap, r.req, r.affinity, e)
		at.grant(e)
		h.tracer.Granted(ctx, waited, at.out.route.fallback)
		a, final := h.run(at.cur.snap.Routes.InFlight(e.Account.ID), try, e, claim, start)
		if done, err := at.ran(e, a, final); done {
			return err
		}
		claim.WaitReleased() // the next try must see this one's outcome (a cooldown) in the store
		h.react(ctx, e, a)
		at.failedOn(e, a)
	}
}

// attempts is a request's route (what begin found) and the state of its
// attempts, which call changes through the named transitions below
// (start, plan, waitFailed, grant, ran, failedOn), each of which says what
// it changes. It holds no pointer into the passage around it, so both
// stay on the stack of Serve or SubmitJob (the capacity engine calls plan
// and keeps nothing).
type attempts struct {
	h        *Handler
	ctx      context.Context
	req      *sluice.Request
	pin      *store.Job     // the binding of the stored response the request continues; nil for none
	edges    []*sluice.Edge // its candidate edges (route)
	affinity *affinity      // session affinity; nil for none
	out      Outcome

	cur         admission // the request's admission under the catalog in force (rebased after a reload)
	deadline    time.Time // the end of its class's wait
	preferUntil time.Time // a preferred request waits for its bound accounts alone until then

	failed  []failure      // what earlier attempts ruled out
	current []*sluice.Edge // the last plan's edges: a claim's Index points into it
	widened string         // why a preferred request may use its fallback; "" while it may not
	stopped error          // why the request may not go on, found by a plan (its key changed while it waited)
	tried   int            // attempts run
	tickets int            // tickets taken in the queue
	last    upstream.Attempt
}

// start is the transition before the first attempt, begun at start, of
// a request admitted as adm: its deadlines are set.
func (at *attempts) start(adm *admission, start time.Time) {
	at.cur = *adm
	at.deadline = start.Add(waitFor(adm.snap.Wait(adm.class), at.req))
	at.preferUntil = start.Add(adm.follow.wait)
}

// preferred reports whether the request still waits for its preferred
// policy's bound accounts alone.
func (at *attempts) preferred() bool {
	return at.cur.follow.mode == sluice.PolicyPreferred && at.widened == ""
}

// ticket is the next ticket in the queue, the time to wait for it until,
// and whether it waits for the affinity's bound account only (sticky).
func (at *attempts) ticket() (acq store.Acquire, until time.Time, sticky bool) {
	a, req := &at.cur, at.req
	until = at.deadline
	if at.preferred() && at.preferUntil.Before(until) {
		until = at.preferUntil
	}
	if sticky = at.affinity.holds(); sticky && at.affinity.until.Before(until) {
		until = at.affinity.until
	}
	k := a.key()
	acq = store.Acquire{
		Ticket: req.ID + "." + strconv.Itoa(at.tickets), Queue: req.Model, Class: a.class, Tokens: req.Reserve(),
		Tenant: k.Tenant, Weight: a.snap.Weight(k.Tenant),
	}
	at.tickets++
	return acq, until, sticky
}

// plan is the capacity engine's plan (capacity.Plan), called before every
// try to claim, so a request that waits sees credentials added or disabled
// meanwhile: a reload rebases the admission on the new catalog and routes
// again (a key no longer active stops the request, and so does its tenant
// or billing account suspended meanwhile). It sets current to the
// edges offered, in order, and returns their candidates: the edges the
// policy and the affinity let the request wait for now, less those ruled
// out or out of service.
func (at *attempts) plan() (string, []store.Candidate) {
	h := at.h
	if s := h.live.Load(); s != at.cur.snap {
		if err := at.cur.rebase(s, time.Now()); err != nil {
			at.stopped = err
			return "", nil
		}
		at.edges, _ = h.route(&at.cur, at.req, at.pin)
		at.affinity.rerouted()
	}
	a := &at.cur
	if err := h.suspended(a.key()); err != nil { // suspended while it waited: it is not served
		at.stopped = err
		return "", nil
	}
	rp := a.follow
	h.order(at.ctx, a.snap, at.req, rp, at.affinity, at.edges, at.failed)
	at.current = at.current[:0]
	var cands []store.Candidate
	unusable := "" // why the first bound edge left out was
	for _, e := range at.edges {
		if at.affinity.holds() && !at.affinity.sticky(e) {
			break // order left the request holding: a sticky edge is usable
		}
		bound := rp.binds() && rp.bound(e.Account.ID)
		if at.preferred() && !bound {
			if len(cands) > 0 {
				break // the bound edges come first; the fallback waits its turn
			}
			// No bound edge can serve: fall back at once.
			at.widened = cmp.Or(unusable, h.accountsOutOfService(a.snap, at.req, rp, rp.bound))
		}
		if why := h.unusable(a.snap, e, at.failed); why != "" {
			if bound && unusable == "" {
				unusable = why
			}
			continue
		}
		c := a.snap.Candidate(e)
		c.Limits = a.snap.edgeLimits(e, a.limits)
		if rp.mode == sluice.PolicyPreferred && !bound {
			c.Limits = a.snap.edgeLimits(e, a.fallbackLimits)
		}
		at.current = append(at.current, e)
		cands = append(cands, c)
	}
	return a.snap.AliasDomain(a.model), cands
}

// waitFailed is the transition of a wait that ended without a claim (err,
// for a ticket that waited until until, for the bound account alone when
// sticky): nil when the request waits again — having left its affinity's
// bound account, or widened to its policy's fallback — else the error that
// answers it.
func (at *attempts) waitFailed(err error, sticky bool, until time.Time) error {
	timedOut := errors.Is(err, &sluice.Error{Code: sluice.CodeCapacityWaitTimeout})
	switch {
	case at.stopped != nil:
		return at.stopped
	case errors.Is(err, capacity.ErrRefused):
		return errConcurrencyExceeded // the key's own limit refuses rather than waits
	case sticky && at.affinity.holds() && timedOut:
		// The bound account had no room within the affinity wait, or is cooling.
		at.affinity.leave(waitedFor(err))
		return nil
	case until != at.deadline && timedOut:
		// The bound accounts had no room within the policy's wait.
		at.widened = cmp.Or(at.widened, waitedFor(err))
		return nil
	case errors.Is(err, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable}):
		return at.noneLeft(err)
	}
	return err
}

// noneLeft says why no candidate is left (err, the engine's
// no_upstream_available), most specific first.
func (at *attempts) noneLeft(err error) error {
	if own := at.h.ownUnavailable(&at.cur); own != nil {
		return own // the owner's own credentials are all out of service (owner.go)
	}
	switch {
	case at.tried > 0:
		return at.last.Failure() // every edge was tried: the last failure says most
	case at.pin != nil:
		return errResponseBindingUnavailable
	case at.cur.follow.mode == sluice.PolicyStrict:
		return errBindingUnavailable
	}
	return err
}

// grant is the transition of a claim granted on e: the attempt about to
// run there is counted, and its route (what the policy expected of it) set
// on the outcome.
func (at *attempts) grant(e *sluice.Edge) {
	at.tried++
	rp := at.cur.follow
	at.out.route = attemptRoute{}
	if rp.binds() {
		at.out.route.expected = rp.accounts
		if !rp.bound(e.Account.ID) {
			at.out.route.fallback = at.widened
		}
	}
}

// ran is the transition of attempt a run on e (final: no other edge may be
// tried): its execution is recorded on the outcome; done when the request
// ends with it, with the error that answers it (nil for an answer).
func (at *attempts) ran(e *sluice.Edge, a upstream.Attempt, final bool) (done bool, err error) {
	rp := at.cur.follow
	if !a.Skipped {
		at.out.route.stamp(&a.Exec)
		at.out.Executions = append(at.out.Executions, a.Exec)
		at.h.executions.Add(attemptCounted(&a.Exec, a.Class))
		if a.Exec.Fallback != "" {
			at.h.metrics.PolicyFallbacks.WithLabelValues(at.cur.key().ID, a.Exec.Fallback).Inc()
		}
		if rp.mode == sluice.PolicyStrict && !rp.bound(a.Exec.AccountID) {
			// Defence in depth: plan offers a strict key nothing else.
			at.h.log.LogAttrs(at.ctx, slog.LevelError, "a strict route policy was not held", slog.String("request_id", at.req.ID),
				slog.String("key_id", at.cur.key().ID), slog.String("account_id", a.Exec.AccountID))
			if !a.Committed {
				return true, &sluice.Error{Code: sluice.CodeInternal, Msg: "internal error", Err: errors.New("strict route policy not held")}
			}
		}
	}
	if a.Committed {
		at.out.answer(a)
		return true, a.Err
	}
	if !a.Skipped && (final || !a.Class.Retryable()) {
		return true, a.Failure()
	}
	return false, nil
}

// failedOn is the transition of attempt a on e that failed and may be
// retried elsewhere: a preferred request whose bound account failed falls
// back, an affinity's bound account that failed is left, and e (or its
// credential or account, by the failure's class) is ruled out — except
// after a rate limit, which cools the unit: the store skips it until its
// probe.
func (at *attempts) failedOn(e *sluice.Edge, a upstream.Attempt) {
	if at.preferred() && at.cur.follow.bound(e.Account.ID) {
		at.widened = fallbackReason(a)
	}
	at.affinity.failedOn(e, fallbackReason(a))
	if a.Class != upstream.ClassRate {
		at.failed = append(at.failed, failure{edge: e, class: a.Class})
	}
	at.last = a
}

// waitedFor is the fallback reason of a preferred request whose wait for
// its bound accounts timed out with err: they were cooling, or full.
func waitedFor(err error) string {
	if errors.Is(err, capacity.ErrCooling) {
		return "cooling"
	}
	return "no_room"
}

// accountsOutOfService says why the accounts for which match holds have
// no edge among the request's: the reason of the first edge of theirs that
// is out of service (route left it out), "disabled" when none is (they
// have no edge left for the alias, or are not the key's to use). Used for
// a preferred policy's bound accounts (rp.bound) and a seed's bound
// account (affinity's boundGone).
func (h *Handler) accountsOutOfService(snap *Snapshot, req *sluice.Request, rp *routePolicy, match func(account string) bool) string {
	all, _ := snap.Routes.Candidates(req.Model, req.Protocol, rp.strategy)
	for _, e := range all {
		if match(e.Account.ID) {
			if why := h.outOfService(snap, e); why != "" {
				return why
			}
		}
	}
	return "disabled"
}

// errBindingUnavailable answers a strict key none of whose bound accounts
// can take a request: every one disabled, removed, or with all its
// credentials out of service.
var errBindingUnavailable = &sluice.Error{Code: sluice.CodeBindingUnavailable, Msg: "the upstream accounts this key is bound to are unavailable"}

// run runs one attempt, counted in the in-flight count of its account
// (least-inflight orders by it) while it runs.
func (h *Handler) run(inflight *atomic.Int64, try tryFunc, e *sluice.Edge, claim *capacity.Claim, start time.Time) (upstream.Attempt, bool) {
	inflight.Add(1)
	defer inflight.Add(-1)
	return try(e, claim, start)
}

// attemptCounted is what the metrics count of the execution x, which
// ended in class: where it ran, and the prompt tokens it was measured to
// use.
func attemptCounted(x *sluice.Execution, class upstream.Class) metrics.Attempt {
	a := metrics.Attempt{Endpoint: x.EndpointID, Account: x.AccountID, Credential: x.CredentialID, Class: int(class)}
	if x.Usage.Measured {
		a.PromptTokens, a.CachedTokens = x.Usage.PromptTokens, x.Usage.CachedTokens
	}
	return a
}

// attemptRoute is what the route policy says of the running attempt.
type attemptRoute struct {
	expected []string // the policy's accounts (strict, preferred)
	fallback string   // why the attempt runs outside them; "" when it does not
}

// stamp records the route of the attempt on its execution.
func (r attemptRoute) stamp(x *sluice.Execution) { x.Expected, x.Fallback = r.expected, r.fallback }

// fallbackReason is why a preferred request falls back after its attempt a
// on a bound account failed.
func fallbackReason(a upstream.Attempt) string {
	switch {
	case a.Skipped:
		return "breaker_open"
	case a.Class == upstream.ClassRate:
		return "cooling"
	}
	return "failed:" + a.Class.String()
}

// unusable says why e may not be planned for now ("" when it may): ruled
// out by an earlier failure of this request, its credential or account
// disabled (or draining), or its endpoint's breaker open.
func (h *Handler) unusable(snap *Snapshot, e *sluice.Edge, failed []failure) string {
	if f, ok := ruledOut(failed, e); ok {
		return "failed:" + f.class.String()
	}
	return h.outOfService(snap, e)
}

// tryFunc runs one attempt on the claimed edge e and releases the claim (or
// hands it over) — also when the attempt panics, so a claim is released
// exactly once on every path. The release goes on in the background, off
// the answer's path; call waits for it only before another attempt. start
// is when the request's first attempt began. final says that no other edge
// may be tried, whatever the class.
type tryFunc func(e *sluice.Edge, claim *capacity.Claim, start time.Time) (a upstream.Attempt, final bool)

// execute runs one attempt of a request that answers at once (chat,
// embeddings) and releases the claim with its outcome. hooks are called as
// upstream.Hooks says; execute sets Committed.
func (h *Handler) execute(ctx context.Context, w http.ResponseWriter, req *sluice.Request, e *sluice.Edge, start time.Time, claim *capacity.Claim, hooks upstream.Hooks) (a upstream.Attempt) {
	defer func() { claim.Release(ctx, outcome(a)) }() // on a panic a is zero: released with no outcome
	if claim.Probe {
		// The account is open once the probe's answer starts, not when a
		// long stream ends.
		hooks.Committed = func() { claim.ProbeSucceeded(ctx) }
	}
	actx, span := h.tracer.Attempt(ctx, e)
	defer func() { span.End(&a.Exec, a.Class.String(), a.Err) }()
	a = h.caller.Execute(actx, w, req, e, start, hooks)
	if a.Dropped != nil && h.metrics != nil {
		for _, field := range a.Dropped {
			h.metrics.TranslationDropped.WithLabelValues(string(req.Protocol), string(e.Protocol), field).Inc()
		}
	}
	return a
}

// failure is an attempt that rules edges out for the rest of the request.
type failure struct {
	edge  *sluice.Edge
	class upstream.Class
}

// ruledOut returns the earlier failure that excludes e, if one does: an
// auth failure rules out its credential, a billing failure its account,
// anything else just that edge. IDs, not pointers, so a reload mid-request
// keeps the rule.
func ruledOut(failed []failure, e *sluice.Edge) (failure, bool) {
	for _, f := range failed {
		switch {
		case f.class == upstream.ClassAuth && f.edge.Credential.ID == e.Credential.ID,
			f.class == upstream.ClassBilling && f.edge.Account.ID == e.Account.ID,
			f.edge.ID == e.ID:
			return f, true
		}
	}
	return failure{}, false
}

// outcome is what an attempt tells the claim's unit: the tokens it used, and
// whether it was rate limited. A success whose rate-limit headers say the
// window is empty cools the unit until the window resets, so the next
// request waits instead of earning a 429.
func outcome(a upstream.Attempt) store.Outcome {
	out := store.Outcome{Tokens: int(a.Exec.Usage.TotalTokens)} // corrects the TPM reservation when measured
	switch {
	case a.Class == upstream.ClassRate:
		out.RateLimited, out.RetryAfter, out.Cool = true, a.RetryAfter, rateScope(&a.Exec, a.ModelScoped)
	case a.Class == upstream.ClassNone && a.Exhausted > 0:
		out.RateLimited, out.RetryAfter = true, a.Exhausted
	default:
		out.Success = a.Class == upstream.ClassNone && !a.Local // a local answer proves nothing of the unit
	}
	return out
}

// react records what a failure says about the credential or its account,
// so every replica stops using it.
func (h *Handler) react(ctx context.Context, e *sluice.Edge, a upstream.Attempt) {
	kind, id := "", ""
	switch a.Class {
	case upstream.ClassAuth:
		kind, id = capacity.KindCredential, e.Credential.ID
	case upstream.ClassBilling:
		kind, id = capacity.KindAccount, e.Account.ID
	default:
		return
	}
	st := store.Status{State: sluice.UpstreamDisabled, Reason: fmt.Sprintf("%s: upstream answered %d", a.Class, a.Exec.HTTPStatus)}
	if err := h.statuses.Set(context.WithoutCancel(ctx), kind, id, st); err != nil {
		h.log.Error("recording a disabled "+kind+" failed", "id", id, "err", err)
		return
	}
	h.log.Warn(kind+" disabled by an upstream failure", kind+"_id", id, "reason", st.Reason)
}
