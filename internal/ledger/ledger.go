// Package ledger defines the durable accounting records: usage records with
// their executions (and, later, ledger entries). Implementations live in
// memledger and sqlledger; ledgertest holds the contract suite. This package
// depends only on package sluice.
package ledger

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
)

// Usage stores usage records. Safe for concurrent use.
type Usage interface {
	// RecordUsage writes the records idempotently by RequestID: writing a
	// record whose RequestID is already stored changes nothing.
	RecordUsage(ctx context.Context, recs []sluice.UsageRecord) error
	// ListUsage returns records started at or after since, oldest first, at
	// most limit of them (limit <= 0 means no limit), executions included.
	ListUsage(ctx context.Context, since time.Time, limit int) ([]sluice.UsageRecord, error)
}
