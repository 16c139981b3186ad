package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// Jobs finds the bindings of async jobs. Implementations must be safe for
// concurrent use.
type Jobs interface {
	// Job returns the job with id, or an error wrapping store.ErrJobNotFound.
	Job(ctx context.Context, id string) (store.Job, error)
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
