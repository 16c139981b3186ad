package memstore_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/store/storetest/history"
)

func newHistoryTarget() history.Target {
	c := &history.Clock{}
	s := memstore.NewWith(memstore.Options{Now: c.Now})
	return history.Target{Claims: s, Inspector: s, Waker: s, Reasserter: s, SetClock: c.Set}
}

// TestHistories checks memstore against the reference model on random
// histories (see package history).
func TestHistories(t *testing.T) {
	history.Replay(t, newHistoryTarget())
	history.Run(t, newHistoryTarget(), 1000)
}

// forgetsProbe is a deliberately broken store: its Release of a unit's
// post-cooldown probe forgets the probe's success, so the unit waits for
// another probe instead of opening.
type forgetsProbe struct {
	*memstore.Store
	probes map[string]bool // leases granted as probes
}

func (s *forgetsProbe) Acquire(ctx context.Context, a store.Acquire) (store.Grant, error) {
	g, err := s.Store.Acquire(ctx, a)
	if g.Probe {
		s.probes[a.Domain+"/"+g.Lease] = true
	}
	return g, err
}

func (s *forgetsProbe) Release(ctx context.Context, domain, lease string, out store.Outcome) error {
	if s.probes[domain+"/"+lease] {
		out.Success = false
	}
	return s.Store.Release(ctx, domain, lease, out)
}

// TestHistoriesCatchBrokenStore is the proof that the histories can fail:
// within the CI run's budget they find the broken store, and shrink its
// history to a few operations.
func TestHistoriesCatchBrokenStore(t *testing.T) {
	tg := newHistoryTarget()
	tg.Claims = &forgetsProbe{Store: tg.Claims.(*memstore.Store), probes: make(map[string]bool)}
	f := history.Find(t.Context(), tg, 1, 1000)
	if f.Err == nil {
		t.Fatalf("%d histories, %d operations: none caught a Release that forgets the probe's success", f.Histories, f.Ops)
	}
	if len(f.Shrunk) > 10 {
		t.Errorf("shrunk to %d operations, want at most 10:\n%s", len(f.Shrunk), history.Format(f.Shrunk))
	}
	t.Logf("caught after %d histories (%d operations), shrunk to %d:\n%v", f.Histories, f.Ops, len(f.Shrunk), f)
}
