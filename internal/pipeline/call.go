package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
func (h *Handler) call(ctx context.Context, snap *Snapshot, key *sluice.Key, req *sluice.Request, task string, edges []*sluice.Edge, out *Outcome, try tryFunc) error {
	start := time.Now()
	class := class(key, req)
	deadline := start.Add(snap.Wait(class))
	var failed []failure // what earlier attempts of this request ruled out
	// plan is re-run before every try to claim capacity, so a request that
	// waits sees credentials added or disabled meanwhile (a reload swaps the
	// snapshot; statuses change on any replica).
	var current []*sluice.Edge
	limits := snap.Limits(key, req, task)
	plan := func() []store.Candidate {
		if s := h.live.Load(); s != snap {
			snap = s
			edges, _ = h.route(snap, req)
			limits = snap.Limits(key, req, task)
		}
		current = current[:0]
		var cands []store.Candidate
		for _, e := range edges {
			if h.inService(snap, e) && snap.InPool(key, e.Account.ID) && !ruledOut(failed, e) {
				c := snap.Candidate(e)
				c.Limits = limits
				current = append(current, e)
				cands = append(cands, c)
			}
		}
		return cands
	}
	var last upstream.Attempt
	for n := 0; ; n++ {
		claim, err := h.capacity.Wait(ctx, store.Acquire{
			Domain: snap.Domain, Ticket: req.ID + "." + strconv.Itoa(n), Queue: req.Model, Class: class, Tokens: req.Tokens,
			Tenant: key.Tenant, Weight: snap.Weight(key.Tenant),
		}, deadline, plan)
		if err != nil {
			if n > 0 && errors.Is(err, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable}) {
				return last.Failure() // every edge was tried: the last failure says most
			}
			return err
		}
		e := current[claim.Index]
		a, final := try(e, claim, start)
		if !a.Skipped {
			out.Executions = append(out.Executions, a.Exec)
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
		if a.Class != upstream.ClassRate { // a rate limit cools the unit; the store skips it until its probe
			failed = append(failed, failure{edge: e, class: a.Class})
		}
		last = a
	}
}

// tryFunc runs one attempt on the claimed edge e and releases the claim (or
// hands it over) — also when the attempt panics, so a claim is released
// exactly once on every path. The release goes on in the background, off
// the answer's path; call waits for it only before another attempt. start
// is when the request's first attempt began. final says that no other edge
// may be tried, whatever the class.
type tryFunc func(e *sluice.Edge, claim *capacity.Claim, start time.Time) (a upstream.Attempt, final bool)

// execute runs one attempt of a request that answers at once (chat,
// embeddings) and releases the claim with its outcome. ending is called
// when a successful answer is in and its last bytes are not yet sent.
func (h *Handler) execute(ctx context.Context, w http.ResponseWriter, req *sluice.Request, e *sluice.Edge, start time.Time, claim *capacity.Claim, ending func(upstream.Attempt)) (a upstream.Attempt) {
	defer func() { claim.Release(ctx, outcome(a)) }() // on a panic a is zero: released with no outcome
	hooks := upstream.Hooks{Ending: ending}
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

// ruledOut reports whether an earlier failure excludes e: an auth failure
// rules out its credential, a billing failure its account, anything else
// just that edge. IDs, not pointers, so a reload mid-request keeps the rule.
func ruledOut(failed []failure, e *sluice.Edge) bool {
	for _, f := range failed {
		switch {
		case f.class == upstream.ClassAuth && f.edge.Credential.ID == e.Credential.ID,
			f.class == upstream.ClassBilling && f.edge.Account.ID == e.Account.ID,
			f.edge.ID == e.ID:
			return true
		}
	}
	return false
}

// outcome is what an attempt tells the claim's unit: the tokens it used, and
// whether it was rate limited. A success whose rate-limit headers say the
// window is empty cools the unit until the window resets, so the next
// request waits instead of earning a 429.
func outcome(a upstream.Attempt) store.Outcome {
	out := store.Outcome{Tokens: int(a.Exec.Usage.TotalTokens)} // corrects the TPM reservation when measured
	switch {
	case a.Class == upstream.ClassRate:
		out.RateLimited, out.RetryAfter = true, a.RetryAfter
	case a.Class == upstream.ClassNone && a.Exhausted > 0:
		out.RateLimited, out.RetryAfter = true, a.Exhausted
	default:
		out.Success = a.Class == upstream.ClassNone
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
	st := store.Status{State: "disabled", Reason: fmt.Sprintf("%s: upstream answered %d", a.Class, a.Exec.HTTPStatus)}
	if err := h.statuses.Set(context.WithoutCancel(ctx), kind, id, st); err != nil {
		h.log.Error("recording a disabled "+kind+" failed", "id", id, "err", err)
		return
	}
	h.log.Warn(kind+" disabled by an upstream failure", kind+"_id", id, "reason", st.Reason)
}
