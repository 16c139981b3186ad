package redisstore

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store/degraded"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/store/storetest/history"
)

// historyTarget is s for package history: its clock is the test build's
// (see export_test.go), its hints come through pub/sub, and it loses a
// domain's state by having its keys deleted.
func historyTarget(s *Store) history.Target {
	return history.Target{Claims: s, Inspector: s, Waker: s, Reasserter: s, SetClock: s.SetClock, WakeWait: 5 * time.Second,
		Lose: s.LoseState}
}

// TestHistories checks redisstore on one Redis against the reference
// model on random histories (see package history).
func TestHistories(t *testing.T) {
	tg := historyTarget(newPrivateBackend(t).replica())
	history.Replay(t, tg)
	history.Run(t, tg, 600)
}

// TestClusterHistories checks redisstore on the three-primary cluster: the
// domains of each history land on different nodes, and its wake-ups cross
// them.
func TestClusterHistories(t *testing.T) {
	tg := historyTarget(clusterReplica(t, testPrefix()))
	history.Replay(t, tg)
	history.Run(t, tg, 300)
}

// TestDegradedHistories checks a degraded Store of one replica over this
// Redis (shared state, the usual case: every call passes through) against
// the model; package degraded's own test runs it with Redis down.
func TestDegradedHistories(t *testing.T) {
	s := newPrivateBackend(t).replica()
	// A Redis call that fails mid-run (a timeout on a loaded machine)
	// hands the decisions to the local store, which the histories do not
	// model: the outage is logged with its cause, and a disagreement after
	// it is said to be the outage's.
	var outages atomic.Int32
	d := degraded.New(s, memstore.New(), degraded.Options{Replicas: 1,
		Ping:    func(ctx context.Context) error { return s.rdb.Ping(ctx).Err() },
		Log:     slog.New(slog.NewTextHandler(t.Output(), nil)),
		Changed: func(degraded bool) { outages.Add(int32(flag(degraded))) },
	})
	t.Cleanup(func() {
		d.Close()
		if n := outages.Load(); n > 0 && t.Failed() {
			t.Logf("Redis was unreachable %d times during the run (logged above): the disagreement is the outage's, which the histories do not model", n)
		}
	})
	// No Reassert: a degraded store reasserts only the leases it was
	// granted (one it never was counts as ended, and is released at once),
	// while the histories reassert any ticket's.
	tg := history.Target{Claims: d, Inspector: d, Waker: d, SetClock: s.SetClock, WakeWait: 5 * time.Second}
	history.Replay(t, tg)
	history.Run(t, tg, 300)
}
