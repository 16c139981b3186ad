package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// Job is an asynchronous upstream job (a video generation) bound to the edge
// that created it. Every follow-up — poll, download, cancel — goes to that
// credential and endpoint, whatever their status, because upstream jobs are
// visible only to the key (or project) that created them. The job holds the
// capacity claim of its submit (Domain, Lease) until it ends. Shared stores
// keep it as JSON, with the field names of its tags.
type Job struct {
	ID        string `json:"id"`         // Sluice's job ID, the one the caller sees
	RequestID string `json:"request_id"` // the submit request
	KeyID     string `json:"key_id"`     // the virtual key that created the job: only it may follow the job
	Tenant    string `json:"tenant,omitempty"`
	Protocol  string `json:"protocol"` // the caller's and upstream's protocol ("openai.videos", "fal.queue")
	Alias     string `json:"alias"`

	EdgeID       string `json:"edge_id"`
	CredentialID string `json:"credential_id"`
	EndpointID   string `json:"endpoint_id"`
	AccountID    string `json:"account_id"`
	Model        string `json:"model"` // the upstream model (for fal, the endpoint ID it was submitted to)

	UpstreamID string `json:"upstream_id"` // the upstream's job ID; never shown to the caller
	// StatusURL, ResultURL and CancelURL are the follow-up URLs the upstream
	// returned, verbatim (fal); empty when the protocol builds them from
	// UpstreamID.
	StatusURL string `json:"status_url,omitempty"`
	ResultURL string `json:"result_url,omitempty"`
	CancelURL string `json:"cancel_url,omitempty"`

	Domain string `json:"domain"` // the capacity claim held until the job ends
	Lease  string `json:"lease"`

	// State is the last status seen: queued or in progress, or, once
	// Ended is set, one it ends in.
	State     sluice.JobState `json:"state"`
	Queued    time.Time       `json:"queued"`            // the submit arrived at Sluice
	Submitted time.Time       `json:"submitted"`         // the upstream accepted it
	Running   time.Time       `json:"running"`           // first seen in progress; zero if never seen so
	Ended     time.Time       `json:"ended"`             // first seen in a terminal state; zero while it runs
	Seconds   float64         `json:"seconds,omitempty"` // run or video length the upstream reported, if any

	// Answer is the upstream's newest status answer (at first, the submit's),
	// as received, and Answered when it came: a caller who polls again
	// sooner than the poll interval gets it again rather than another
	// upstream call, and once the job has ended with an answer, always.
	Answer   json.RawMessage `json:"answer,omitempty"`
	Answered time.Time       `json:"answered"`

	NextPoll  time.Time     `json:"next_poll"`  // when the background poller looks at it next
	PollEvery time.Duration `json:"poll_every"` // the poller's current interval (it backs off)
	// Expires is when the record may be forgotten: a running job's is past
	// its maximum age, an ended job's is its retention after the end.
	Expires time.Time `json:"expires"`

	// What the usage record written at its end carries, fixed at its
	// submit: the billing account and price plan it is charged to ("" =
	// unbilled), its end user, task type, quota profile, pool and priority
	// class.
	BillingAccount string `json:"billing_account,omitempty"`
	PricePlan      string `json:"price_plan,omitempty"`
	EndUser        string `json:"end_user,omitempty"`
	TaskType       string `json:"task_type,omitempty"`
	Profile        string `json:"profile,omitempty"`
	Pool           string `json:"pool,omitempty"`
	Priority       string `json:"priority,omitempty"`
}

// Done reports whether the job has reached a terminal state.
func (j *Job) Done() bool { return !j.Ended.IsZero() }

// ErrJobNotFound is returned for a job ID the store does not hold (never
// created, or forgotten after it expired).
var ErrJobNotFound = errors.New("job not found")

// Jobs hold the job bindings, shared by every replica: a job created through
// one replica is followed through any other, also after a restart.
// Implementations must be safe for concurrent use.
type Jobs interface {
	// CreateJob stores a new job. Creating an ID that exists is an error.
	CreateJob(ctx context.Context, j Job) error
	// Job returns the job with id, or ErrJobNotFound.
	Job(ctx context.Context, id string) (Job, error)
	// UpdateJob replaces the stored job j.ID with j unless the stored one
	// has ended, and reports whether it did (ErrJobNotFound if there is
	// none). So a job ends exactly once: of the callers that write it with
	// Ended set, only the first gets true, and only it releases the job's
	// claim and records its usage; an observation that the job still runs
	// never overwrites its end.
	UpdateJob(ctx context.Context, j Job) (bool, error)
	// DueJobs returns up to limit jobs that have not ended and whose
	// NextPoll is at or before now, earliest first, and moves their
	// NextPoll to now+hold, so that another poller (another replica) does
	// not take them while this one polls.
	DueJobs(ctx context.Context, now time.Time, hold time.Duration, limit int) ([]Job, error)
	// DeleteJob forgets the job (the upstream deleted it): later calls see
	// ErrJobNotFound. Deleting an unknown ID does nothing.
	DeleteJob(ctx context.Context, id string) error
	// ListJobs returns the jobs f selects, newest first (by Queued, ties
	// by ID), at most f.Limit of them.
	ListJobs(ctx context.Context, f JobFilter) ([]Job, error)
}

// JobFilter selects jobs: queued at or after Since (zero: any time), in
// State, of Tenant and of KeyID ("" = any). Limit bounds how many are
// listed (<= 0: no bound).
type JobFilter struct {
	Since  time.Time
	State  sluice.JobState
	Tenant string
	KeyID  string
	Limit  int
}

// Selects reports whether f selects j.
func (f *JobFilter) Selects(j *Job) bool {
	return (f.Since.IsZero() || !j.Queued.Before(f.Since)) && (f.State == "" || j.State == f.State) &&
		(f.Tenant == "" || j.Tenant == f.Tenant) && (f.KeyID == "" || j.KeyID == f.KeyID)
}

// CompareJobsNewestFirst orders jobs as ListJobs returns them.
func CompareJobsNewestFirst(a, b Job) int {
	return cmp.Or(b.Queued.Compare(a.Queued), cmp.Compare(a.ID, b.ID))
}
