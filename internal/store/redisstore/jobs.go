package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
)

// Job bindings live apart from the capacity domains (a poll arrives with
// only a job ID, so the binding cannot be found through a domain), spread
// over jobShards hash tags chosen by a hash of the job ID, so that on a
// Redis Cluster they spread over the primaries. Each shard has its own due
// index, in the slot of its jobs, so that one script can write a job and
// its place in the index:
//
//	P{jobs:N}:job:<id>  HASH  rec → JSON store.Job, ended → 0/1; expires at Job.Expires
//	P{jobs:N}:due       ZSET  job ID → next background poll (unix ms), jobs not ended only
//	P{jobs:N}:all       ZSET  job ID → queued (unix ms), every job: ListJobs reads it, and
//	                          drops the IDs whose record has expired
//	P{jobs:N}:exp       ZSET  job ID → when its record expires (unix ms): each new job of
//	                          the shard sweeps a few expired ones out of the three sets
//
// with N = FNV-1a(id) mod jobShards. DueJobs looks at every shard, in one
// pipelined round trip per primary. The layout before the shards kept
// every job under one tag, P{jobs}:…; MigrateJobs moves such jobs.
const jobShards = 16

func jobShard(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % jobShards)
}

func (s *Store) shardTag(n int) string { return s.prefix + "{jobs:" + strconv.Itoa(n) + "}:" }
func (s *Store) jobKey(id string) string {
	return s.shardTag(jobShard(id)) + "job:" + id
}
func (s *Store) dueKey(n int) string { return s.shardTag(n) + "due" }
func (s *Store) allKey(n int) string { return s.shardTag(n) + "all" }
func (s *Store) expKey(n int) string { return s.shardTag(n) + "exp" }

// jobArgs are the keys and arguments of job_create and job_update.
func (s *Store) jobArgs(j store.Job) ([]string, []any, error) {
	if j.ID == "" {
		return nil, nil, errors.New("redisstore: job without an ID")
	}
	rec, err := json.Marshal(j)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: job %s: %w", j.ID, err)
	}
	keys, args := s.jobRecordArgs(j.ID, string(rec), j.Done(), j.NextPoll, j.Expires, j.Queued)
	return keys, args, nil
}

// jobRecordArgs are jobArgs for a record already encoded.
func (s *Store) jobRecordArgs(id, rec string, ended bool, nextPoll, expires, queued time.Time) ([]string, []any) {
	var expiresMs int64
	if !expires.IsZero() {
		expiresMs = max(expires.UnixMilli(), 1)
	}
	n := jobShard(id)
	keys := []string{s.jobKey(id), s.dueKey(n), s.allKey(n), s.expKey(n)}
	return keys, []any{id, rec, flag(ended), nextPoll.UnixMilli(), expiresMs, queued.UnixMilli()}
}

// CreateJob stores a new job binding.
func (s *Store) CreateJob(ctx context.Context, j store.Job) error {
	keys, args, err := s.jobArgs(j)
	if err != nil {
		return err
	}
	n, err := jobCreateScript.Run(ctx, s.rdb, keys, args...).Int()
	if err != nil {
		return unavailable("create job "+j.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: job %s exists", j.ID)
	}
	return nil
}

// Job returns the job binding with id.
func (s *Store) Job(ctx context.Context, id string) (store.Job, error) {
	raw, err := s.rdb.HGet(ctx, s.jobKey(id), "rec").Result()
	if errors.Is(err, redis.Nil) {
		return store.Job{}, store.ErrJobNotFound
	}
	if err != nil {
		return store.Job{}, unavailable("job "+id, err)
	}
	return decodeJob(id, raw)
}

// UpdateJob replaces the job binding unless it has ended.
func (s *Store) UpdateJob(ctx context.Context, j store.Job) (bool, error) {
	keys, args, err := s.jobArgs(j)
	if err != nil {
		return false, err
	}
	n, err := jobUpdateScript.Run(ctx, s.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return false, unavailable("update job "+j.ID, err)
	case n < 0:
		return false, store.ErrJobNotFound
	}
	return n == 1, nil
}

// dueJob is a job ID found due in its shard's index.
type dueJob struct {
	id    string
	shard int
	at    float64 // its next poll, unix ms
}

// DueJobs takes the running jobs due for a poll and reads their records, in
// three pipelined round trips (each one per primary of a cluster): the
// earliest due of every shard, then a script per shard that takes the
// earliest limit of them unless another poller took them meanwhile, then
// their records. An ID whose record has expired is dropped from its index.
func (s *Store) DueJobs(ctx context.Context, now time.Time, hold time.Duration, limit int) ([]store.Job, error) {
	if limit <= 0 {
		return nil, nil
	}
	due, err := s.peekDue(ctx, now, limit)
	if err != nil || len(due) == 0 {
		return nil, err
	}
	ids, err := s.takeDue(ctx, due, now, hold)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return s.readDue(ctx, ids)
}

// peekDue returns the earliest limit jobs due at now over every shard,
// earliest first.
func (s *Store) peekDue(ctx context.Context, now time.Time, limit int) ([]dueJob, error) {
	var cmds [jobShards]*redis.ZSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range jobShards {
			cmds[n] = p.ZRangeByScoreWithScores(ctx, s.dueKey(n), &redis.ZRangeBy{
				Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(limit),
			})
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("due jobs", err)
	}
	var due []dueJob
	for n, c := range cmds {
		for _, z := range c.Val() {
			due = append(due, dueJob{id: z.Member.(string), shard: n, at: z.Score})
		}
	}
	slices.SortFunc(due, func(a, b dueJob) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id)) })
	return due[:min(len(due), limit)], nil
}

// takeDue defers the next poll of the due jobs still due at now to
// now+hold, one job_due script per shard, and returns those it took,
// earliest first. EVAL rather than EVALSHA: a pipeline cannot fall back on
// NOSCRIPT, and the script is short.
func (s *Store) takeDue(ctx context.Context, due []dueJob, now time.Time, hold time.Duration) ([]string, error) {
	byShard := make(map[int][]any)
	for _, d := range due {
		byShard[d.shard] = append(byShard[d.shard], d.id)
	}
	cmds := make(map[int]*redis.Cmd, len(byShard))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n, ids := range byShard {
			args := append([]any{now.UnixMilli(), now.Add(hold).UnixMilli()}, ids...)
			cmds[n] = jobDueScript.Eval(ctx, p, []string{s.dueKey(n)}, args...)
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("due jobs", err)
	}
	taken := make(map[string]bool, len(due))
	for _, c := range cmds {
		ids, err := c.StringSlice()
		if err != nil {
			return nil, unavailable("due jobs", err)
		}
		for _, id := range ids {
			taken[id] = true
		}
	}
	ids := make([]string, 0, len(taken))
	for _, d := range due {
		if taken[d.id] {
			ids = append(ids, d.id)
		}
	}
	return ids, nil
}

// readDue reads the records of the jobs taken, dropping from the due
// indexes those whose record has expired.
func (s *Store) readDue(ctx context.Context, ids []string) ([]store.Job, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.jobKey(id), "rec")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("due jobs", err)
	}
	jobs := make([]store.Job, 0, len(ids))
	var gone []string
	for i, c := range cmds {
		raw, err := c.Result()
		if errors.Is(err, redis.Nil) {
			gone = append(gone, ids[i])
			continue
		}
		j, err := decodeJob(ids[i], raw)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if len(gone) > 0 {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, id := range gone {
				p.ZRem(ctx, s.dueKey(jobShard(id)), id)
			}
			return nil
		})
		if err != nil {
			return nil, unavailable("due jobs", err)
		}
	}
	return jobs, nil
}

// DeleteJob forgets the job binding.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.jobKey(id))
		p.ZRem(ctx, s.dueKey(jobShard(id)), id)
		p.ZRem(ctx, s.allKey(jobShard(id)), id)
		p.ZRem(ctx, s.expKey(jobShard(id)), id)
		return nil
	})
	if err != nil {
		return unavailable("delete job "+id, err)
	}
	return nil
}

// ListJobs reads every shard's set of jobs queued since f.Since, newest
// first, in one pipelined round trip, then the records of the IDs in that
// order, a page at a time, until f.Limit of them are selected. The IDs
// whose record has expired are dropped from the sets.
func (s *Store) ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	from := "-inf"
	if !f.Since.IsZero() {
		from = strconv.FormatInt(f.Since.UnixMilli(), 10)
	}
	cmds := make([]*redis.ZSliceCmd, jobShards)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range jobShards {
			cmds[n] = p.ZRangeByScoreWithScores(ctx, s.allKey(n), &redis.ZRangeBy{Min: from, Max: "+inf"})
		}
		return nil
	}); err != nil {
		return nil, unavailable("list jobs", err)
	}
	var ids []redis.Z
	for _, c := range cmds {
		ids = append(ids, c.Val()...)
	}
	slices.SortFunc(ids, func(a, b redis.Z) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Member.(string), b.Member.(string)))
	})
	var out []store.Job
	const page = 500
	for len(ids) > 0 && (f.Limit <= 0 || len(out) < f.Limit) {
		chunk := ids[:min(len(ids), page)]
		ids = ids[len(chunk):]
		jobs, err := s.readJobs(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for i := range jobs {
			if f.Selects(&jobs[i]) {
				out = append(out, jobs[i])
			}
		}
	}
	slices.SortFunc(out, store.CompareJobsNewestFirst) // IDs of one millisecond may order otherwise
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// readJobs reads the records of ids, dropping from the sets of every job
// those whose record has expired.
func (s *Store) readJobs(ctx context.Context, ids []redis.Z) ([]store.Job, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range ids {
			cmds[i] = p.HGet(ctx, s.jobKey(z.Member.(string)), "rec")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("list jobs", err)
	}
	var (
		jobs []store.Job
		gone []string
	)
	for i, c := range cmds {
		id := ids[i].Member.(string)
		raw, err := c.Result()
		if errors.Is(err, redis.Nil) {
			gone = append(gone, id)
			continue
		}
		j, err := decodeJob(id, raw)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if len(gone) > 0 {
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, id := range gone {
				p.ZRem(ctx, s.allKey(jobShard(id)), id)
			}
			return nil
		}); err != nil {
			return nil, unavailable("list jobs", err)
		}
	}
	return jobs, nil
}

func decodeJob(id, raw string) (store.Job, error) {
	var j store.Job
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return store.Job{}, fmt.Errorf("redisstore: job %s: %w", id, err)
	}
	return j, nil
}

// MigrateJobs moves the job bindings stored under the layout before the
// shards (every job under the one tag P{jobs}) to their shards, so that
// jobs created before an upgrade are still followed after it. Every replica
// runs it at startup; running it twice, or on two replicas at once, moves
// each job once (a job is created in its shard only if absent there). It
// returns how many it moved. A replica of the older version still running
// keeps writing the old layout: the next start of a newer one moves those.
func (s *Store) MigrateJobs(ctx context.Context) (int, error) {
	legacy := s.prefix + "{jobs}:"
	node := redis.Cmdable(s.rdb)
	if cc, ok := s.rdb.(*redis.ClusterClient); ok { // the one slot of {jobs} is on one primary
		n, err := cc.MasterForKey(ctx, legacy+"due")
		if err != nil {
			return 0, unavailable("migrate jobs", err)
		}
		node = n
	}
	moved := 0
	for {
		var keys []string
		iter := node.Scan(ctx, 0, legacy+"job:*", 1000).Iterator()
		for len(keys) < 1000 && iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return moved, unavailable("migrate jobs", err)
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			ok, err := s.migrateJob(ctx, legacy, k[len(legacy+"job:"):])
			if err != nil {
				return moved, err
			}
			if ok {
				moved++
			}
		}
	}
	// What is left in the old due index are jobs whose record expired.
	if err := node.Del(ctx, legacy+"due").Err(); err != nil {
		return moved, unavailable("migrate jobs", err)
	}
	return moved, s.indexJobs(ctx)
}

// indexJobs adds to the sets of every job (P{jobs:N}:all) the jobs that
// an earlier version wrote without them, so that ListJobs lists them. It
// scans every primary's keys, so it runs once per prefix: a marker key
// records that it did. Jobs that a replica of an earlier version writes
// afterwards, during a rolling upgrade, are followed but not listed.
func (s *Store) indexJobs(ctx context.Context) error {
	marker := s.shardTag(0) + "all-indexed"
	switch n, err := s.rdb.Exists(ctx, marker).Result(); {
	case err != nil:
		return unavailable("index jobs", err)
	case n == 1:
		return nil
	}
	index := func(ctx context.Context, node *redis.Client) error {
		var ids []redis.Z
		iter := node.Scan(ctx, 0, s.prefix+"{jobs:*}:job:*", 1000).Iterator()
		for iter.Next(ctx) {
			if _, id, ok := strings.Cut(iter.Val(), "}:job:"); ok {
				ids = append(ids, redis.Z{Member: id})
			}
		}
		if err := iter.Err(); err != nil {
			return unavailable("index jobs", err)
		}
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), 500)]
			ids = ids[len(chunk):]
			jobs, err := s.readJobs(ctx, chunk)
			if err != nil {
				return err
			}
			if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, j := range jobs {
					p.ZAddNX(ctx, s.allKey(jobShard(j.ID)), redis.Z{Score: float64(j.Queued.UnixMilli()), Member: j.ID})
					if !j.Expires.IsZero() {
						p.ZAddNX(ctx, s.expKey(jobShard(j.ID)), redis.Z{Score: float64(j.Expires.UnixMilli()), Member: j.ID})
					}
				}
				return nil
			}); err != nil {
				return unavailable("index jobs", err)
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, index)
	} else if c, ok := s.rdb.(*redis.Client); ok {
		err = index(ctx, c)
	}
	if err != nil {
		return err
	}
	if err := s.rdb.Set(ctx, marker, "1", 0).Err(); err != nil {
		return unavailable("index jobs", err)
	}
	return nil
}

// migrateJob moves one legacy job: its record, end flag and expiry, and
// its place in the due index. It reports false for a job that expired
// before it could.
func (s *Store) migrateJob(ctx context.Context, legacy, id string) (bool, error) {
	old, oldDue := legacy+"job:"+id, legacy+"due"
	var rec *redis.SliceCmd
	var ttl *redis.DurationCmd
	var next *redis.FloatCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.HMGet(ctx, old, "rec", "ended")
		ttl = p.PTTL(ctx, old)
		next = p.ZScore(ctx, oldDue, id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, unavailable("migrate job "+id, err)
	}
	v := rec.Val()
	raw, ok := v[0].(string)
	if !ok { // expired since the scan
		return false, nil
	}
	var expires time.Time
	if d := ttl.Val(); d > 0 {
		expires = time.Now().Add(d)
	}
	j, err := decodeJob(id, raw)
	if err != nil {
		return false, err
	}
	keys, args := s.jobRecordArgs(id, raw, v[1] == "1", time.UnixMilli(int64(next.Val())), expires, j.Queued)
	if _, err := jobCreateScript.Run(ctx, s.rdb, keys, args...).Int(); err != nil { // 0: moved by another replica
		return false, unavailable("migrate job "+id, err)
	}
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, old)
		p.ZRem(ctx, oldDue, id)
		return nil
	}); err != nil {
		return false, unavailable("migrate job "+id, err)
	}
	return true, nil
}
