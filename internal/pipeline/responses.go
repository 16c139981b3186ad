package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Stored Responses. An upstream keeps a stored response for the key (the
// project) that created it: a request that continues it with
// previous_response_id must reach the same credential and endpoint, or
// the upstream answers 404. So the id of every stored response that
// passes through is bound to its edge in the job store (durable and
// shared like a job's binding, as a record that has ended: no poller
// follows it), and a request that names it waits for that edge alone.

// responseRetention is how long a response binding is kept: as long as
// OpenAI keeps a stored response.
const responseRetention = 30 * 24 * time.Hour

// previousResponse returns the binding of req's previous_response_id, nil
// when it names none. An id Sluice holds no binding for — one another key
// created, one of another protocol, or one it never saw created (it may
// predate Sluice) — is not found: forwarding it would let any key reach a
// response stored under another's credential, whose upstream would answer.
func (h *Handler) previousResponse(ctx context.Context, key *sluice.Key, req *sluice.Request) (*store.Job, error) {
	if req.PreviousResponseID == "" {
		return nil, nil
	}
	b, err := h.jobs.Job(ctx, req.PreviousResponseID)
	switch {
	case errors.Is(err, store.ErrJobNotFound) || err == nil && (b.KeyID != key.ID || b.Protocol != string(sluice.ProtocolOpenAIResponses)):
		return nil, &sluice.Error{Code: sluice.CodeNotFound, Msg: "Previous response with id '" + req.PreviousResponseID + "' not found."}
	case errors.Is(err, store.ErrUnavailable):
		return nil, capacity.StateUnavailable(err)
	case err != nil:
		return nil, &sluice.Error{Code: sluice.CodeBindingUnavailable, Msg: "response state is unavailable", Err: err}
	}
	return &b, nil
}

// pinned reports whether e may serve a request pinned to the edge of
// binding pin (nil: any edge may): the credential and endpoint that
// created the response, whatever alias the request names.
func pinned(pin *store.Job, e *sluice.Edge) bool {
	return pin == nil || e.Credential.ID == pin.CredentialID && e.Endpoint.ID == pin.EndpointID
}

// compacts reports whether edge e can compact a conversation: its endpoint
// speaks Responses. Chat has no compaction to translate one to.
func compacts(e *sluice.Edge) bool { return e.Protocol == sluice.ProtocolOpenAIResponses }

// errCannotCompact answers a compaction for an alias none of whose
// endpoints speaks Responses.
func errCannotCompact(model string) error {
	return &sluice.Error{Code: sluice.CodeInvalidRequest,
		Msg: "model " + model + " cannot compact a conversation: its upstream speaks OpenAI chat, which has no compaction"}
}

// errResponseBindingUnavailable answers a request continuing a response
// whose credential or endpoint can no longer serve it.
var errResponseBindingUnavailable = &sluice.Error{Code: sluice.CodeBindingUnavailable,
	Msg: "the upstream account that stored the previous response is unavailable"}

// bindResponse binds the response that attempt a's upstream stored for req
// to a's edge, before the answer's first byte reaches the caller: the caller
// cannot name the id before, so its next turn (and its follow-ups) find
// the binding however the answer ends — too long to hold, cut by the
// caller or the upstream. A failure is logged: the answer stands, and the
// id is not found later, as one Sluice never saw.
func (h *Handler) bindResponse(ctx context.Context, adm *admission, req *sluice.Request, a upstream.Attempt) {
	now := time.Now()
	key := adm.key()
	b := store.Job{
		ID: a.StoredID, RequestID: req.ID, KeyID: key.ID, Tenant: key.Tenant,
		Protocol: string(sluice.ProtocolOpenAIResponses), Alias: req.Model,
		EdgeID: a.Exec.EdgeID, CredentialID: a.Exec.CredentialID, EndpointID: a.Exec.EndpointID, AccountID: a.Exec.AccountID, Model: a.Exec.Model,
		UpstreamID: a.StoredID, State: sluice.JobCompleted, Queued: req.Received, Submitted: now, Ended: now,
		Expires: now.Add(responseRetention),
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bindTimeout)
	defer cancel()
	if err := h.jobs.CreateJob(bctx, b); err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "a stored response could not be bound to its account",
			slog.String("request_id", req.ID), slog.String("edge_id", b.EdgeID), slog.Any("err", err))
	}
}

// ResponseOp is what a caller asks of a stored response.
type ResponseOp int

const (
	ResponseGet    ResponseOp = iota // GET /v1/responses/{id}: the response, or its events again (stream=true)
	ResponseDelete                   // DELETE /v1/responses/{id}
	ResponseCancel                   // POST /v1/responses/{id}/cancel: a background response stops
)

// FollowResponse runs a caller's follow-up (op) on the stored response id
// where it is stored: on the credential and endpoint of its binding, even
// if that credential is disabled or draining now (as FollowJob does for a
// job). query, the caller's, is passed on as it is (stream,
// starting_after, include[]…). A response another key created, or one
// Sluice did not bind, is not found. A streamed answer is left open
// (JobAnswer.Stream) for the caller to pass on as it arrives. A deleted
// response's binding is forgotten. A follow-up takes a light claim
// (followup.go) and records no usage, as a job's polls: it generates
// nothing. pr is the caller's principal and req the follow-up (its ID,
// protocol and arrival), as for Serve.
func (h *Handler) FollowResponse(ctx context.Context, pr *sluice.Principal, req *sluice.Request, id string, op ResponseOp, query string) (*JobAnswer, Outcome, error) {
	out := Outcome{KeyID: pr.Key.ID}
	snap := h.live.Load()
	if err := admitFollowUp(snap, pr.Key, req.Protocol, ""); err != nil {
		return nil, out, err
	}
	b, err := h.jobs.Job(ctx, id)
	switch {
	case errors.Is(err, store.ErrJobNotFound) || err == nil && (b.KeyID != pr.Key.ID || b.Protocol != string(sluice.ProtocolOpenAIResponses)):
		return nil, out, &sluice.Error{Code: sluice.CodeNotFound, Msg: "Response with id '" + id + "' not found."}
	case errors.Is(err, store.ErrUnavailable):
		return nil, out, capacity.StateUnavailable(err)
	case err != nil:
		return nil, out, &sluice.Error{Code: sluice.CodeBindingUnavailable, Msg: "response state is unavailable", Err: err}
	}
	e, err := jobEdge(snap, &b)
	if err != nil {
		return nil, out, err
	}
	claim, err := h.claimFollowUp(ctx, snap, pr.Key, req, &b, e)
	if err != nil {
		return nil, out, err
	}
	call := upstream.JobCall{Method: http.MethodGet, URL: upstream.JobURL(e, b.UpstreamID)}
	switch op {
	case ResponseDelete:
		call.Method = http.MethodDelete
	case ResponseCancel:
		call.Method, call.URL = http.MethodPost, upstream.JobURL(e, b.UpstreamID, "cancel")
	}
	call.URL = withQuery(call.URL, query)
	resp, a := h.caller.CallJob(ctx, e, call)
	out.Executions = []sluice.Execution{a.Exec}
	if resp == nil {
		releaseFollowUp(ctx, claim, a)
		return nil, out, a.Failure()
	}
	out.Committed, out.Status = true, resp.StatusCode
	ans := &JobAnswer{Job: b, Status: resp.StatusCode, Header: resp.Header}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); a.Class == upstream.ClassNone && mt == "text/event-stream" {
		ans.Stream = releasingBody{resp.Body, func() { releaseFollowUp(ctx, claim, a) }}
		return ans, out, nil
	}
	defer releaseFollowUp(ctx, claim, a)
	if ans.JSON, err = upstream.ReadJobAnswer(resp); err != nil {
		return nil, out, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "the upstream answer broke off", Err: err}
	}
	switch {
	case op == ResponseDelete && a.Class == upstream.ClassNone:
		// Deleted upstream: a later follow-up is 404 here too.
		if err := h.jobs.DeleteJob(context.WithoutCancel(ctx), b.ID); err != nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "forgetting a deleted response failed", slog.String("response_id", b.ID), slog.Any("err", err))
		}
	case a.Class == upstream.ClassAuth || a.Class == upstream.ClassBilling:
		h.react(ctx, e, a)
	}
	return ans, out, nil
}
