package degraded_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/degraded"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/store/storetest/history"
)

// switchable is a shared store that answers as its memstore until it is
// cut off; from then on every capacity and inspector call fails as an
// unreachable Redis's would. Its wake-ups are the memstore's.
type switchable struct {
	*memstore.Store
	down atomic.Bool
}

var errDown = errors.New("connection refused")

// cut is the failure of op once the store is cut off, nil before.
func (s *switchable) cut(op string) error {
	if !s.down.Load() {
		return nil
	}
	return errors.Join(store.ErrUnavailable, errors.New(op), errDown)
}

func (s *switchable) Acquire(ctx context.Context, a store.Acquire) (store.Grant, error) {
	if err := s.cut("acquire"); err != nil {
		return store.Grant{}, err
	}
	return s.Store.Acquire(ctx, a)
}
func (s *switchable) Release(ctx context.Context, domain, lease string, out store.Outcome) error {
	if err := s.cut("release"); err != nil {
		return err
	}
	return s.Store.Release(ctx, domain, lease, out)
}
func (s *switchable) Renew(ctx context.Context, domain string, leases []string, ttl time.Duration) error {
	if err := s.cut("renew"); err != nil {
		return err
	}
	return s.Store.Renew(ctx, domain, leases, ttl)
}
func (s *switchable) Cancel(ctx context.Context, domain, queue, ticket string) error {
	if err := s.cut("cancel"); err != nil {
		return err
	}
	return s.Store.Cancel(ctx, domain, queue, ticket)
}
func (s *switchable) ProbeSucceeded(ctx context.Context, domain, lease string) error {
	if err := s.cut("probe"); err != nil {
		return err
	}
	return s.Store.ProbeSucceeded(ctx, domain, lease)
}
func (s *switchable) Reassert(ctx context.Context, domain string, held []store.Held) error {
	if err := s.cut("reassert"); err != nil {
		return err
	}
	return s.Store.Reassert(ctx, domain, held)
}
func (s *switchable) Units(ctx context.Context, domain string, ids []string) ([]store.UnitState, error) {
	if err := s.cut("units"); err != nil {
		return nil, err
	}
	return s.Store.Units(ctx, domain, ids)
}
func (s *switchable) CredentialInFlight(ctx context.Context, domain string, ids []string) (map[string]int, error) {
	if err := s.cut("credentials"); err != nil {
		return nil, err
	}
	return s.Store.CredentialInFlight(ctx, domain, ids)
}
func (s *switchable) ping(context.Context) error { return s.cut("ping") }

// TestDegradedHistories checks a degraded Store of one replica against
// the reference model on random histories while its shared store is
// unreachable from the start: every decision is its local store's, with
// caps ÷ 1. (redisstore's tests run it over a live Redis.)
func TestDegradedHistories(t *testing.T) {
	c := &history.Clock{}
	shared := &switchable{Store: memstore.New()}
	shared.down.Store(true)
	s := degraded.New(shared, memstore.NewWith(memstore.Options{Now: c.Now}), degraded.Options{Replicas: 1, Ping: shared.ping})
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

// TestOutageHistories checks a degraded Store of one replica whose shared
// store (a memstore on the history's clock) answers until an Outage
// operation cuts it off: from then on the replica decides locally, and
// the calls the shared store granted count there (see
// history.Target.Outage). A new pair of stores for every history: the
// way back, which holds new claims for a second of real time, is
// degraded's own tests'.
func TestOutageHistories(t *testing.T) {
	history.RunEach(t, outageTarget(1, func(l *memstore.Store) degraded.Local { return l }), 600)
}

// TestOutageHistoriesOfOneReplicaOfThree: the same, the replica one of
// three, so that after the outage it decides on its third of every cap
// and rate (the others' calls it cannot see).
func TestOutageHistoriesOfOneReplicaOfThree(t *testing.T) {
	history.RunEach(t, outageTarget(3, func(l *memstore.Store) degraded.Local { return l }), 300)
}

// TestOutageHistoriesCatchForgottenCalls: a local store that drops the
// calls in flight it is given at the outage (Reassert) is caught.
func TestOutageHistoriesCatchForgottenCalls(t *testing.T) {
	f := history.FindEach(t.Context(), outageTarget(1, func(l *memstore.Store) degraded.Local { return forgetful{l} }), 1, 600)
	if f.Err == nil {
		t.Fatalf("%d histories agreed with a local store that forgets the calls in flight", f.Histories)
	}
	t.Logf("caught after %d histories, shrunk to %d operations: %v", f.Histories, len(f.Shrunk), f.Err)
}

type forgetful struct{ *memstore.Store }

func (forgetful) Reassert(context.Context, string, []store.Held) error { return nil }

// outageTarget makes, for each history, a degraded Store of one replica of
// replicas on a switchable shared memstore and the local store local makes
// of a memstore, both on the history's clock.
func outageTarget(replicas int, local func(*memstore.Store) degraded.Local) func() (history.Target, func()) {
	return func() (history.Target, func()) {
		c := &history.Clock{}
		shared := &switchable{Store: memstore.NewWith(memstore.Options{Now: c.Now})}
		s := degraded.New(shared, local(memstore.NewWith(memstore.Options{Now: c.Now})), degraded.Options{Replicas: replicas, Ping: shared.ping})
		outage := func(ctx context.Context) error {
			shared.down.Store(true)
			// A call that finds the shared store down turns the replica
			// to local state at once, mirroring the calls in flight.
			enter := store.Acquire{Domain: "enter", Ticket: "t", Queue: "q", LeaseTTL: time.Second,
				Candidates: []store.Candidate{{Unit: store.Unit{ID: "u"}, Credential: "c"}}}
			if _, err := s.Acquire(ctx, enter); err != nil || !s.Degraded() {
				return errors.Join(errors.New("the outage did not turn the replica to local state"), err)
			}
			return s.Release(ctx, enter.Domain, enter.Ticket, store.Outcome{})
		}
		share := func(c store.Candidate) store.Candidate { return degraded.ScaleCandidate(c, replicas) }
		return history.Target{Claims: s, Inspector: s, Waker: s, SetClock: c.Set, WakeWait: 5 * time.Second, Outage: outage, OutageShare: share},
			func() { s.Close() }
	}
}
