package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// Jobs finds the bindings of async jobs. Implementations must be safe for
// concurrent use.
type Jobs interface {
	// Job returns the job with id, or an error wrapping store.ErrJobNotFound.
	Job(ctx context.Context, id string) (store.Job, error)
	// ListJobs returns the jobs f selects, newest first.
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
}

// JobQuery selects jobs for GET /admin/jobs: queued at or after Since
// (zero: any time), in State, of Tenant and KeyID ("" = any), at most Limit
// (0: the server's 100).
type JobQuery struct {
	Since  time.Time
	State  string
	Tenant string
	KeyID  string
	Limit  int
}

// Job listing bounds: GET /admin/jobs shows 100 jobs unless asked for up
// to maxJobs.
const (
	defaultJobsLimit = 100
	maxJobs          = 1000
)

// jobStates are the states a job list may select.
var jobStates = []sluice.JobState{sluice.JobQueued, sluice.JobInProgress, sluice.JobCompleted, sluice.JobFailed,
	sluice.JobCancelled, sluice.JobExpired}

// listJobs handles GET /admin/jobs?since=&state=&tenant=&key=&limit=: the
// jobs kept (until they expire) that were queued at or after since, in
// the state, of the tenant and key, newest first.
func (s *server) listJobs(w http.ResponseWriter, r *http.Request) error {
	if s.jobs == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway keeps no jobs")
	}
	q := r.URL.Query()
	f := store.JobFilter{State: sluice.JobState(q.Get("state")), Tenant: q.Get("tenant"), KeyID: q.Get("key")}
	if err := parseTime(q, "since", &f.Since); err != nil {
		return err
	}
	if f.State != "" && !slices.Contains(jobStates, f.State) {
		return invalid("state %q is not one of %v", f.State, jobStates)
	}
	var err error
	if f.Limit, err = parseLimit(q.Get("limit"), defaultJobsLimit, maxJobs); err != nil {
		return err
	}
	jobs, err := s.jobs.ListJobs(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]JobState, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, jobState(j))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// JobState is an async job as the operator sees it: who submitted it, the
// edge it is bound to (its upstream ID included, which callers never see),
// and its timeline. Times are UTC; absent ones are omitted.
type JobState struct {
	ID           string          `json:"id"`
	KeyID        string          `json:"key_id"`
	Tenant       string          `json:"tenant,omitempty"`
	Protocol     string          `json:"protocol"`
	Alias        string          `json:"alias"`
	EdgeID       string          `json:"edge_id"`
	CredentialID string          `json:"credential_id"`
	AccountID    string          `json:"account_id"`
	EndpointID   string          `json:"endpoint_id"`
	UpstreamID   string          `json:"upstream_id"`
	State        sluice.JobState `json:"state"`
	Queued       time.Time       `json:"queued"`
	Submitted    time.Time       `json:"submitted"`
	Running      *time.Time      `json:"running,omitempty"`
	Ended        *time.Time      `json:"ended,omitempty"`
	NextPoll     *time.Time      `json:"next_poll,omitempty"` // while it runs
}

func jobState(j store.Job) JobState {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := utc(t)
		return &u
	}
	out := JobState{
		ID: j.ID, KeyID: j.KeyID, Tenant: j.Tenant, Protocol: j.Protocol, Alias: j.Alias,
		EdgeID: j.EdgeID, CredentialID: j.CredentialID, AccountID: j.AccountID, EndpointID: j.EndpointID,
		UpstreamID: j.UpstreamID, State: j.State, Queued: utc(j.Queued), Submitted: utc(j.Submitted),
		Running: opt(j.Running), Ended: opt(j.Ended),
	}
	if !j.Done() {
		out.NextPoll = opt(j.NextPoll)
	}
	return out
}

// showJob handles GET /admin/jobs/{id}.
func (s *server) showJob(w http.ResponseWriter, r *http.Request) error {
	if s.jobs == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway keeps no jobs")
	}
	id := r.PathValue("id")
	j, err := s.jobs.Job(r.Context(), id)
	if errors.Is(err, store.ErrJobNotFound) {
		return sluice.Errorf(sluice.CodeNotFound, "no job "+id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobState(j))
	return nil
}
