package memstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/store/storetest/history"
)

// fakeClock is a clock a history moves; memstore reads it under its
// domain locks, so it is atomic.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

func (c *fakeClock) set(_ context.Context, now time.Time, _ []string) error {
	c.ns.Store(now.UnixNano())
	return nil
}

func newHistoryTarget() history.Target {
	c := &fakeClock{}
	s := memstore.NewWith(memstore.Options{Now: c.now})
	return history.Target{Claims: s, Inspector: s, Waker: s, SetClock: c.set}
}

// TestHistories checks memstore against the reference model on random
// histories (see package history).
func TestHistories(t *testing.T) {
	history.Run(t, newHistoryTarget(), 1000)
}
