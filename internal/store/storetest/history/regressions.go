package history

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Regressions are minimal histories on which a store once disagreed with
// the model (shrunk by Find, then written out by hand). Every store runs
// them (Replay) besides the random ones.
var Regressions = []struct {
	Name string
	Ops  []Op
}{
	// memstore kept a dead waiter (past its last Acquire + LeaseTTL) in
	// its place when it asked again; redisstore had reaped it, and queues
	// it as a newcomer, arriving now.
	{"DeadWaiterAsksAgainAsNewcomer", []Op{
		acquire("d0", "t1", "q0", 0, "a", 1, 0, 60005, cand("u0", 2, "c0.0", 0, rpm(3))),
		acquire("d0", "t2", "q0", 1, "", 1, 50, 10005, cand("u0", 1, "c0.0", 0, rpm(3))),
		advance(20 * time.Second),
		acquire("d0", "t2", "q0", 1, "", 1, 50, 10005, cand("u0", 1, "c0.0", 0, rpm(3))),
		{Kind: Inspect, Domain: "d0"},
	}},
	// memstore counted dead waiters in a class's fairness (V, F_t), so a
	// tenant whose tickets died was tagged behind them; redisstore reaps
	// them first.
	{"DeadWaitersLeaveFairness", func() []Op {
		u := store.Unit{ID: "u0", Base: 100 * time.Millisecond, Max: 2 * time.Second}
		l0 := store.Unit{ID: "l0", TPM: 1000}
		l1 := store.Unit{ID: "l1", Cap: 1, RPM: 2}
		c := func(credCap int, lims ...store.Unit) store.Candidate {
			return store.Candidate{Unit: u, Credential: "c0.0", CredentialCap: credCap, Limits: lims}
		}
		return []Op{
			acquire("d1", "t6", "q0", 0, "a", 2, 1500, 10005, c(0, l0, l1)),
			acquire("d1", "t7", "q0", 2, "a", 1, 0, 10005, c(0, l1)),
			acquire("d1", "t8", "q0", 2, "a", 2, 700, 60005, c(0, l0)),
			advance(61 * time.Second),
			acquire("d1", "t4", "q0", 1, "a", 1, 50, 10005, c(1, l0)),
			acquire("d1", "t13", "q0", 2, "", 2, 1500, 10005, c(0, l0, l1)),
			acquire("d1", "t7", "q0", 2, "a", 1, 0, 10005, c(0, l1)),
			acquire("d1", "t21", "q0", 2, "", 2, 0, 10005, c(0)),
		}
	}()},
	// memstore's Cancel did not wake the next waiter of a unit whose only
	// other lease had expired: it checked the room before reaping.
	{"CancelWakesPastExpiredLease", func() []Op {
		u := store.Unit{ID: "u0", Cap: 2, Max: 2 * time.Second, Reserve: []int{0, 1}, RPM: 3}
		l0 := store.Unit{ID: "l0", RPM: 4, Base: 200 * time.Millisecond, Max: 3 * time.Second}
		l1 := store.Unit{ID: "l1", Cap: 3}
		return []Op{
			acquire("d0", "t0", "q0", 2, "", 2, 700, 60005, store.Candidate{Unit: u, Credential: "c0.0"}),
			acquire("d0", "t1", "q0", 1, "", 2, 0, 60005, store.Candidate{Unit: u, Credential: "c0.1", CredentialCap: 1, Limits: []store.Unit{l0, l1}}),
			acquire("d0", "t2", "q0", 1, "b", 1, 1500, 60005, store.Candidate{Unit: u, Credential: "c0.0"}),
			{Kind: Renew, Domain: "d0", Lease: "t1", TTL: 10005 * time.Millisecond},
			acquire("d0", "t6", "q1", 2, "", 1, 0, 60005, store.Candidate{Unit: u, Credential: "c0.1"}),
			advance(20 * time.Second),
			{Kind: Cancel, Domain: "d0", Queue: "q1", Lease: "t6"},
		}
	}()},
	// memstore checked a candidate's windows before its credential's cap,
	// and gave a RetryAt for a window while a release would announce the
	// credential's slot; redisstore (and the model) check the slot first.
	{"FullCredentialSetsNoRetryAt", func() []Op {
		u1 := store.Unit{ID: "u1", Base: 100 * time.Millisecond, Max: 10 * time.Second, RPM: 3}
		u0 := store.Unit{ID: "u0", Base: 100 * time.Millisecond}
		l0 := store.Unit{ID: "l0", Cap: 2, RPM: 10}
		return []Op{
			acquire("d0", "t7", "q1", 2, "", 1, 0, 2005,
				store.Candidate{Unit: u1, Credential: "c1.0"}, store.Candidate{Unit: u0, Credential: "c0.0", CredentialCap: 1}),
			acquire("d0", "t9", "q0", 0, "a", 2, 0, 60005, store.Candidate{Unit: u1, Credential: "c1.0", Limits: []store.Unit{l0}}),
			acquire("d0", "t10", "q0", 0, "a", 3, 700, 10005,
				store.Candidate{Unit: u1, Credential: "c1.0", Limits: []store.Unit{l0}},
				store.Candidate{Unit: u0, Credential: "c0.0", CredentialCap: 1, Limits: []store.Unit{l0}}),
			acquire("d0", "t11", "q0", 2, "", 3, 0, 10005, store.Candidate{Unit: u1, Credential: "c1.0", CredentialCap: 1, Limits: []store.Unit{l0}}),
		}
	}()},
	// memstore's Grant.Cooling counted a limit closed by its probe after
	// the probe's lease had expired: it did not reap the limit first.
	{"ExpiredLimitProbeDoesNotCool", func() []Op {
		u0 := store.Unit{ID: "u0", Cap: 1}
		u1 := store.Unit{ID: "u1", Cap: 2}
		l0 := store.Unit{ID: "l0", Cap: 2, Base: 200 * time.Millisecond, Max: 3 * time.Second}
		on := func(u store.Unit) store.Candidate {
			return store.Candidate{Unit: u, Credential: "c." + u.ID, Limits: []store.Unit{l0}}
		}
		return []Op{
			acquire("d1", "t2", "q0", 0, "", 1, 0, 10005, on(u0)),
			acquire("d1", "t3", "q0", 2, "b", 1, 0, 60005, on(u1)),
			{Kind: Release, Domain: "d1", Lease: "t3", Out: store.Outcome{RateLimited: true, RetryAfter: time.Second, Cool: "l0"}},
			advance(time.Second),
			acquire("d1", "t4", "q1", 1, "b", 1, 0, 2005, on(u1), on(u0)), // l0's probe
			advance(3 * time.Second), // its lease expires
			acquire("d1", "t10", "q0", 2, "", 1, 0, 2005, on(u0)),
		}
	}()},
	// memstore's Reassert set the unit's cap from the reasserted
	// candidate, where redisstore (and memstore's own field) keep the
	// last Acquire's: with cap 0 from the Acquire, the release of the
	// reasserted lease must wake the waiter a full credential held back.
	{"ReassertKeepsTheLastAcquiresCap", func() []Op {
		u2 := store.Unit{ID: "u2"}
		l1 := store.Unit{ID: "l1", Cap: 1}
		return []Op{
			acquire("d1", "t11", "q0", 2, "", 0, 0, 2005, store.Candidate{Unit: u2, Credential: "c2.0", Limits: []store.Unit{l1}}),
			acquire("d1", "t13", "q1", 2, "a", 1, 0, 10005, store.Candidate{Unit: u2, Credential: "c2.0", CredentialCap: 1}),
			{Kind: Reassert, Domain: "d1", Held: store.Held{Lease: "t3", Candidate: store.Candidate{Unit: store.Unit{ID: "u2", Cap: 1}, Credential: "c2.0"}, TTL: 10005 * time.Millisecond}},
			{Kind: Release, Domain: "d1", Lease: "t3", Out: store.Outcome{Success: true}},
		}
	}()},
	// memstore kept a waiter live at the very instant of its deadline,
	// redisstore (as both do for a lease) dead from then on.
	{"WaiterDeadAtItsDeadline", []Op{
		acquire("d0", "t0", "q0", 0, "", 1, 0, 60005, cand("u0", 1, "c0", 0, store.Unit{})),
		acquire("d0", "t1", "q0", 0, "", 1, 0, 2000, cand("u0", 1, "c0", 0, store.Unit{})),
		advance(2 * time.Second),
		{Kind: Inspect, Domain: "d0"},
	}},
	// memstore took a unit's Cap only from the candidates it tried before
	// granting, redisstore from every candidate listed: a release then
	// woke by different caps. Both now keep the last Cap listed.
	{"SkippedCandidateTakesTheListedCap", func() []Op {
		u0 := func(cap int) store.Unit { return store.Unit{ID: "u0", Cap: cap} }
		u1 := store.Unit{ID: "u1", Cap: 2, Base: time.Second, TPM: 1200}
		l0 := store.Unit{ID: "l0", Cap: 3, Base: 200 * time.Millisecond, Max: 3 * time.Second, RPM: 3}
		return []Op{
			acquire("d1", "t4", "q1", 1, "b", 1, 0, 60005, store.Candidate{Unit: u0(2), Credential: "c0.1", Limits: []store.Unit{l0}}),
			{Kind: Reassert, Domain: "d1", Held: store.Held{Lease: "t7", Candidate: store.Candidate{Unit: u0(2), Credential: "c0.0"}, Tokens: 700, TTL: 60005 * time.Millisecond}},
			acquire("d1", "t8", "q0", 0, "b", 3, 50, 60005, store.Candidate{Unit: u0(0), Credential: "c0.1", CredentialCap: 1}),
			acquire("d1", "t11", "q1", 0, "b", 1, 0, 60005, store.Candidate{Unit: u0(0), Credential: "c0.0", Limits: []store.Unit{l0}}),
			acquire("d1", "t5", "q1", 2, "a", 1, 0, 60005,
				store.Candidate{Unit: u1, Credential: "c1.0"}, store.Candidate{Unit: u0(2), Credential: "c0.0", CredentialCap: 1}),
			{Kind: Release, Domain: "d1", Lease: "t11", Out: store.Outcome{Success: true}},
		}
	}()},
	// memstore's ProbeSucceeded stopped a lease being a probe even when
	// a success had opened its unit meanwhile; redisstore (and the spec:
	// "for a lease that is not the unit's live probe it does nothing")
	// leave it as it is, so it is still granted as the probe.
	{"ProbeSucceededAfterTheUnitOpened", func() []Op {
		u0 := store.Unit{ID: "u0", Cap: 2, Base: 100 * time.Millisecond, Max: 10 * time.Second, RPM: 4}
		t0 := acquire("d0", "t0", "q0", 1, "a", 2, 200, 60005, store.Candidate{Unit: u0, Credential: "c0.0"})
		return []Op{
			t0,
			{Kind: Release, Domain: "d0", Lease: "t0", Out: store.Outcome{RateLimited: true}},
			advance(time.Second),
			t0, // the probe
			{Kind: Reassert, Domain: "d0", Held: store.Held{Lease: "t1", Candidate: store.Candidate{Unit: u0, Credential: "c0.0"}, TTL: 2005 * time.Millisecond}},
			{Kind: Release, Domain: "d0", Lease: "t1", Out: store.Outcome{Success: true}}, // opens u0
			{Kind: Probe, Domain: "d0", Lease: "t0"},
			t0,
		}
	}()},
}

// Replay checks every regression history against tg.
func Replay(t *testing.T, tg Target) {
	for _, r := range Regressions {
		t.Run(r.Name, func(t *testing.T) {
			if err := Check(context.WithoutCancel(t.Context()), tg, r.Ops); err != nil {
				t.Errorf("%v\n%s", err, Format(r.Ops))
			}
		})
	}
}

func acquire(domain, ticket, queue string, class int, tenant string, weight, tokens int, ttlMillis int, cands ...store.Candidate) Op {
	return Op{Kind: Acquire, Acquire: store.Acquire{
		Domain: domain, Ticket: ticket, Queue: queue, Candidates: cands, LeaseTTL: time.Duration(ttlMillis) * time.Millisecond,
		Replica: "r0", Class: class, Tenant: tenant, Weight: weight, Tokens: tokens,
	}}
}

func cand(unit string, cap int, cred string, credCap int, u store.Unit) store.Candidate {
	u.ID, u.Cap = unit, cap
	return store.Candidate{Unit: u, Credential: cred, CredentialCap: credCap}
}

func rpm(n int) store.Unit { return store.Unit{RPM: n} }

func advance(d time.Duration) Op { return Op{Kind: Advance, Step: d} }
