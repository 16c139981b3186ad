package degraded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/degraded"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/store/storetest/history"
)

// unreachable is a shared store that is down: every capacity and
// inspector call fails as an unreachable Redis's would. Its wake-ups are a
// memstore's, which never sends any.
type unreachable struct{ *memstore.Store }

var errDown = errors.New("connection refused")

func down(op string) error { return errors.Join(store.ErrUnavailable, errors.New(op), errDown) }

func (unreachable) Acquire(context.Context, store.Acquire) (store.Grant, error) {
	return store.Grant{}, down("acquire")
}
func (unreachable) Release(context.Context, string, string, store.Outcome) error {
	return down("release")
}
func (unreachable) Renew(context.Context, string, []string, time.Duration) error {
	return down("renew")
}
func (unreachable) Cancel(context.Context, string, string, string) error { return down("cancel") }
func (unreachable) ProbeSucceeded(context.Context, string, string) error { return down("probe") }
func (unreachable) Reassert(context.Context, string, []store.Held) error { return down("reassert") }
func (unreachable) Units(context.Context, string, []string) ([]store.UnitState, error) {
	return nil, down("units")
}
func (unreachable) CredentialInFlight(context.Context, string, []string) (map[string]int, error) {
	return nil, down("credentials")
}

// TestDegradedHistories checks a degraded Store of one replica against
// the reference model on random histories while its shared store is
// unreachable from the start: every decision is its local store's, with
// caps ÷ 1. (redisstore's tests run it over a live Redis.)
func TestDegradedHistories(t *testing.T) {
	c := &history.Clock{}
	s := degraded.New(unreachable{memstore.New()}, memstore.NewWith(memstore.Options{Now: c.Now}), degraded.Options{
		Replicas: 1,
		Ping:     func(context.Context) error { return down("ping") },
	})
	t.Cleanup(func() { s.Close() })
	// The first call finds the shared store down; the histories run after.
	if _, err := s.Acquire(t.Context(), store.Acquire{Domain: "enter", Ticket: "t", Queue: "q", LeaseTTL: time.Second,
		Candidates: []store.Candidate{{Unit: store.Unit{ID: "u"}, Credential: "c"}}}); err != nil || !s.Degraded() {
		t.Fatalf("first Acquire: %v, degraded %t; want nil, true", err, s.Degraded())
	}
	// No Reassert: while cut off it is the shared store's alone (local
	// leases keep counting locally until the hand-over).
	tg := history.Target{Claims: s, Inspector: s, Waker: s, SetClock: c.Set, WakeWait: 5 * time.Second, MayFailUnheld: true}
	history.Replay(t, tg)
	history.Run(t, tg, 300)
}
