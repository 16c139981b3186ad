package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/store"
)

// fakeJobs holds jobs and remembers the last filter it listed by.
type fakeJobs struct {
	jobs []store.Job
	got  store.JobFilter
}

func (f *fakeJobs) Job(_ context.Context, id string) (store.Job, error) {
	for _, j := range f.jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return store.Job{}, store.ErrJobNotFound
}

func (f *fakeJobs) ListJobs(_ context.Context, filter store.JobFilter) ([]store.Job, error) {
	f.got = filter
	var out []store.Job
	for _, j := range f.jobs {
		if filter.Selects(&j) && (filter.Limit <= 0 || len(out) < filter.Limit) {
			out = append(out, j)
		}
	}
	return out, nil
}

// TestListJobs: the parameters reach the store's filter, the jobs come
// back as JobState, and a bad parameter is a 400 naming it.
func TestListJobs(t *testing.T) {
	queued := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	jobs := &fakeJobs{jobs: []store.Job{
		{ID: "job-2", KeyID: "k1", Tenant: "web", Alias: "video", State: sluice.JobInProgress, Queued: queued.Add(time.Minute), Submitted: queued.Add(time.Minute)},
		{ID: "job-1", KeyID: "k2", Tenant: "ops", Alias: "video", State: sluice.JobCompleted, Queued: queued, Submitted: queued, Ended: queued.Add(time.Hour)},
	}}
	url := newServer(t, admin.Options{Tokens: testTokens, Jobs: jobs})
	c := adminclient.NewClient(url, testToken)
	got, err := c.Jobs(t.Context(), admin.JobQuery{Since: queued.Add(-time.Hour), State: "in_progress", Tenant: "web", KeyID: "k1", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "job-2" || got[0].State != sluice.JobInProgress {
		t.Errorf("Jobs = %+v, want job-2 alone", got)
	}
	want := store.JobFilter{Since: queued.Add(-time.Hour), State: sluice.JobInProgress, Tenant: "web", KeyID: "k1", Limit: 5}
	if diff := cmp.Diff(want, jobs.got); diff != "" {
		t.Errorf("ListJobs filter (-want +got):\n%s", diff)
	}
	if got, err = c.Jobs(t.Context(), admin.JobQuery{}); err != nil || len(got) != 2 || jobs.got.Limit != 100 {
		t.Errorf("Jobs() = %d jobs, %v, limit %d; want both, limit 100", len(got), err, jobs.got.Limit)
	}
	h := &harness{url: url}
	for _, c := range []struct{ path, names string }{
		{"/admin/jobs?state=running", "state"},
		{"/admin/jobs?since=today", "since"},
		{"/admin/jobs?limit=1001", "limit"},
	} {
		resp, body := h.do(t, http.MethodGet, c.path, testToken, "")
		if e := decodeError(t, body); resp.StatusCode != http.StatusBadRequest || e.Error.Code != "invalid_request" ||
			!strings.HasPrefix(e.Error.Message, c.names+" ") {
			t.Errorf("GET %s = %d %+v, want 400 invalid_request naming %s", c.path, resp.StatusCode, e.Error, c.names)
		}
	}
}
