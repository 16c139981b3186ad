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
// The key's route policy filters and orders the edges the engine waits for
// (see plan): a strict key's requests wait for their bound accounts only; a
// preferred key's wait for theirs until the policy's wait passes or they
// are known unusable, and then for the fallback's as well, bound first. A
// request pinned to a stored response's edge (pin, see route) waits for
// that edge alone, like a strict key's. Session affinity (out.affinity)
// uses the same mechanism inside the policy's order: its bound account
// first and alone, until the class's affinity wait passes or the account
// is known unusable or cooling, then the rest by free room.
func (h *Handler) call(ctx context.Context, snap *Snapshot, key *sluice.Key, req *sluice.Request, task string, edges []*sluice.Edge, pin *store.Job, out *Outcome, try tryFunc) error {
	start := time.Now()
	deadline := start.Add(waitFor(snap.Wait(out.class), req))
	var failed []failure // what earlier attempts of this request ruled out
	// plan is re-run before every try to claim capacity, so a request that
	// waits sees credentials added or disabled meanwhile (a reload swaps the
	// snapshot; statuses change on any replica).
	var current []*sluice.Edge
	limits := snap.placeLimits(out.charging.limits(snap.Limits(key, req, task)))
	rp := snap.callPolicy(key, req) // owner.go
	fallbackLimits := snap.fallbackLimits(rp, limits)
	preferUntil := start.Add(rp.wait)
	widened := ""     // why a preferred request may use its fallback; "" while it may not
	inactive := false // the key changed while the request waited
	aff := out.affinity
	plan := func() (string, []store.Candidate) {
		if s := h.live.Load(); s != snap {
			snap = s
			if _, ok := snap.keyActive(key, time.Now()); !ok {
				inactive = true
				return "", nil
			}
			edges, _ = h.route(snap, key, req, pin)
			limits = snap.placeLimits(out.charging.limits(snap.Limits(key, req, task)))
			rp = snap.callPolicy(key, req)
			fallbackLimits = snap.fallbackLimits(rp, limits)
			aff.rerouted()
		}
		h.order(ctx, snap, req, rp, aff, edges, failed)
		current = current[:0]
		var cands []store.Candidate
		unusable := "" // why the first bound edge left out was
		for _, e := range edges {
			if aff.holds() && !aff.sticky(e) {
				break // order left the request holding: a sticky edge is usable
			}
			bound := rp.binds() && rp.bound(e.Account.ID)
			if rp.mode == "preferred" && !bound && widened == "" {
				if len(cands) > 0 {
					break // the bound edges come first; the fallback waits its turn
				}
				// No bound edge can serve: fall back at once.
				widened = cmp.Or(unusable, h.accountsOutOfService(snap, req, rp, rp.bound))
			}
			if why := h.unusable(snap, e, failed); why != "" {
				if bound && unusable == "" {
					unusable = why
				}
				continue
			}
			c := snap.Candidate(e)
			c.Limits = snap.edgeLimits(e, limits)
			if rp.mode == "preferred" && !bound {
				c.Limits = snap.edgeLimits(e, fallbackLimits)
			}
			current = append(current, e)
			cands = append(cands, c)
		}
		return snap.AliasDomain(req.Model), cands
	}
	var last upstream.Attempt
	for n, tickets := 0, 0; ; tickets++ {
		until := deadline
		if rp.mode == "preferred" && widened == "" && preferUntil.Before(deadline) {
			until = preferUntil
		}
		acq := store.Acquire{
			Ticket: req.ID + "." + strconv.Itoa(tickets), Queue: req.Model, Class: out.class, Tokens: req.Tokens,
			Tenant: key.Tenant, Weight: snap.Weight(key.Tenant),
		}
		// Called directly, not through a func value: plan (and all it
		// captures) then stays off the heap.
		var claim *capacity.Claim
		var err error
		sticky := aff.holds()
		if sticky {
			if aff.until.Before(until) {
				until = aff.until
			}
			claim, err = h.capacity.WaitOpen(ctx, acq, until, plan) // a cooling bound account is left at once
		} else {
			claim, err = h.capacity.Wait(ctx, acq, until, plan)
		}
		switch {
		case err == nil:
		case inactive:
			return errKeyInactive
		case errors.Is(err, capacity.ErrRefused):
			return errConcurrencyExceeded // the key's own limit refuses rather than waits
		case sticky && aff.holds() && errors.Is(err, &sluice.Error{Code: sluice.CodeCapacityWaitTimeout}):
			// The bound account had no room within the affinity wait, or is cooling.
			aff.leave(waitedFor(err))
			continue
		case until != deadline && errors.Is(err, &sluice.Error{Code: sluice.CodeCapacityWaitTimeout}):
			// The bound accounts had no room within the policy's wait.
			widened = cmp.Or(widened, waitedFor(err))
			continue
		case errors.Is(err, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable}):
			// No candidate is left: the answer says why, most specific first.
			if own := h.ownUnavailable(snap, key, req); own != nil {
				return own // the owner's own credentials are all out of service (owner.go)
			}
			switch {
			case n > 0:
				return last.Failure() // every edge was tried: the last failure says most
			case pin != nil:
				return errResponseBindingUnavailable
			case rp.mode == "strict":
				return errBindingUnavailable
			}
			return err
		default:
			return err
		}
		if err := h.granted(out.charging, req); err != nil {
			claim.Release(ctx, store.Outcome{}) // nothing ran
			return err
		}
		n++
		e := current[claim.Index]
		h.affinityGranted(ctx, snap, req, aff, e)
		out.route = attemptRoute{}
		if rp.binds() {
			out.route.expected = rp.accounts
			if !rp.bound(e.Account.ID) {
				out.route.fallback = widened
			}
		}
		a, final := h.run(snap.Routes.InFlight(e.Account.ID), try, e, claim, start)
		if !a.Skipped {
			out.route.stamp(&a.Exec)
			out.Executions = append(out.Executions, a.Exec)
			if a.Exec.Fallback != "" {
				h.metrics.PolicyFallbacks.WithLabelValues(key.ID, a.Exec.Fallback).Inc()
			}
			if rp.mode == "strict" && !rp.bound(a.Exec.AccountID) {
				// Defence in depth: plan offers a strict key nothing else.
				h.log.LogAttrs(ctx, slog.LevelError, "a strict route policy was not held", slog.String("request_id", req.ID),
					slog.String("key_id", key.ID), slog.String("account_id", a.Exec.AccountID))
				if !a.Committed {
					return &sluice.Error{Code: sluice.CodeInternal, Msg: "internal error", Err: errors.New("strict route policy not held")}
				}
			}
		}
		if a.Committed {
			out.answer(a)
			return a.Err
		}
		if !a.Skipped && (final || !a.Class.Retryable()) {
			return a.Failure()
		}
		claim.WaitReleased() // the next try must see this one's outcome (a cooldown) in the store
		h.react(ctx, e, a)
		if rp.mode == "preferred" && widened == "" && rp.bound(e.Account.ID) {
			widened = fallbackReason(a)
		}
		aff.failedOn(e, fallbackReason(a))
		if a.Class != upstream.ClassRate { // a rate limit cools the unit; the store skips it until its probe
			failed = append(failed, failure{edge: e, class: a.Class})
		}
		last = a
	}
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
	return h.caller.Execute(ctx, w, req, e, start, hooks)
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
