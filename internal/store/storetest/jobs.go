package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// RunJobs checks the behaviour every store.Jobs must have, as Run does for
// the capacity stores: newBackend is called once per case and returns a
// constructor of replica handles on one shared backend.
func RunJobs(t *testing.T, newBackend func(t *testing.T) func() store.Jobs) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *jobFixture)
	}{
		{"RoundTrip", testJobRoundTrip},
		{"EndsOnce", testJobEndsOnce},
		{"EndRace", testJobEndRace},
		{"Due", testJobsDue},
		{"Expires", testJobExpires},
		{"Delete", testJobDelete},
		{"List", testJobList},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newReplica := newBackend(t)
			p := fmt.Sprintf("sj%x.%d.", time.Now().UnixNano(), runs.Add(1))
			tt.run(t, &jobFixture{t: t, newReplica: newReplica, s: newReplica(), prefix: p, domain: p + "dom"})
		})
	}
}

// jobFixture gives one case its replica handles and names unique to the
// case and the run.
type jobFixture struct {
	t          *testing.T
	newReplica func() store.Jobs
	s          store.Jobs
	prefix     string
	domain     string
}

func (f *jobFixture) name(short string) string { return f.prefix + short }

// job returns a running job of the case, due for a poll at next. Times are
// UTC and whole milliseconds, as every backend keeps them.
func (f *jobFixture) job(short string, next time.Time) store.Job {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return store.Job{
		ID: f.name(short), RequestID: f.name("req-" + short), KeyID: f.name("key"), Tenant: "t",
		Protocol: "openai.videos", Alias: "video", EdgeID: "video/sora-2/ep/c1", CredentialID: "c1",
		EndpointID: "ep", AccountID: "acct", Model: "sora-2", UpstreamID: "video_up_" + short,
		StatusURL: "https://queue.example/r/status", Domain: f.domain, Lease: f.name("lease-" + short),
		State: "queued", Queued: now.Add(-time.Second), Submitted: now, NextPoll: next.UTC().Truncate(time.Millisecond),
		PollEvery: time.Second, Expires: now.Add(time.Hour),
	}
}

func (f *jobFixture) createJob(j store.Job) {
	f.t.Helper()
	if err := f.s.CreateJob(f.t.Context(), j); err != nil {
		f.t.Fatalf("CreateJob(%s): %v", j.ID, err)
	}
}

func (f *jobFixture) update(j store.Job) bool {
	f.t.Helper()
	ok, err := f.s.UpdateJob(f.t.Context(), j)
	if err != nil {
		f.t.Fatalf("UpdateJob(%s): %v", j.ID, err)
	}
	return ok
}

func (f *jobFixture) due(now time.Time, hold time.Duration, limit int) []string {
	f.t.Helper()
	jobs, err := f.s.DueJobs(f.t.Context(), now, hold, limit)
	if err != nil {
		f.t.Fatalf("DueJobs: %v", err)
	}
	var ids []string
	for _, j := range jobs {
		if j.Domain == f.domain { // other runs may share the backend
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// testJobRoundTrip: a created job reads back whole, from every replica; an
// ID is created once; an unknown ID is ErrJobNotFound.
func testJobRoundTrip(t *testing.T, f *jobFixture) {
	j := f.job("a", time.Now())
	j.Running, j.Seconds = j.Submitted.Add(time.Second), 8
	j.Answer, j.Answered = []byte(`{"id":"video_up_a","status":"in_progress","progress":40}`), j.Running
	f.createJob(j)
	got, err := f.newReplica().Job(t.Context(), j.ID)
	if err != nil {
		t.Fatalf("Job from another replica: %v", err)
	}
	if !reflect.DeepEqual(got, j) {
		t.Errorf("Job =\n%+v\nwant\n%+v", got, j)
	}
	if err := f.s.CreateJob(t.Context(), j); err == nil {
		t.Error("CreateJob of an existing ID succeeded")
	}
	if _, err := f.s.Job(t.Context(), f.name("none")); !errors.Is(err, store.ErrJobNotFound) {
		t.Errorf("Job(unknown) error = %v, want ErrJobNotFound", err)
	}
	if _, err := f.s.UpdateJob(t.Context(), f.job("none", time.Now())); !errors.Is(err, store.ErrJobNotFound) {
		t.Errorf("UpdateJob(unknown) error = %v, want ErrJobNotFound", err)
	}
}

// testJobEndsOnce: updates replace a running job; the first update that
// ends it wins, and nothing replaces an ended job.
func testJobEndsOnce(t *testing.T, f *jobFixture) {
	j := f.job("a", time.Now())
	f.createJob(j)
	j.State, j.Running = "in_progress", j.Submitted.Add(time.Second)
	if !f.update(j) {
		t.Fatal("UpdateJob of a running job = false")
	}
	end := j
	end.State, end.Ended = "completed", j.Running.Add(time.Second)
	if !f.update(end) {
		t.Fatal("first UpdateJob that ends the job = false")
	}
	again := end
	again.State = "failed"
	if f.update(again) {
		t.Error("second UpdateJob that ends the job = true")
	}
	if f.update(j) {
		t.Error("UpdateJob of a running state over an ended job = true")
	}
	got, err := f.s.Job(t.Context(), j.ID)
	if err != nil || got.State != "completed" || !got.Done() {
		t.Errorf("Job = %+v, %v; want the first end (completed)", got, err)
	}
}

// testJobEndRace: of many replicas ending one job at once, exactly one wins.
func testJobEndRace(t *testing.T, f *jobFixture) {
	j := f.job("a", time.Now())
	f.createJob(j)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		r := f.newReplica()
		wg.Go(func() {
			end := j
			end.State, end.Ended = "completed", time.Now().UTC().Truncate(time.Millisecond)
			end.Seconds = float64(i)
			ok, err := r.UpdateJob(t.Context(), end)
			if err != nil {
				t.Errorf("UpdateJob: %v", err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d replicas ended the job, want exactly 1", n)
	}
}

// testJobsDue: DueJobs returns running jobs whose poll is due, earliest
// first, up to the limit, and holds them from other pollers; ended jobs and
// jobs due later are not returned.
func testJobsDue(t *testing.T, f *jobFixture) {
	now := time.Now()
	early, late, future, ended := f.job("early", now.Add(-2*time.Second)), f.job("late", now.Add(-time.Second)),
		f.job("future", now.Add(time.Hour)), f.job("ended", now.Add(-3*time.Second))
	for _, j := range []store.Job{late, early, future, ended} {
		f.createJob(j)
	}
	ended.State, ended.Ended = "failed", now
	f.update(ended)
	if got := f.due(now, time.Hour, 1000); !reflect.DeepEqual(got, []string{early.ID, late.ID}) {
		t.Fatalf("DueJobs = %v, want [early late]", got)
	}
	if got := f.due(now.Add(time.Minute), time.Hour, 1000); len(got) != 0 {
		t.Errorf("DueJobs while held = %v, want none", got)
	}
	later := now.Add(2 * time.Hour)
	if got := f.due(later, time.Minute, 1000); len(got) != 3 {
		t.Errorf("DueJobs after the hold = %v, want early, late and future", got)
	}
	// The limit: another case's jobs may come first in a shared backend, so
	// only its upper bound is checked.
	if jobs, err := f.s.DueJobs(t.Context(), later.Add(time.Hour), time.Minute, 2); err != nil || len(jobs) > 2 {
		t.Errorf("DueJobs with limit 2 = %d jobs, %v", len(jobs), err)
	}
	// An update sets the next poll.
	early.NextPoll = later.Add(10 * time.Hour).Truncate(time.Millisecond)
	f.update(early)
	if got := f.due(later.Add(5*time.Hour), time.Minute, 1000); !reflect.DeepEqual(got, []string{late.ID, future.ID}) {
		t.Errorf("DueJobs after rescheduling early = %v, want [late future]", got)
	}
}

// testJobExpires: a record is forgotten at Expires, and is no longer due.
func testJobExpires(t *testing.T, f *jobFixture) {
	j := f.job("a", time.Now().Add(-time.Second))
	j.Expires = time.Now().Add(300 * time.Millisecond)
	f.createJob(j)
	if _, err := f.s.Job(t.Context(), j.ID); err != nil {
		t.Fatalf("Job before it expires: %v", err)
	}
	time.Sleep(300*time.Millisecond + clockSlop)
	if _, err := f.s.Job(t.Context(), j.ID); !errors.Is(err, store.ErrJobNotFound) {
		t.Errorf("Job after it expired: err = %v, want ErrJobNotFound", err)
	}
	if got := f.due(time.Now(), time.Minute, 1000); len(got) != 0 {
		t.Errorf("DueJobs after it expired = %v, want none", got)
	}
}

// testJobDelete: a deleted job is gone for every replica and no longer due;
// deleting an unknown ID is no error.
func testJobDelete(t *testing.T, f *jobFixture) {
	j := f.job("a", time.Now().Add(-time.Second))
	f.createJob(j)
	if err := f.s.DeleteJob(t.Context(), j.ID); err != nil {
		t.Fatalf("DeleteJob: %v", err)
	}
	if _, err := f.newReplica().Job(t.Context(), j.ID); !errors.Is(err, store.ErrJobNotFound) {
		t.Errorf("Job after DeleteJob: err = %v, want ErrJobNotFound", err)
	}
	if got := f.due(time.Now(), time.Minute, 1000); len(got) != 0 {
		t.Errorf("DueJobs after DeleteJob = %v, want none", got)
	}
	if err := f.s.DeleteJob(t.Context(), f.name("none")); err != nil {
		t.Errorf("DeleteJob(unknown) = %v, want nil", err)
	}
}

// testJobList: ListJobs selects by queued time, state, tenant and key,
// newest first, limited after selecting, from every replica; a deleted
// or expired job is not listed.
func testJobList(t *testing.T, f *jobFixture) {
	base := time.Now().UTC().Truncate(time.Millisecond)
	job := func(short string, queued time.Duration, tenant string, state sluice.JobState) store.Job {
		j := f.job(short, base.Add(time.Hour))
		j.Queued, j.Tenant, j.State = base.Add(queued), tenant, state
		return j
	}
	other := job("other-key", 0, "t1", "queued")
	other.KeyID = f.name("key-2")
	expiring := job("expiring", -time.Minute, "t1", "queued")
	expiring.Expires = time.Now().Add(300 * time.Millisecond)
	for _, j := range []store.Job{
		job("a", -3*time.Minute, "t1", "queued"), job("b", -2*time.Minute, "t2", "in_progress"),
		job("c", -time.Minute, "t1", "completed"), job("deleted", -30*time.Second, "t1", "queued"), other, expiring,
	} {
		f.createJob(j)
	}
	if err := f.s.DeleteJob(t.Context(), f.name("deleted")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300*time.Millisecond + clockSlop)
	key := f.name("key")
	for _, c := range []struct {
		name string
		f    store.JobFilter
		want []string
	}{
		{"Key", store.JobFilter{KeyID: key}, []string{"c", "b", "a"}},
		{"Since", store.JobFilter{KeyID: key, Since: base.Add(-2 * time.Minute)}, []string{"c", "b"}},
		{"State", store.JobFilter{KeyID: key, State: "queued"}, []string{"a"}},
		{"Tenant", store.JobFilter{KeyID: key, Tenant: "t1"}, []string{"c", "a"}},
		{"Limit", store.JobFilter{KeyID: key, Tenant: "t1", Limit: 1}, []string{"c"}},
		{"OtherKey", store.JobFilter{KeyID: f.name("key-2")}, []string{"other-key"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			jobs, err := f.newReplica().ListJobs(t.Context(), c.f)
			if err != nil {
				t.Fatalf("ListJobs: %v", err)
			}
			var got []string
			for _, j := range jobs {
				got = append(got, strings.TrimPrefix(j.ID, f.prefix))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ListJobs(%+v) = %v, want %v", c.f, got, c.want)
			}
		})
	}
}
