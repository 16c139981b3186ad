package capacity

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// TestWaiterFollowsItsAccountsToANewDomain: a catalog edit moves the
// request's accounts to another domain while it waits: the ticket leaves
// the old domain's queue and is granted in the new one, and a claim granted
// before the move is released in the old domain, never lost.
func TestWaiterFollowsItsAccountsToANewDomain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, s := newEngine(t)
		held, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		var moved atomic.Bool
		plan := func() (string, []store.Candidate) {
			if moved.Load() {
				return "d2", unit("a", 1)
			}
			return "d", unit("a", 1)
		}
		done := make(chan *Claim)
		go func() {
			c, err := e.Wait(t.Context(), acquire("t2"), time.Now().Add(5*time.Second), plan)
			if err != nil {
				t.Error(err)
			}
			done <- c
		}()
		waitForWaiting(t, s, "d", "a", 1)
		moved.Store(true)
		e.signal("t2") // a reload wakes no one; the safety tick would, later
		c := <-done
		if c == nil || c.dom != "d2" {
			t.Fatalf("claim %+v, want one in d2", c)
		}
		if us, _ := s.Units(t.Context(), "d", []string{"a"}); us[0].Waiting != 0 || us[0].InFlight != 1 {
			t.Errorf("old domain: %+v, want t2 gone from its queue and t1 still held", us[0])
		}
		c.Release(t.Context(), store.Outcome{})
		held.Release(t.Context(), store.Outcome{}) // granted before the move: released where it was granted
		if us, _ := s.Units(t.Context(), "d", []string{"a"}); us[0].InFlight != 0 {
			t.Errorf("old domain after releasing the claim granted there: %+v, want none in flight", us[0])
		}
	})
}

// TestClaimReleasesItsTokens: a claim that took a token in a limit's own
// domain gives both back on Release, and a kept claim (an async job) on
// ReleaseLease of the domain Keep returned.
func TestClaimReleasesItsTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, s := newEngine(t)
		tenant := store.Unit{ID: "tenant", Cap: 1, Domain: "lim"}
		cands := unit("a", 2)
		cands[0].Limits = []store.Unit{tenant}
		inFlight := func() (int, int) {
			lim, _ := s.Units(t.Context(), "lim", []string{"tenant"})
			acct, _ := s.Units(t.Context(), "d", []string{"a"})
			return lim[0].InFlight, acct[0].InFlight
		}
		c, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(cands))
		if err != nil {
			t.Fatal(err)
		}
		if lim, acct := inFlight(); lim != 1 || acct != 1 {
			t.Fatalf("granted: tenant %d, account %d in flight; want 1, 1", lim, acct)
		}
		c.Release(t.Context(), store.Outcome{Success: true})
		if lim, acct := inFlight(); lim != 0 || acct != 0 {
			t.Errorf("released: tenant %d, account %d in flight; want 0, 0", lim, acct)
		}
		c, err = e.Wait(t.Context(), acquire("t2"), time.Now().Add(time.Second), fixed(cands))
		if err != nil {
			t.Fatal(err)
		}
		domain, lease, err := c.Keep(t.Context(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.ReleaseLease(t.Context(), domain, lease, store.Outcome{Success: true}); err != nil {
			t.Fatal(err)
		}
		if lim, acct := inFlight(); lim != 0 || acct != 0 {
			t.Errorf("kept and released: tenant %d, account %d in flight; want 0, 0", lim, acct)
		}
	})
}

func waitForWaiting(t *testing.T, s store.Inspector, domain, unit string, n int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		if us, err := s.Units(t.Context(), domain, []string{unit}); err == nil && us[0].Waiting == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d waiting", unit, n)
		}
	}
}

// TestDailyRequestsTokenKeptWhileWaiting: a request that took the token of
// a daily_requests limit held in a domain of its own keeps it while it
// waits for its account (taking it again would count a second request of
// the day), so it is granted once the account frees; the day's next
// request is refused by the limit.
func TestDailyRequestsTokenKeptWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, s := newEngine(t)
		held, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		cands := unit("a", 1)
		cands[0].Limits = []store.Unit{{ID: "usertask", DailyRequests: 1, Domain: "lim"}}
		done := make(chan error, 1)
		go func() {
			c, err := e.Wait(t.Context(), acquire("t2"), time.Now().Add(5*time.Second), fixed(cands))
			if err == nil {
				c.Release(t.Context(), store.Outcome{Success: true})
			}
			done <- err
		}()
		waitForWaiting(t, s, "d", "a", 1)
		held.Release(t.Context(), store.Outcome{Success: true})
		if err := <-done; err != nil {
			t.Fatalf("the waiter holding the day's one request: %v, want a claim", err)
		}
		if c, err := e.Wait(t.Context(), acquire("t3"), time.Now().Add(50*time.Millisecond), fixed(cands)); err == nil {
			c.Release(t.Context(), store.Outcome{})
			t.Errorf("the day's second request was granted, want it refused by daily_requests 1")
		}
	})
}
