// Package memledger keeps usage records in memory, for tests and for a
// single process that needs no durability. It copies on every write and
// read, so callers never share state with the store.
//
// It must not depend on anything but package sluice and the ledger interfaces.
package memledger

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Store implements ledger.Usage. The zero value is an empty store ready for
// use. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	recs map[string]sluice.UsageRecord // by RequestID
}

var _ ledger.Usage = (*Store)(nil)

// RecordUsage stores copies of the records whose RequestID is not stored
// yet, with their times in UTC; the others, and later duplicates within
// recs, change nothing.
func (s *Store) RecordUsage(_ context.Context, recs []sluice.UsageRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = make(map[string]sluice.UsageRecord)
	}
	for _, r := range recs {
		if _, ok := s.recs[r.RequestID]; ok {
			continue
		}
		c := clone(r)
		c.Started = c.Started.UTC()
		for i := range c.Executions {
			c.Executions[i].Started = c.Executions[i].Started.UTC()
		}
		s.recs[r.RequestID] = c
	}
	return nil
}

// ListUsage returns copies of the records started at or after since, oldest
// first (ties by RequestID), at most limit of them (limit <= 0 means no limit).
func (s *Store) ListUsage(_ context.Context, since time.Time, limit int) ([]sluice.UsageRecord, error) {
	s.mu.Lock()
	var out []sluice.UsageRecord
	for _, r := range s.recs {
		if !r.Started.Before(since) {
			out = append(out, clone(r))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b sluice.UsageRecord) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.RequestID, b.RequestID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// clone copies r deeply enough that neither copy can change the other.
func clone(r sluice.UsageRecord) sluice.UsageRecord {
	r.Executions = slices.Clone(r.Executions)
	return r
}
