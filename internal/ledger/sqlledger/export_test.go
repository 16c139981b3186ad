package sqlledger

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
)

// SetRetainBatch makes Retain delete n records per transaction and call
// after once each has committed.
func (s *Store) SetRetainBatch(n int, after func()) { s.retainBatch, s.afterBatch = n, after }

// RetainLock is the advisory lock key Retain's transactions take.
const RetainLock = retainLock

// RollUpDay rolls day up again, in a transaction of its own, as RollUp
// rolls up a day it has not.
func (s *Store) RollUpDay(ctx context.Context, day time.Time) error {
	return s.db.InTx(ctx, func(tx *sqldb.Tx) error { return s.rollUpDay(ctx, tx, heldDay{day: epochDay(day)}) })
}
