// Package memledger keeps usage records and the billing ledger in memory,
// for tests and for a single process that needs no durability. It copies on every write and
// read, so callers never share state with the store.
//
// It must not depend on anything but package sluice and the ledger interfaces.
package memledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Store implements ledger.Usage and ledger.Billing. The zero value is an
// empty store ready for use. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	recs     map[string]sluice.UsageRecord // by RequestID
	accounts map[string]ledger.BillingAccount
	prices   map[priceID]billing.Price
	entries  map[entryID]ledger.Entry
}

var (
	_ ledger.Usage   = (*Store)(nil)
	_ ledger.Billing = (*Store)(nil)
)

// RecordUsage stores copies of the records whose RequestID is not stored
// yet, with their times in UTC, and their charges; the others, and later
// duplicates within recs, change nothing.
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
		if e, ok := ledger.ChargeOf(&c); ok {
			s.post(e)
		}
	}
	return nil
}

// ListUsage returns copies of the records f selects, oldest first (ties by
// RequestID), at most f.Limit of them.
func (s *Store) ListUsage(_ context.Context, f ledger.UsageFilter) ([]sluice.UsageRecord, error) {
	s.mu.Lock()
	var out []sluice.UsageRecord
	for _, r := range s.recs {
		if f.Selects(&r) {
			out = append(out, clone(r))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b sluice.UsageRecord) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.RequestID, b.RequestID))
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// CountExecutions counts the executions of the selected records by key,
// account, credential, expected accounts and fallback reason.
func (s *Store) CountExecutions(_ context.Context, f ledger.PolicyFilter) ([]ledger.PolicyCount, error) {
	type group struct{ key, account, credential, expected, fallback string }
	index := make(map[group]int) // → position in out
	var out []ledger.PolicyCount
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		if !f.Selects(r.KeyID, r.Started) {
			continue
		}
		for _, e := range r.Executions {
			g := group{r.KeyID, e.AccountID, e.CredentialID, strings.Join(e.Expected, "\x00"), e.Fallback}
			i, ok := index[g]
			if !ok {
				i = len(out)
				index[g] = i
				out = append(out, ledger.PolicyCount{KeyID: r.KeyID, AccountID: e.AccountID, CredentialID: e.CredentialID,
					Expected: slices.Clone(e.Expected), Fallback: e.Fallback})
			}
			out[i].Executions++
		}
	}
	slices.SortFunc(out, ledger.ComparePolicyCounts)
	return out, nil
}

// clone copies r deeply enough that neither copy can change the other.
func clone(r sluice.UsageRecord) sluice.UsageRecord {
	r.Executions = slices.Clone(r.Executions)
	for i := range r.Executions {
		r.Executions[i].Expected = slices.Clone(r.Executions[i].Expected)
	}
	if r.Job != nil {
		job := *r.Job
		r.Job = &job
	}
	if r.Billing != nil {
		charge := *r.Billing
		r.Billing = &charge
	}
	return r
}

// SummarizeUsage adds up the records f selects.
func (s *Store) SummarizeUsage(_ context.Context, f ledger.UsageFilter, bucket ledger.Bucket) (ledger.UsageSummary, error) {
	if bucket.Width() == 0 {
		return ledger.UsageSummary{}, fmt.Errorf("usage summary: unknown bucket %q", bucket)
	}
	sum := ledger.NewSummarizer(bucket)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		if f.Selects(&r) {
			sum.Add(&r)
		}
	}
	return sum.Summary(), nil
}
