// Package sqlstore keeps the job bindings (store.Jobs) in the SQL database
// opened by sqldb: the home of jobs for a gateway whose hot state is in
// memory, so that a restart can still follow the jobs it started. Replicas
// that share a Redis keep their jobs there instead (redisstore).
//
// It depends on package store and sqldb; it never touches the schema,
// which sqldb owns.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/store"
)

// Jobs implements store.Jobs on a *sqldb.DB, which the caller owns. Safe
// for concurrent use, also by several processes sharing one database.
type Jobs struct {
	db    *sqldb.DB
	swept atomic.Int64 // unix ms of the last removal of expired records
}

// sweepEvery spaces the removals of expired records: DueJobs runs several
// times a second, and an idle gateway should not write that often.
const sweepEvery = time.Minute

var _ store.Jobs = (*Jobs)(nil)

// New returns the job bindings in db.
func New(db *sqldb.DB) *Jobs { return &Jobs{db: db} }

// row is what a job is stored as: its JSON record, and the columns queries
// select on.
func row(j store.Job) (record []byte, ended bool, nextPoll, expires int64, err error) {
	if j.ID == "" {
		return nil, false, 0, 0, errors.New("sqlstore: job without an ID")
	}
	if record, err = json.Marshal(j); err != nil {
		return nil, false, 0, 0, fmt.Errorf("sqlstore: job %s: %w", j.ID, err)
	}
	if !j.Expires.IsZero() {
		expires = max(j.Expires.UnixMilli(), 1)
	}
	return record, j.Done(), j.NextPoll.UnixMilli(), expires, nil
}

// live is the condition of a record that has not expired at the ? (unix ms).
const live = `(expires_at = 0 OR expires_at > ?)`

// CreateJob stores a new job binding.
func (s *Jobs) CreateJob(ctx context.Context, j store.Job) error {
	record, ended, next, expires, err := row(j)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	// An expired record of the same ID is forgotten first (IDs are random;
	// this only keeps the contract exact).
	if _, err := s.db.Exec(ctx, `DELETE FROM job_bindings WHERE id = ? AND NOT `+live, j.ID, now); err != nil {
		return fmt.Errorf("sqlstore: create job %s: %w", j.ID, err)
	}
	_, err = s.db.Exec(ctx, `INSERT INTO job_bindings (id, record, ended, next_poll, expires_at) VALUES (?, ?, ?, ?, ?)`,
		j.ID, string(record), ended, next, expires)
	if sqldb.IsUniqueViolation(err) {
		return fmt.Errorf("sqlstore: job %s exists", j.ID)
	}
	if err != nil {
		return fmt.Errorf("sqlstore: create job %s: %w", j.ID, err)
	}
	return nil
}

// Job returns the job binding with id.
func (s *Jobs) Job(ctx context.Context, id string) (store.Job, error) {
	var record string
	err := s.db.QueryRow(ctx, `SELECT record FROM job_bindings WHERE id = ? AND `+live, id, time.Now().UnixMilli()).Scan(&record)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Job{}, store.ErrJobNotFound
	}
	if err != nil {
		return store.Job{}, fmt.Errorf("sqlstore: job %s: %w", id, err)
	}
	return decode(id, record)
}

// UpdateJob replaces the job binding unless it has ended: one conditional
// UPDATE, so two processes ending a job at once cannot both win.
func (s *Jobs) UpdateJob(ctx context.Context, j store.Job) (bool, error) {
	record, ended, next, expires, err := row(j)
	if err != nil {
		return false, err
	}
	now := time.Now().UnixMilli()
	res, err := s.db.Exec(ctx, `UPDATE job_bindings SET record = ?, ended = ?, next_poll = ?, expires_at = ?
		WHERE id = ? AND NOT ended AND `+live, string(record), ended, next, expires, j.ID, now)
	if err != nil {
		return false, fmt.Errorf("sqlstore: update job %s: %w", j.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return n == 1, err
	}
	if _, err := s.Job(ctx, j.ID); err != nil {
		return false, err // ErrJobNotFound, or the store failing
	}
	return false, nil // it has ended
}

// DueJobs takes the running jobs due for a poll. Each is taken by moving
// its next poll only if it has not moved since it was read, so that of two
// processes reading the same due job, one polls it.
func (s *Jobs) DueJobs(ctx context.Context, now time.Time, hold time.Duration, limit int) ([]store.Job, error) {
	if limit <= 0 {
		return nil, nil
	}
	clock := time.Now().UnixMilli() // records expire by the clock, whatever now the poller asks about
	if last := s.swept.Load(); clock-last >= sweepEvery.Milliseconds() && s.swept.CompareAndSwap(last, clock) {
		if _, err := s.db.Exec(ctx, `DELETE FROM job_bindings WHERE NOT `+live, clock); err != nil {
			return nil, fmt.Errorf("sqlstore: due jobs: %w", err)
		}
	}
	rows, err := s.db.Query(ctx, `SELECT id, record, next_poll FROM job_bindings
		WHERE NOT ended AND next_poll <= ? AND `+live+` ORDER BY next_poll, id LIMIT ?`, now.UnixMilli(), clock, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: due jobs: %w", err)
	}
	type candidate struct {
		id, record string
		next       int64
	}
	var due []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.record, &c.next); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlstore: due jobs: %w", err)
		}
		due = append(due, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: due jobs: %w", err)
	}
	held := now.Add(hold)
	var jobs []store.Job
	for _, c := range due {
		j, err := decode(c.id, c.record)
		if err != nil {
			return nil, err
		}
		j.NextPoll = held
		record, _, _, _, err := row(j)
		if err != nil {
			return nil, err
		}
		res, err := s.db.Exec(ctx, `UPDATE job_bindings SET next_poll = ?, record = ? WHERE id = ? AND next_poll = ? AND NOT ended`,
			held.UnixMilli(), string(record), c.id, c.next)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: due jobs: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// ListJobs reads the live jobs and selects them in Go: their fields are
// in the JSON record, and a gateway holds few jobs (one per video, until
// it expires).
func (s *Jobs) ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	rows, err := s.db.Query(ctx, `SELECT id, record FROM job_bindings WHERE `+live, time.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list jobs: %w", err)
	}
	defer rows.Close()
	var out []store.Job
	for rows.Next() {
		var id, record string
		if err := rows.Scan(&id, &record); err != nil {
			return nil, fmt.Errorf("sqlstore: list jobs: %w", err)
		}
		j, err := decode(id, record)
		if err != nil {
			return nil, err
		}
		if f.Selects(&j) {
			out = append(out, j)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: list jobs: %w", err)
	}
	slices.SortFunc(out, store.CompareJobsNewestFirst)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// DeleteJob forgets the job binding.
func (s *Jobs) DeleteJob(ctx context.Context, id string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM job_bindings WHERE id = ?`, id); err != nil {
		return fmt.Errorf("sqlstore: delete job %s: %w", id, err)
	}
	return nil
}

func decode(id, record string) (store.Job, error) {
	var j store.Job
	if err := json.Unmarshal([]byte(record), &j); err != nil {
		return store.Job{}, fmt.Errorf("sqlstore: job %s: %w", id, err)
	}
	return j, nil
}
