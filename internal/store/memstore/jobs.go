package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// jobs holds the job bindings. DueJobs scans them all: one process holds as
// many jobs as it has run within their retention, a few thousand at most.
type jobs struct {
	mu   sync.Mutex
	byID map[string]store.Job
}

// CreateJob stores a new job.
func (s *Store) CreateJob(_ context.Context, j store.Job) error {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	s.jobs.forget(time.Now())
	if _, ok := s.jobs.byID[j.ID]; ok {
		return fmt.Errorf("memstore: job %s exists", j.ID)
	}
	s.jobs.byID[j.ID] = j
	return nil
}

// Job returns the job with id.
func (s *Store) Job(_ context.Context, id string) (store.Job, error) {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	j, ok := s.jobs.byID[id]
	if !ok || expired(&j, time.Now()) {
		return store.Job{}, store.ErrJobNotFound
	}
	return j, nil
}

// UpdateJob replaces the job unless it has ended.
func (s *Store) UpdateJob(_ context.Context, j store.Job) (bool, error) {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	old, ok := s.jobs.byID[j.ID]
	if !ok || expired(&old, time.Now()) {
		return false, store.ErrJobNotFound
	}
	if old.Done() {
		return false, nil
	}
	s.jobs.byID[j.ID] = j
	return true, nil
}

// DueJobs returns the running jobs due for a poll and defers their next one.
func (s *Store) DueJobs(_ context.Context, now time.Time, hold time.Duration, limit int) ([]store.Job, error) {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	s.jobs.forget(time.Now()) // records expire by the clock, whatever now the poller asks about
	var due []store.Job
	for _, j := range s.jobs.byID {
		if !j.Done() && !j.NextPoll.After(now) {
			due = append(due, j)
		}
	}
	slices.SortFunc(due, func(a, b store.Job) int { return cmp.Or(a.NextPoll.Compare(b.NextPoll), cmp.Compare(a.ID, b.ID)) })
	due = due[:min(len(due), max(limit, 0))]
	for _, j := range due {
		j.NextPoll = now.Add(hold)
		s.jobs.byID[j.ID] = j
	}
	return due, nil
}

// forget drops the records past their expiry. s.jobs.mu must be held.
func (js *jobs) forget(now time.Time) {
	for id, j := range js.byID {
		if expired(&j, now) {
			delete(js.byID, id)
		}
	}
}

func expired(j *store.Job, now time.Time) bool {
	return !j.Expires.IsZero() && !now.Before(j.Expires)
}
