package pipeline

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Async jobs (video generation). A submit goes through the pipeline like any
// request — admitted, routed, queued for capacity, failed over before an
// upstream job exists — but its claim is kept when the upstream accepts the
// job: the slot stays taken until the job ends, which Sluice learns from a
// caller's poll or from its background poller, whichever is first (the job
// store ends a job exactly once). The job is bound to the edge that created
// it; every follow-up goes there, whatever the credential's status since. The
// caller sees only Sluice's job ID.

// JobOp is what a caller asks of an existing job.
type JobOp int

const (
	JobStatus JobOp = iota // its status: OpenAI GET /v1/videos/{id}, fal GET …/requests/{id}/status
	JobResult              // its output: OpenAI GET /v1/videos/{id}/content, fal GET …/requests/{id}
	JobCancel              // stop it: OpenAI DELETE /v1/videos/{id}, fal PUT …/requests/{id}/cancel
)

// JobAnswer is an upstream's answer to a job call, for ingress to render in
// the caller's protocol with Sluice's job ID and URLs in place of the
// upstream's.
type JobAnswer struct {
	Job    store.Job
	Status int
	Header http.Header
	JSON   []byte        // the answer, when Sluice read it whole (a submit, a status, a cancel, an error)
	Stream io.ReadCloser // else the open answer body (a download, a result); the renderer closes it
}

// SubmitJob runs a job submit (req.Protocol openai.videos or fal.queue)
// through the pipeline. On success the answer carries the new job; an
// upstream's refusal of the request itself (a 4xx) is an answer too, to be
// passed on as is. A submit is not idempotent upstream, so after a failure
// that may have created a job (a timeout, a 5xx, a broken answer) no other
// edge is tried. p is the caller's principal, as for Serve.
func (h *Handler) SubmitJob(ctx context.Context, req *sluice.Request, p *sluice.Principal) (*JobAnswer, Outcome, error) {
	var r passage
	h.begin(ctx, &r, req, p)
	var ans *JobAnswer
	var bindErr error
	if r.err == nil {
		r.err = h.call(ctx, &r, func(e *sluice.Edge, claim *capacity.Claim, _ time.Time) (upstream.Attempt, bool) {
			var a upstream.Attempt
			ans, a, bindErr = h.submit(ctx, &r.adm, req, e, claim)
			final := bindErr != nil || a.Class == upstream.ClassEndpoint && !a.Skipped && !dialFailed(a.Err)
			return a, final
		})
	}
	if bindErr != nil {
		r.err = bindErr
	}
	h.settle(ctx, &r, r.out, r.err)
	return ans, r.out, r.err
}

// submit runs one submit on the claimed edge. When the upstream accepts the
// job, the claim is kept for it and the job stored; otherwise the claim is
// released with the attempt's outcome. bindErr is set when the job was
// created upstream but Sluice could not keep track of it.
func (h *Handler) submit(ctx context.Context, adm *admission, req *sluice.Request, e *sluice.Edge, claim *capacity.Claim) (ans *JobAnswer, a upstream.Attempt, bindErr error) {
	kept := false
	defer func() {
		if !kept {
			claim.Release(ctx, outcome(a))
		}
	}()
	call := upstream.JobCall{Method: http.MethodPost, Body: req.Body, Submit: true}
	if e.Protocol == sluice.ProtocolFalQueue {
		call.URL = upstream.JobURL(e, strings.Split(e.Model, "/")...) // the fal endpoint ID is the path
	} else {
		call.URL, call.ContentType = upstream.JobURL(e), req.ContentType
		if e.Model != req.Model {
			var body []byte
			var err error
			if req.ContentType != "" { // multipart/form-data, as the OpenAI SDKs send it
				body, err = upstream.SetFormField(req.Body, req.ContentType, "model", e.Model)
			} else {
				body, err = jsonfield.SetString(req.Body, "model", e.Model)
			}
			if err != nil {
				a.Class, a.Err = upstream.ClassRequest, fmt.Errorf("prepare body: %w", err)
				return nil, a, nil
			}
			call.Body = body
		}
	}
	// Once sent, a submit runs to its answer even if the caller leaves: the
	// upstream may create (and bill) the job either way, and a job Sluice
	// does not bind would hold its slot upstream unseen. The endpoint's
	// timeouts still bound it.
	resp, a := h.caller.CallJob(context.WithoutCancel(ctx), e, call)
	if resp == nil {
		return nil, a, nil
	}
	body, err := upstream.ReadJobAnswer(resp)
	if err != nil {
		a.Class, a.Err = upstream.ClassEndpoint, fmt.Errorf("read submit answer: %w", err)
		return nil, a, nil
	}
	if a.Class != upstream.ClassNone {
		if a.Class == upstream.ClassRequest {
			// The upstream's refusal is the answer (its execution keeps the
			// error): no job, nothing to retry, nothing to report as failed.
			a.Committed, a.Err = true, nil
			return &JobAnswer{Status: resp.StatusCode, Header: resp.Header, JSON: body}, a, nil
		}
		return nil, a, nil
	}
	sub, err := parseSubmit(e, body)
	if err != nil {
		a.Class, a.Err = upstream.ClassEndpoint, err
		return nil, a, nil
	}
	js := adm.snap.Catalog.Server.Jobs
	now := time.Now()
	key := adm.key()
	job := store.Job{
		ID: newJobID(e.Protocol), RequestID: req.ID, KeyID: key.ID, Tenant: key.Tenant,
		Protocol: string(e.Protocol), Alias: req.Model,
		EdgeID: e.ID, CredentialID: e.Credential.ID, EndpointID: e.Endpoint.ID, AccountID: e.Account.ID, Model: e.Model,
		UpstreamID: sub.id, StatusURL: sub.statusURL, ResultURL: sub.resultURL, CancelURL: sub.cancelURL,
		State: sub.state, Queued: req.Received, Submitted: now, Answer: body, Answered: now,
		NextPoll: now.Add(js.PollInterval.D()), PollEvery: js.PollInterval.D(),
		Expires: now.Add(js.MaxAge.D() + js.Retention.D()),
		EndUser: req.User, TaskType: adm.task, Profile: adm.profile, Priority: sluice.Priorities[adm.class], Pool: adm.policy.pool,
	}
	if c := adm.charging; c != nil {
		// The job's record, written at its end, carries its charge; the
		// submit's carries none.
		c.job = true
		if c.account != nil {
			job.BillingAccount, job.PricePlan = c.account.id, c.account.plan
		}
	}
	kept = true
	// The job is bound whether or not the caller is still there, within a
	// bound of its own.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bindTimeout)
	defer cancel()
	// The lease outlives the maximum age by one poll, so that the poller
	// normally ends an unlearnable job (and records it) before it lapses.
	job.Domain, job.Lease, err = claim.Keep(bctx, js.MaxAge.D()+js.PollInterval.D())
	if err == nil {
		if err = h.jobs.CreateJob(bctx, job); err != nil {
			_ = h.capacity.ReleaseLease(bctx, job.Domain, job.Lease, store.Outcome{})
		}
	}
	if err != nil {
		// The job runs upstream, but no poll could reach it: say so, and
		// leave the operator what is needed to find it.
		h.log.LogAttrs(ctx, slog.LevelError, "an upstream job was created but could not be bound",
			slog.String("request_id", req.ID), slog.String("edge_id", e.ID), slog.String("upstream_job_id", sub.id), slog.Any("err", err))
		return nil, a, &sluice.Error{Code: sluice.CodeBindingUnavailable, Msg: "the job was submitted but Sluice could not record it; it is not retried", Err: err}
	}
	a.Committed = true
	return &JobAnswer{Job: job, Status: resp.StatusCode, Header: resp.Header, JSON: body}, a, nil
}

// bindTimeout bounds the state writes that bind a new job to its edge.
const bindTimeout = 5 * time.Second

// dialFailed reports whether an attempt failed before anything was sent: a
// submit may then go to another edge without risking a second job.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// FollowJob runs a caller's follow-up on the job id: on the job's own edge,
// with its creating credential even if that is disabled or draining now. A
// job of another key (or another protocol) is not found, exactly as one that
// does not exist. What the answer says of the job's state is recorded; an
// end seen here ends the job. A follow-up that goes upstream takes a light
// claim (followup.go). pr is the caller's principal and req the follow-up
// (its ID, protocol and arrival), as for Serve. (A stored Responses
// response is followed by FollowResponse.)
func (h *Handler) FollowJob(ctx context.Context, pr *sluice.Principal, req *sluice.Request, id string, op JobOp, query string) (*JobAnswer, Outcome, error) {
	out := Outcome{KeyID: pr.Key.ID}
	p := req.Protocol
	snap := h.live.Load()
	if err := admitFollowUp(snap, pr.Key, p, ""); err != nil {
		return nil, out, err
	}
	job, err := h.jobs.Job(ctx, id)
	switch {
	case errors.Is(err, store.ErrJobNotFound) || err == nil && (job.KeyID != pr.Key.ID || job.Protocol != string(p)):
		return nil, out, &sluice.Error{Code: sluice.CodeNotFound, Msg: "no job with id " + id}
	case errors.Is(err, store.ErrUnavailable):
		return nil, out, capacity.StateUnavailable(err) // the job is there; its record is out of reach for now
	case err != nil:
		return nil, out, &sluice.Error{Code: sluice.CodeBindingUnavailable, Msg: "job state is unavailable", Err: err}
	}
	if op == JobStatus && !strings.Contains(query, "logs=1") {
		if ans := recorded(&job, snap.Catalog.Server.Jobs.PollInterval.D()); ans != nil {
			out.Committed, out.Status = true, ans.Status
			return ans, out, nil
		}
	}
	e, err := jobEdge(snap, &job)
	if err != nil {
		return nil, out, err
	}
	claim, err := h.claimFollowUp(ctx, snap, pr.Key, req, &job, e)
	if err != nil {
		return nil, out, err
	}
	call := followCall(e, &job, op, query)
	resp, a := h.caller.CallJob(ctx, e, call)
	out.Executions = []sluice.Execution{a.Exec}
	if resp == nil {
		releaseFollowUp(ctx, claim, a)
		return nil, out, a.Failure()
	}
	out.Committed, out.Status = true, resp.StatusCode
	ans := &JobAnswer{Job: job, Status: resp.StatusCode, Header: resp.Header}
	if a.Class == upstream.ClassNone && op == JobResult {
		ans.Stream = releasingBody{resp.Body, func() { releaseFollowUp(ctx, claim, a) }}
		return ans, out, nil
	}
	defer releaseFollowUp(ctx, claim, a)
	if ans.JSON, err = upstream.ReadJobAnswer(resp); err != nil {
		return nil, out, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "the upstream answer broke off", Err: err}
	}
	switch {
	case op == JobCancel && a.Class == upstream.ClassNone:
		if !job.Done() {
			h.endJob(ctx, snap, job, status{state: sluice.JobCancelled}, nil)
		}
		if p == sluice.ProtocolOpenAIVideos {
			// The video is deleted upstream: later follow-ups are 404 here
			// too, not answered from the record.
			if err := h.jobs.DeleteJob(context.WithoutCancel(ctx), job.ID); err != nil {
				h.log.LogAttrs(ctx, slog.LevelWarn, "forgetting a deleted job failed", slog.String("job_id", job.ID), slog.Any("err", err))
			}
		}
	case op != JobResult && h.learn(ctx, snap, job, resp.StatusCode, a.Class, ans.JSON, job.PollEvery):
	case a.Class == upstream.ClassAuth || a.Class == upstream.ClassBilling:
		h.react(ctx, e, a)
	}
	return ans, out, nil
}

// recorded is the answer to a status poll from the job's record, when it
// may stand in for an upstream call: the final status of an ended job, or
// an answer younger than the poll interval every. Nil otherwise.
func recorded(job *store.Job, every time.Duration) *JobAnswer {
	if len(job.Answer) == 0 || !job.Done() && time.Since(job.Answered) >= every {
		return nil
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if !job.Done() && job.Protocol == string(sluice.ProtocolOpenAIVideos) {
		// The SDKs wait this long before the next poll.
		header.Set("Openai-Poll-After-Ms", strconv.FormatInt(max(every.Milliseconds(), 1), 10))
	}
	return &JobAnswer{Job: *job, Status: http.StatusOK, Header: header, JSON: job.Answer}
}

// learn applies what the upstream answered to a follow-up of job (status,
// class and body): a status answer records the job's state, and maybe its
// end; a 404 — from the job's own credential — means the upstream no longer
// has the job (it expired or was deleted), so it holds no slot there. It
// reports whether the answer taught either; next is when to poll again.
func (h *Handler) learn(ctx context.Context, snap *Snapshot, job store.Job, code int, class upstream.Class, answer []byte, next time.Duration) bool {
	switch {
	case class == upstream.ClassNone:
		h.observe(ctx, snap, job, answer, next)
	case code == http.StatusNotFound:
		h.endJob(ctx, snap, job, status{state: sluice.JobExpired}, nil)
	default:
		return false
	}
	return true
}

// jobEdge rebuilds the edge a job is bound to from the current catalog.
func jobEdge(snap *Snapshot, job *store.Job) (*sluice.Edge, error) {
	cr, ep := snap.Credentials[job.CredentialID], snap.Endpoints[job.EndpointID]
	if cr == nil || ep == nil {
		return nil, &sluice.Error{Code: sluice.CodeBindingUnavailable,
			Msg: "the upstream credential or endpoint that runs job " + job.ID + " is no longer configured"}
	}
	acct := snap.Accounts[cr.AccountID]
	if acct == nil {
		acct = &sluice.Account{ID: job.AccountID}
	}
	return &sluice.Edge{ID: job.EdgeID, Credential: cr, Account: acct, Endpoint: ep, Protocol: sluice.Protocol(job.Protocol), Model: job.Model}, nil
}

// followCall is the upstream call of op on job: fal's follow-ups go to the
// URLs its submit answer gave; OpenAI's are built from the video ID.
func followCall(e *sluice.Edge, job *store.Job, op JobOp, query string) upstream.JobCall {
	if e.Protocol == sluice.ProtocolFalQueue {
		// Without a URL from the submit answer: fal's follow-ups live under
		// the app's root, {owner}/{app}, whatever the submit's subpath.
		root := strings.Split(job.Model, "/")
		root = root[:min(len(root), 2)]
		built := func(tail ...string) string {
			return upstream.JobURL(e, slices.Concat(root, []string{"requests", job.UpstreamID}, tail)...)
		}
		switch op {
		case JobResult:
			return upstream.JobCall{Method: http.MethodGet, URL: cmp.Or(job.ResultURL, built())}
		case JobCancel:
			return upstream.JobCall{Method: http.MethodPut, URL: cmp.Or(job.CancelURL, built("cancel"))}
		}
		return upstream.JobCall{Method: http.MethodGet, URL: withQuery(cmp.Or(job.StatusURL, built("status")), query)}
	}
	switch op {
	case JobResult:
		return upstream.JobCall{Method: http.MethodGet, URL: withQuery(upstream.JobURL(e, job.UpstreamID, "content"), query)}
	case JobCancel:
		return upstream.JobCall{Method: http.MethodDelete, URL: upstream.JobURL(e, job.UpstreamID)}
	}
	return upstream.JobCall{Method: http.MethodGet, URL: upstream.JobURL(e, job.UpstreamID)}
}

func withQuery(u, query string) string {
	if query == "" {
		return u
	}
	if strings.Contains(u, "?") {
		return u + "&" + query
	}
	return u + "?" + query
}

// observe records a status answer: the job's state, and its end if it has
// ended. next is when it should be polled again if it has not.
func (h *Handler) observe(ctx context.Context, snap *Snapshot, job store.Job, answer []byte, next time.Duration) {
	st, err := parseStatus(sluice.Protocol(job.Protocol), answer)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "unreadable job status", slog.String("job_id", job.ID), slog.Any("err", err))
		return
	}
	now := time.Now()
	if st.state == sluice.JobInProgress && job.Running.IsZero() {
		job.Running = now
	}
	if st.ended() {
		h.endJob(ctx, snap, job, st, answer)
		return
	}
	job.State, job.NextPoll, job.PollEvery = st.state, now.Add(next), next
	job.Answer, job.Answered = answer, now
	if _, err := h.jobs.UpdateJob(context.WithoutCancel(ctx), job); err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "recording a job's state failed", slog.String("job_id", job.ID), slog.Any("err", err))
	}
}

// endJob ends the job as st says, once: whoever ends it first in the store
// releases its claim and records its usage. answer is the status answer
// that told, kept for later polls; nil when no answer told (a cancel, a
// job the upstream lost, its maximum age), and then later polls go upstream.
func (h *Handler) endJob(ctx context.Context, snap *Snapshot, job store.Job, st status, answer []byte) {
	ctx = context.WithoutCancel(ctx)
	now := time.Now()
	state := st.state
	job.State, job.Ended, job.Seconds = state, now, st.seconds
	job.Answer, job.Answered = answer, now
	job.Expires = now.Add(snap.Catalog.Server.Jobs.Retention.D())
	won, err := h.jobs.UpdateJob(ctx, job)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "recording a job's end failed; it is polled again", slog.String("job_id", job.ID), slog.Any("err", err))
		return
	}
	if !won {
		return
	}
	_ = h.capacity.ReleaseLease(ctx, job.Domain, job.Lease, store.Outcome{Success: state == sluice.JobCompleted})
	level := slog.LevelInfo
	if state == sluice.JobExpired {
		level = slog.LevelWarn
	}
	h.log.LogAttrs(ctx, level, "job ended", slog.String("job_id", job.ID), slog.String("state", string(state)),
		slog.String("edge_id", job.EdgeID), slog.Duration("ran", now.Sub(job.Submitted)))
	h.metrics.JobsEnded.WithLabelValues(job.Protocol, string(state)).Inc()
	h.metrics.JobRun.WithLabelValues(job.Protocol).Observe(now.Sub(job.Submitted).Seconds())
	rec := jobUsage(&job)
	if cr := snap.Credentials[job.CredentialID]; cr != nil {
		rec.Executions[0].Owner = cr.Owner // the job store keeps the credential, not its owner
	}
	rec.Billing = h.jobCharging(snap, &job).settle(h.view, snap.billing.costTable(), &sluice.Request{ID: job.ID}, &Outcome{Committed: true, Executions: rec.Executions}, rec.Job)
	h.usage.Record(ctx, rec)
}

// jobUsage is the usage record of an ended job: its one execution is its run
// on its edge, from the upstream's acceptance to its end.
func jobUsage(job *store.Job) sluice.UsageRecord {
	exec := sluice.Execution{
		EdgeID: job.EdgeID, CredentialID: job.CredentialID, AccountID: job.AccountID, EndpointID: job.EndpointID,
		Model: job.Model, Protocol: sluice.Protocol(job.Protocol), Status: sluice.ExecutionOK, HTTPStatus: http.StatusOK,
		Started: job.Submitted, Duration: job.Ended.Sub(job.Submitted),
	}
	if !job.Running.IsZero() {
		exec.FirstByte = job.Running.Sub(job.Submitted)
	}
	switch job.State {
	case sluice.JobFailed:
		exec.Status = sluice.ExecutionEndpoint
	case sluice.JobCancelled, sluice.JobExpired:
		exec.Status = sluice.ExecutionCancelled
	}
	return sluice.UsageRecord{
		RequestID: job.ID, KeyID: job.KeyID, Tenant: job.Tenant, Alias: job.Alias, Protocol: sluice.Protocol(job.Protocol),
		Status: http.StatusOK, Started: job.Queued, Latency: job.Ended.Sub(job.Queued), TTFT: job.Submitted.Sub(job.Queued),
		Executions: []sluice.Execution{exec},
		Job:        &sluice.JobUsage{State: job.State, Submitted: job.Submitted, Running: job.Running, Ended: job.Ended, Seconds: job.Seconds},
		EndUser:    job.EndUser, TaskType: job.TaskType, Profile: job.Profile, Pool: job.Pool, Priority: job.Priority,
	}
}

// Background polling.

const (
	jobPollTick    = 100 * time.Millisecond // how often the poller asks the store for due jobs
	jobPollHold    = time.Minute            // a due job is another replica's to poll again only after this
	jobPollBatch   = 64
	jobPollWorkers = 8
)

// RunJobPoller follows the jobs nobody polls, so their slots are freed when
// they end, until ctx ends. Every replica runs one; the store hands each due
// job to one of them. Each poll of a running job backs off by half its
// interval, up to server.jobs.max_poll_interval; a job older than
// server.jobs.max_age is ended as expired.
func (h *Handler) RunJobPoller(ctx context.Context) error {
	tick := time.NewTicker(jobPollTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		due, err := h.jobs.DueJobs(ctx, time.Now(), jobPollHold, jobPollBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.LogAttrs(ctx, slog.LevelWarn, "reading due jobs failed", slog.Any("err", err))
			}
			continue
		}
		snap := h.live.Load()
		var wg sync.WaitGroup
		sem := make(chan struct{}, jobPollWorkers)
		for _, j := range due {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				h.pollJob(ctx, snap, j)
			})
		}
		wg.Wait()
	}
}

// pollJob polls one due job. A poll that teaches nothing (the credential is
// gone from the catalog, the upstream fails) is retried after a longer
// interval.
func (h *Handler) pollJob(ctx context.Context, snap *Snapshot, job store.Job) {
	js := snap.Catalog.Server.Jobs
	if time.Since(job.Submitted) >= js.MaxAge.D() {
		h.endJob(ctx, snap, job, status{state: sluice.JobExpired}, nil)
		return
	}
	next := min(job.PollEvery+job.PollEvery/2, js.MaxPollInterval.D())
	if e, err := jobEdge(snap, &job); err == nil {
		resp, a := h.caller.CallJob(ctx, e, followCall(e, &job, JobStatus, ""))
		if resp != nil {
			answer, err := upstream.ReadJobAnswer(resp)
			if err != nil {
				a.Class = upstream.ClassEndpoint // a broken answer teaches no state
			}
			if h.learn(ctx, snap, job, resp.StatusCode, a.Class, answer, next) {
				return
			}
		}
	}
	if ctx.Err() != nil {
		return // shutting down: the hold lapses and another poller takes it
	}
	job.NextPoll, job.PollEvery = time.Now().Add(next), next
	if _, err := h.jobs.UpdateJob(context.WithoutCancel(ctx), job); err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "recording a job's next poll failed", slog.String("job_id", job.ID), slog.Any("err", err))
	}
}

// newJobID returns an unguessable job ID shaped like the protocol's own:
// "video_" and 32 hex digits for OpenAI, a UUID for fal.
func newJobID(p sluice.Protocol) string {
	var b [16]byte
	rand.Read(b[:])
	if p != sluice.ProtocolFalQueue {
		return "video_" + hex.EncodeToString(b[:])
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80 // version 4, RFC 4122 variant
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
