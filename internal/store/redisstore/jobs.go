package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
)

// Job bindings live under their own hash tag, apart from the capacity
// domains: a poll arrives with only a job ID, so the binding cannot be found
// through a domain.
//
//	P{jobs}:job:<id>  HASH  rec → JSON store.Job, ended → 0/1; expires at Job.Expires
//	P{jobs}:due       ZSET  job ID → next background poll (unix ms), jobs not ended only

func (s *Store) jobKey(id string) string { return s.prefix + "{jobs}:job:" + id }
func (s *Store) dueKey() string          { return s.prefix + "{jobs}:due" }

// jobArgs are the keys and arguments of job_create and job_update.
func (s *Store) jobArgs(j store.Job) ([]string, []any, error) {
	if j.ID == "" {
		return nil, nil, errors.New("redisstore: job without an ID")
	}
	rec, err := json.Marshal(j)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: job %s: %w", j.ID, err)
	}
	var expires int64
	if !j.Expires.IsZero() {
		expires = max(j.Expires.UnixMilli(), 1)
	}
	return []string{s.jobKey(j.ID), s.dueKey()}, []any{j.ID, rec, flag(j.Done()), j.NextPoll.UnixMilli(), expires}, nil
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

// DueJobs takes the running jobs due for a poll (one script run) and reads
// their records (one pipelined round trip). An ID whose record has expired
// is dropped from the due set.
func (s *Store) DueJobs(ctx context.Context, now time.Time, hold time.Duration, limit int) ([]store.Job, error) {
	if limit <= 0 {
		return nil, nil
	}
	ids, err := jobDueScript.Run(ctx, s.rdb, []string{s.dueKey()}, now.UnixMilli(), now.Add(hold).UnixMilli(), limit).StringSlice()
	if err != nil {
		return nil, unavailable("due jobs", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.jobKey(id), "rec")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("due jobs", err)
	}
	jobs := make([]store.Job, 0, len(ids))
	var gone []any
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
		if err := s.rdb.ZRem(ctx, s.dueKey(), gone...).Err(); err != nil {
			return nil, unavailable("due jobs", err)
		}
	}
	return jobs, nil
}

// DeleteJob forgets the job binding.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.jobKey(id))
		p.ZRem(ctx, s.dueKey(), id)
		return nil
	})
	if err != nil {
		return unavailable("delete job "+id, err)
	}
	return nil
}

func decodeJob(id, raw string) (store.Job, error) {
	var j store.Job
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return store.Job{}, fmt.Errorf("redisstore: job %s: %w", id, err)
	}
	return j, nil
}
