package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/store"
)

// The cases below check the protocol of a limit that spans capacity
// domains (store.Unit.Domain): the capacity engine takes the limit's
// token in the limit's own domain, then the slot in the account's. They
// run the engine over the backend under test, as a replica does, so that
// a store that cannot carry the protocol (two domains that are not
// independent, a Cancel that does not release a granted token, a wake-up
// lost between domains) fails here.

// engine returns a capacity engine over a new replica handle of f's
// backend, running until the case ends, and its replica name.
func (f *fixture) engine(t *testing.T, short string) *capacity.Engine {
	s := f.newReplica()
	e := capacity.New(s, s, f.name(short), longTTL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() {
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer fcancel()
		_ = e.Flush(fctx)
		cancel()
		<-done
	})
	return e
}

// spanning is a tenant limit of n slots held in a domain of its own, and
// an account of cap slots in each of two other domains.
type spanning struct {
	tenant      store.Unit
	accounts    [2]store.Candidate
	domains     [2]string
	limitDomain string
}

func (f *fixture) spanning(n, cap int) spanning { return f.spanningIn("", n, cap) }

// spanningIn is spanning with names of its own, so a case may make two.
func (f *fixture) spanningIn(short string, n, cap int) spanning {
	var sp spanning
	sp.limitDomain = f.name(short + "dl")
	sp.tenant = store.Unit{ID: f.name(short + "tenant"), Cap: n, Domain: sp.limitDomain}
	for i := range 2 {
		sp.domains[i] = f.name(fmt.Sprintf("%sd%d", short, i))
		sp.accounts[i] = withLimits(f.cand(f.unit(fmt.Sprintf("%sa%d", short, i), cap), fmt.Sprintf("%sc%d", short, i), 0), sp.tenant)
	}
	return sp
}

// plan is a plan for account i of sp.
func (sp spanning) plan(i int) capacity.Plan {
	cands := []store.Candidate{sp.accounts[i]}
	return func() (string, []store.Candidate) { return sp.domains[i], cands }
}

// inFlight returns the tenant's in-flight count in its domain and each
// account's in its own.
func (f *fixture) spanInFlight(t *testing.T, sp spanning) (tenant int, accounts [2]int) {
	t.Helper()
	us, err := f.s.Units(t.Context(), sp.limitDomain, []string{sp.tenant.ID})
	if err != nil || len(us) != 1 {
		t.Fatalf("Units(tenant) = %+v, %v", us, err)
	}
	tenant = us[0].InFlight
	for i := range 2 {
		us, err := f.s.Units(t.Context(), sp.domains[i], []string{sp.accounts[i].Unit.ID})
		if err != nil || len(us) != 1 {
			t.Fatalf("Units(account %d) = %+v, %v", i, us, err)
		}
		accounts[i] = us[0].InFlight
	}
	return tenant, accounts
}

// testSpanningLimitNoOverAdmission: requests of two replicas race for a
// tenant limit of 2 held in its own domain, on accounts of two other
// domains: the tenant never has more than 2 in flight, nor an account
// more than its cap, every request is served, and once all are released
// no slot is left held anywhere.
func testSpanningLimitNoOverAdmission(t *testing.T, f *fixture) {
	const tenantCap, accountCap, workers, rounds = 2, 3, 3, 2
	sp := f.spanning(tenantCap, accountCap)
	engines := []*capacity.Engine{f.engine(t, "r0"), f.engine(t, "r1")}
	var tenant, peak atomic.Int64
	var acct, acctPeak [2]atomic.Int64
	var wg sync.WaitGroup
	for r, e := range engines {
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					side := (w + i) % 2
					a := f.req(fmt.Sprintf("r%d.w%d.i%d", r, w, i))
					c, err := e.Wait(t.Context(), a, time.Now().Add(5*time.Second), sp.plan(side))
					if err != nil {
						t.Errorf("Wait(%s) error: %v", a.Ticket, err)
						return
					}
					raise(&peak, tenant.Add(1))
					raise(&acctPeak[side], acct[side].Add(1))
					time.Sleep(time.Millisecond)
					acct[side].Add(-1)
					tenant.Add(-1)
					c.Release(t.Context(), store.Outcome{Success: true})
				}
			})
		}
	}
	wg.Wait()
	for _, e := range engines {
		if err := e.Flush(t.Context()); err != nil {
			t.Fatalf("Flush error: %v", err)
		}
	}
	if got := peak.Load(); got > tenantCap {
		t.Errorf("peak tenant in-flight = %d, want ≤ %d", got, tenantCap)
	}
	for i := range 2 {
		if got := acctPeak[i].Load(); got > accountCap {
			t.Errorf("peak in-flight of account %d = %d, want ≤ %d", i, got, accountCap)
		}
	}
	if n, accts := f.spanInFlight(t, sp); n != 0 || accts != [2]int{} {
		t.Errorf("after the race: tenant %d, accounts %v in flight; want none", n, accts)
	}
}

// testSpanningLimitOrder: waiters for a full tenant limit held in its own
// domain, on accounts of different domains, get it in (class, arrival)
// order: FIFO within a class, an interactive newcomer ahead of waiting
// background.
func testSpanningLimitOrder(t *testing.T, f *fixture) {
	sp := f.spanning(1, 4)
	e := f.engine(t, "r")
	holder, err := e.Wait(t.Context(), f.req("holder"), time.Now().Add(time.Second), sp.plan(0))
	if err != nil {
		t.Fatalf("Wait(holder) error: %v", err)
	}
	type waiter struct {
		name  string
		class int
		side  int
	}
	waiters := []waiter{{"bg1", 2, 0}, {"bg2", 2, 1}, {"std", 1, 0}, {"int", 0, 1}}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, w := range waiters {
		a := f.req(w.name)
		a.Class = w.class
		wg.Go(func() {
			c, err := e.Wait(t.Context(), a, time.Now().Add(5*time.Second), sp.plan(w.side))
			if err != nil {
				t.Errorf("Wait(%s) error: %v", w.name, err)
				return
			}
			mu.Lock()
			order = append(order, w.name)
			mu.Unlock()
			c.Release(t.Context(), store.Outcome{Success: true})
		})
		f.waitFor(t, sp.limitDomain, sp.tenant.ID, i+1) // queued in arrival order
	}
	holder.Release(t.Context(), store.Outcome{Success: true})
	wg.Wait()
	if want := []string{"int", "std", "bg1", "bg2"}; !slices.Equal(order, want) {
		t.Errorf("grant order = %v, want %v", order, want)
	}
}

// waitFor polls until n tickets wait for unit id in domain.
func (f *fixture) waitFor(t *testing.T, domain, id string, n int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; {
		us, err := f.s.Units(t.Context(), domain, []string{id})
		if err == nil && len(us) == 1 && us[0].Waiting == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Units(%s) = %+v, %v; want %d waiting", id, us, err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testSpanningLimitGivenBackOnAbandon: a request that waits for a full
// account does not hold the slot of a tenant limit that only caps the
// requests in flight (another request of the tenant runs meanwhile), but
// holds that of a limit with a window (RPM), whose token it keeps; when it
// leaves (its caller cancels, or its deadline passes) it gives everything
// back, so another request of the tenant gets the limit at once, and
// nothing stays held in any domain.
func testSpanningLimitGivenBackOnAbandon(t *testing.T, f *fixture) {
	for _, window := range []bool{false, true} {
		sp := f.spanning(1, 1)
		if window {
			sp = f.spanningIn("w", 1, 1)
			for i := range sp.accounts {
				sp.accounts[i].Limits[0].RPM = 1000
			}
		}
		e := f.engine(t, fmt.Sprint("r", window))
		busy := sp.accounts[0]
		busy.Limits = nil // the account is full with a request of another tenant
		blocker, err := e.Wait(t.Context(), f.req(fmt.Sprint("blocker", window)), time.Now().Add(time.Second),
			func() (string, []store.Candidate) { return sp.domains[0], []store.Candidate{busy} })
		if err != nil {
			t.Fatalf("Wait(blocker) error: %v", err)
		}
		for _, leave := range []string{"cancel", "timeout"} {
			name := fmt.Sprint(leave, window)
			ctx, cancel := context.WithCancel(t.Context())
			deadline := time.Now().Add(5 * time.Second)
			if leave == "timeout" {
				deadline = time.Now().Add(300 * time.Millisecond)
			}
			done := make(chan error, 1)
			go func() {
				_, err := e.Wait(ctx, f.req("stuck-"+name), deadline, sp.plan(0))
				done <- err
			}()
			if leave == "cancel" {
				f.waitFor(t, sp.domains[0], sp.accounts[0].Unit.ID, 1) // it waits for the account
				want := 0                                              // the cap's slot is given back while it waits
				if window {
					want = 1 // the window's token is kept
				}
				for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					n, _ := f.spanInFlight(t, sp)
					if n == want {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("window %v: tenant in flight %d while waiting for the account, want %d", window, n, want)
					}
				}
				if !window {
					other, err := e.Wait(t.Context(), f.req("meanwhile"), time.Now(), sp.plan(1))
					if err != nil {
						t.Fatalf("a request of the tenant on the free account meanwhile: %v, want it granted", err)
					}
					other.Release(t.Context(), store.Outcome{Success: true})
					other.WaitReleased() // the release goes in the background
				}
				cancel()
			}
			err := <-done
			cancel()
			if err == nil || leave == "cancel" && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: Wait error = %v, want it to fail", name, err)
			}
			other, err := e.Wait(t.Context(), f.req("other-"+name), time.Now(), sp.plan(1))
			if err != nil {
				t.Fatalf("%s: Wait(other) error = %v, want the token free at once", name, err)
			}
			other.Release(t.Context(), store.Outcome{Success: true})
			other.WaitReleased() // the release goes in the background
		}
		blocker.Release(t.Context(), store.Outcome{Success: true})
		if err := e.Flush(t.Context()); err != nil {
			t.Fatalf("Flush error: %v", err)
		}
		if n, accts := f.spanInFlight(t, sp); n != 0 || accts != [2]int{} {
			t.Errorf("window %v at the end: tenant %d, accounts %v in flight; want none", window, n, accts)
		}
	}
}
