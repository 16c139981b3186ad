// Package ledger defines the durable accounting records: usage records with
// their executions, and the money side — billing accounts, stored prices,
// ledger entries (Billing). Implementations live in memledger and
// sqlledger; ledgertest holds the contract suite. This package depends only
// on package sluice and the pure package billing.
package ledger

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// Usage stores usage records. Safe for concurrent use.
type Usage interface {
	// RecordUsage writes the records idempotently: writing again a record
	// that is stored (its RequestID, and its Started, which the record
	// fixes when it is made and the spool keeps to the nanosecond)
	// changes nothing. Records of one RequestID with other starts are not
	// the same record (request IDs are unique): a store partitioned by
	// day (sqlledger on PostgreSQL) may keep each. A record's
	// charge (see Billing) is written in the same transaction: a record is
	// stored with its charge or not at all, and charged once. An error
	// that is ErrRecordRefused says the store refused what the records
	// hold, and would refuse them again; any other, that it could not
	// write them now.
	RecordUsage(ctx context.Context, recs []sluice.UsageRecord) error
	// ListUsage returns the records f selects, oldest first (ties by
	// RequestID), at most f.Limit of them, executions included. A store
	// may rely on no execution starting before its record (a request's
	// attempts follow its arrival; a job's run, its submit).
	ListUsage(ctx context.Context, f UsageFilter) ([]sluice.UsageRecord, error)
	// SummarizeUsage adds up the records f selects (f.Limit aside) by
	// bucket of their start; bucket must be valid (see Bucket.Width).
	SummarizeUsage(ctx context.Context, f UsageFilter, bucket Bucket) (UsageSummary, error)
	// CountExecutions counts the executions of the records that f selects,
	// one PolicyCount per distinct (key, account, credential, expected,
	// fallback), ordered by key, account, credential, expected, fallback.
	CountExecutions(ctx context.Context, f PolicyFilter) ([]PolicyCount, error)
	// CacheReport sums the prompt-cache usage and the session-affinity
	// placements of the records f selects, grouped by f.By (see
	// CacheRow), in the order of CompareCacheRows: one row per group
	// that holds an execution.
	CacheReport(ctx context.Context, f CacheFilter) ([]CacheRow, error)
	// UpstreamReport sums the executions f selects by credential and
	// status, in the order of CompareUpstreamRows: one row per pair that
	// holds an execution.
	UpstreamReport(ctx context.Context, f UpstreamFilter) ([]UpstreamRow, error)
}

// ErrRecordRefused is RecordUsage's error when the store refused the
// records themselves (a value out of its range, text it cannot hold): the
// writer must find the record at fault and set it aside, since writing it
// again fails again and would hold back every record behind it.
var ErrRecordRefused = errors.New("the store refuses a record")

// PolicyFilter selects usage records for CountExecutions by their key and
// start: From <= Started < To. An empty KeyID selects every key; a zero From
// or To leaves that end open.
type PolicyFilter struct {
	KeyID    string
	From, To time.Time
}

// Selects reports whether f selects a record of keyID started at started.
func (f PolicyFilter) Selects(keyID string, started time.Time) bool {
	return (f.KeyID == "" || keyID == f.KeyID) &&
		(f.From.IsZero() || !started.Before(f.From)) &&
		(f.To.IsZero() || started.Before(f.To))
}

// PolicyCount is how many executions of one key ran on one account and
// credential with the same Expected accounts and Fallback reason: what the
// key's route policy meant against what happened.
type PolicyCount struct {
	KeyID        string
	AccountID    string
	CredentialID string
	Expected     []string // as in sluice.Execution; empty = any account
	Fallback     string   // as in sluice.Execution; empty = not a fallback
	Executions   int64
}

// OnExpected reports whether these executions ran where the policy meant
// them to: on one of the Expected accounts, or anywhere when it named none.
func (c *PolicyCount) OnExpected() bool {
	if c.Fallback != "" {
		return false
	}
	return len(c.Expected) == 0 || slices.Contains(c.Expected, c.AccountID)
}

// ComparePolicyCounts orders counts by key, account, credential, expected
// accounts and fallback reason: the order CountExecutions returns.
func ComparePolicyCounts(a, b PolicyCount) int {
	return cmp.Or(
		cmp.Compare(a.KeyID, b.KeyID),
		cmp.Compare(a.AccountID, b.AccountID),
		cmp.Compare(a.CredentialID, b.CredentialID),
		slices.Compare(a.Expected, b.Expected),
		cmp.Compare(a.Fallback, b.Fallback),
	)
}
