package redisstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
)

// TestJobsSpreadOverPrimaries: on a three-primary cluster, the jobs of one
// store land on every primary, not in one slot.
func TestJobsSpreadOverPrimaries(t *testing.T) {
	s := clusterReplica(t, testPrefix())
	cc := s.rdb.(*redis.ClusterClient)
	nodes := map[string]bool{}
	for i := range 32 {
		id := fmt.Sprintf("job-%d", i)
		if err := s.CreateJob(t.Context(), store.Job{ID: id, NextPoll: time.Now()}); err != nil {
			t.Fatal(err)
		}
		n, err := cc.MasterForKey(t.Context(), s.jobKey(id))
		if err != nil {
			t.Fatal(err)
		}
		nodes[n.Options().Addr] = true
	}
	if len(nodes) != 3 {
		t.Errorf("32 jobs landed on %d primaries, want 3", len(nodes))
	}
	if jobs, err := s.DueJobs(t.Context(), time.Now(), time.Minute, 100); err != nil || len(jobs) != 32 {
		t.Errorf("DueJobs = %d jobs, %v; want all 32", len(jobs), err)
	}
}

// TestDueJobsLimitTakesTheEarliest: with more jobs due than the limit,
// DueJobs takes the earliest over every shard and leaves the others due.
func TestDueJobsLimitTakesTheEarliest(t *testing.T) {
	s := newTestBackend(t).replica()
	now := time.Now().Truncate(time.Millisecond)
	for i := range 20 {
		j := store.Job{ID: fmt.Sprintf("j%02d", i), NextPoll: now.Add(-time.Duration(20-i) * time.Second)}
		if err := s.CreateJob(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := s.DueJobs(t.Context(), now, time.Hour, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.ID)
	}
	if fmt.Sprint(got) != "[j00 j01 j02 j03 j04]" {
		t.Errorf("DueJobs(limit 5) = %v, want the five earliest [j00 … j04]", got)
	}
	if rest, err := s.DueJobs(t.Context(), now, time.Hour, 100); err != nil || len(rest) != 15 {
		t.Errorf("DueJobs after = %d jobs, %v; want the other 15", len(rest), err)
	}
}

// TestMigrateJobs: jobs stored under the layout before the shards (one
// {jobs} tag) are moved to their shards with their record, end, expiry and
// next poll, on a cluster where the old and new slots are on different
// primaries; a second run moves nothing.
func TestMigrateJobs(t *testing.T) {
	s := clusterReplica(t, testPrefix())
	ctx := t.Context()
	legacy := s.prefix + "{jobs}:"
	now := time.Now().Truncate(time.Millisecond)
	running := store.Job{ID: "running", State: "in_progress", NextPoll: now.Add(-time.Second), Expires: now.Add(time.Hour)}
	ended := store.Job{ID: "ended", State: "completed", Ended: now, Expires: now.Add(time.Hour)}
	for _, j := range []store.Job{running, ended} {
		rec, _ := json.Marshal(j)
		if err := s.rdb.HSet(ctx, legacy+"job:"+j.ID, "rec", rec, "ended", flag(j.Done())).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.rdb.PExpireAt(ctx, legacy+"job:"+j.ID, j.Expires).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.rdb.ZAdd(ctx, legacy+"due", redis.Z{Score: float64(running.NextPoll.UnixMilli()), Member: running.ID},
		redis.Z{Score: 1, Member: "expired-long-ago"}).Err(); err != nil {
		t.Fatal(err)
	}

	if n, err := s.MigrateJobs(ctx); err != nil || n != 2 {
		t.Fatalf("MigrateJobs = %d, %v; want 2 moved", n, err)
	}
	for _, j := range []store.Job{running, ended} {
		got, err := s.Job(ctx, j.ID)
		if err != nil || got.State != j.State {
			t.Errorf("Job(%s) after the migration = %+v, %v", j.ID, got, err)
		}
		if ttl := s.rdb.PTTL(ctx, s.jobKey(j.ID)).Val(); ttl < 59*time.Minute {
			t.Errorf("job %s expires in %s, want its hour kept", j.ID, ttl)
		}
	}
	if ok, err := s.UpdateJob(ctx, ended); ok || err != nil {
		t.Errorf("UpdateJob(ended) = %v, %v; want false: it stays ended", ok, err)
	}
	due, err := s.DueJobs(ctx, now, time.Minute, 10)
	if err != nil || len(due) != 1 || due[0].ID != running.ID {
		t.Errorf("DueJobs after the migration = %v, %v; want [running]", due, err)
	}
	if n := s.rdb.Exists(ctx, legacy+"job:running", legacy+"job:ended", legacy+"due").Val(); n != 0 {
		t.Errorf("%d legacy keys left, want none", n)
	}
	if n, err := s.MigrateJobs(ctx); err != nil || n != 0 {
		t.Errorf("second MigrateJobs = %d, %v; want 0", n, err)
	}
	if jobs, err := s.ListJobs(ctx, store.JobFilter{}); err != nil || len(jobs) != 2 {
		t.Errorf("ListJobs after the migration = %v, %v; want both jobs", jobs, err)
	}
}

// TestMigrateJobsIndexesJobsOfEarlierVersions: jobs an earlier version
// wrote in their shards, without the set of every job, are listed after
// MigrateJobs, which indexes them once.
func TestMigrateJobsIndexesJobsOfEarlierVersions(t *testing.T) {
	s := clusterReplica(t, testPrefix())
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := store.Job{ID: "old", KeyID: "k", State: "in_progress", Queued: now.Add(-time.Minute), Expires: now.Add(time.Hour)}
	rec, _ := json.Marshal(old)
	if err := s.rdb.HSet(ctx, s.jobKey(old.ID), "rec", rec, "ended", flag(false)).Err(); err != nil {
		t.Fatal(err)
	}
	if jobs, err := s.ListJobs(ctx, store.JobFilter{}); err != nil || len(jobs) != 0 {
		t.Fatalf("ListJobs before = %v, %v; want none (not indexed yet)", jobs, err)
	}
	if _, err := s.MigrateJobs(ctx); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.ListJobs(ctx, store.JobFilter{Since: now.Add(-time.Hour)})
	if err != nil || len(jobs) != 1 || jobs[0].ID != old.ID || !jobs[0].Queued.Equal(old.Queued) {
		t.Errorf("ListJobs after MigrateJobs = %v, %v; want the old job", jobs, err)
	}
}

// TestExpiredJobsLeaveTheSets: a job whose record has expired is swept out
// of its shard's sets by the next job created there, with no listing to
// read it: the sets of a busy gateway hold what is live, not every job it
// ever ran (a soak found them growing by one entry per job).
func TestExpiredJobsLeaveTheSets(t *testing.T) {
	b := newTestBackend(t)
	s := b.replica()
	ctx := t.Context()
	setSizes := func() (all, exp int64) {
		for n := range jobShards {
			all += s.rdb.ZCard(ctx, s.allKey(n)).Val()
			exp += s.rdb.ZCard(ctx, s.expKey(n)).Val()
		}
		return all, exp
	}
	soon := time.Now().Add(50 * time.Millisecond)
	var old []string
	for i := range 20 {
		id := fmt.Sprintf("old-%d", i)
		old = append(old, id)
		if err := s.CreateJob(ctx, store.Job{ID: id, State: "completed", Queued: time.Now(), Ended: time.Now(), Expires: soon}); err != nil {
			t.Fatal(err)
		}
	}
	if all, exp := setSizes(); all != 20 || exp != 20 {
		t.Fatalf("sets hold %d and %d jobs, want 20 each", all, exp)
	}
	for time.Now().Before(soon.Add(10 * time.Millisecond)) {
		time.Sleep(10 * time.Millisecond)
	}
	// One new job in each shard that holds an old one.
	for shard := range jobShards {
		if !slices.ContainsFunc(old, func(id string) bool { return jobShard(id) == shard }) {
			continue
		}
		id := ""
		for i := 0; id == "" || jobShard(id) != shard; i++ {
			id = fmt.Sprintf("new-%d-%d", shard, i)
		}
		if err := s.CreateJob(ctx, store.Job{ID: id, State: "in_progress", Queued: time.Now(), Expires: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := s.ListJobs(ctx, store.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if all, exp := setSizes(); all != int64(len(jobs)) || exp != all {
		t.Errorf("sets hold %d and %d jobs after the sweep, want the %d live ones each", all, exp, len(jobs))
	}
}
