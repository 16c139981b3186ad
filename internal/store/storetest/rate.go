package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// The RPM and TPM windows are a GCRA with a one-minute burst tolerance: a
// fresh unit admits a whole minute's limit at once, then one request (or
// token) per minute/limit. The cases fill the burst first, then look at
// the next emission interval, which high limits keep short.

// rated returns a unit without a Cap, with rpm and tpm.
func (f *fixture) rated(short string, rpm, tpm int) store.Unit {
	u := f.unit(short, 0)
	u.RPM, u.TPM = rpm, tpm
	return u
}

// tokens returns a copy of a estimating n tokens.
func tokens(n int, a store.Acquire) store.Acquire {
	a.Tokens = n
	return a
}

func testRPMWindow(t *testing.T, f *fixture) {
	const rpm = 60 // one request a second, a burst of 60
	c := f.cand(f.rated("u", rpm, 0), "c", 0)
	first := time.Now()
	for i := range rpm {
		mustGrant(t, f.s, f.req(fmt.Sprintf("b%d", i), c))
	}
	firstDone := time.Now()
	if firstDone.Sub(first) > 500*time.Millisecond {
		t.Skipf("filling the burst took %v: too slow to check a 1 s interval", firstDone.Sub(first))
	}
	// Releasing frees the slot, not the window.
	f.release(f.s, "b0", store.Outcome{Success: true})
	w := f.req("w", c)
	g := mustQueueAt(t, f.s, w, 0)
	// The burst's first grant (between first and the end of the first
	// Acquire) set TAT to its time + 1 s; 60 grants later it is + 60 s, so
	// one more passes one interval after that first grant.
	within(t, "RetryAt", g.RetryAt, first.Add(time.Second), firstDone.Add(time.Second))
	sleepPast(g.RetryAt)
	mustGrant(t, f.s, w)
	g = mustQueueAt(t, f.s, f.req("w2", c), 0)
	if g.RetryAt.IsZero() || time.Until(g.RetryAt) < 500*time.Millisecond {
		t.Errorf("the next after the retried grant: RetryAt %v, want about 1 s from now", g.RetryAt)
	}
	f.cancel(f.s, "w2")
}

func testTPMReservation(t *testing.T, f *fixture) {
	const tpm = 6000 // 100 tokens a second, a burst of 6000
	c := f.cand(f.rated("u", 0, tpm), "c", 0)
	before := time.Now()
	mustGrant(t, f.s, tokens(tpm, f.req("big", c)))
	after := time.Now()
	// 30 tokens pass 300 ms after the big reservation.
	w := tokens(30, f.req("w", c))
	g := mustQueueAt(t, f.s, w, 0)
	within(t, "RetryAt", g.RetryAt, before.Add(300*time.Millisecond), after.Add(300*time.Millisecond))
	sleepPast(g.RetryAt)
	mustGrant(t, f.s, w)

	// An estimate above TPM runs alone: granted on an empty window (as a
	// reservation of TPM), and then nothing more until it rolls.
	huge := f.cand(f.rated("huge", 0, tpm), "ch", 0)
	mustGrant(t, f.s, tokens(3*tpm, f.req("h", huge)))
	g = mustQueue(t, f.s, tokens(1, f.in("q2", f.req("h2", huge))))
	if g.RetryAt.IsZero() || time.Until(g.RetryAt) > time.Second {
		t.Errorf("after an oversized grant: RetryAt %v, want within 1 s (one token's interval)", g.RetryAt)
	}
	if err := f.s.Cancel(t.Context(), f.domain, f.name("q2"), f.name("h2")); err != nil {
		t.Errorf("Cancel error: %v", err)
	}
}

func testTPMCorrection(t *testing.T, f *fixture) {
	const tpm = 6000
	c := f.cand(f.rated("u", 0, tpm), "c", 0)
	mustGrant(t, f.s, tokens(tpm, f.req("big", c)))
	mustQueue(t, f.s, tokens(3000, f.in("q2", f.req("probe", c))))
	if err := f.s.Cancel(t.Context(), f.domain, f.name("q2"), f.name("probe")); err != nil {
		t.Fatalf("Cancel error: %v", err)
	}
	// Only 100 of the 6000 were used: the window gives back the rest.
	f.release(f.s, "big", store.Outcome{Success: true, Tokens: 100})
	mustGrant(t, f.s, tokens(3000, f.req("half", c)))

	// A release without a measurement keeps the reservation: 3000 + 100
	// are still reserved, 3000 more do not fit.
	f.release(f.s, "half", store.Outcome{Success: true})
	mustQueue(t, f.s, tokens(3000, f.req("more", c)))
	f.cancel(f.s, "more")

	// Using more than reserved takes more: 1 token reserved, 5000 used.
	d := f.cand(f.rated("d", 0, tpm), "cd", 0)
	mustGrant(t, f.s, tokens(1, f.req("small", d)))
	f.release(f.s, "small", store.Outcome{Success: true, Tokens: 5000})
	mustQueue(t, f.s, tokens(2000, f.req("after", d)))
	f.cancel(f.s, "after")
}

func testTwoReplicasShareWindows(t *testing.T, f *fixture) {
	const rpm = 60
	ra, rb := f.s, f.newReplica()
	c := f.cand(f.rated("u", rpm, 0), "c", 0)
	start := time.Now()
	for i := range rpm - 1 {
		r := ra
		if i%2 == 1 {
			r = rb
		}
		mustGrant(t, r, f.req(fmt.Sprintf("b%d", i), c))
	}
	if time.Since(start) > 500*time.Millisecond {
		t.Skipf("filling the burst took %v: too slow to check a 1 s interval", time.Since(start))
	}
	// One request of the burst is left: of one Acquire from each replica
	// at once, exactly one is granted.
	a, b := f.in("qa", f.req("a", c)), f.in("qb", f.req("b", c))
	var (
		ga, gb     store.Grant
		errA, errB error
		wg         sync.WaitGroup
	)
	wg.Go(func() { ga, errA = ra.Acquire(t.Context(), a) })
	wg.Go(func() { gb, errB = rb.Acquire(t.Context(), b) })
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("Acquire errors: %v, %v", errA, errB)
	}
	if ga.Granted == gb.Granted {
		t.Errorf("replica A %+v, replica B %+v; want exactly one granted", ga, gb)
	}
	for _, x := range []store.Acquire{a, b} {
		if err := f.s.Cancel(t.Context(), f.domain, x.Queue, x.Ticket); err != nil {
			t.Errorf("Cancel error: %v", err)
		}
	}
}
