package history

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock is a fake clock for an in-process store (memstore.Options.Now):
// Set is a Target's SetClock, Now the store's clock. Until set, and once
// set to the zero time, it reads time.Now. Safe for concurrent use: a
// store reads it under its own locks.
type Clock struct{ ns atomic.Int64 }

// Now returns the time last set, or time.Now.
func (c *Clock) Now() time.Time {
	if ns := c.ns.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Now()
}

// Set makes now the clock of every domain (the zero time: time.Now).
func (c *Clock) Set(_ context.Context, now time.Time, _ []string) error {
	var ns int64
	if !now.IsZero() {
		ns = now.UnixNano()
	}
	c.ns.Store(ns)
	return nil
}
