package capacity

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memstore"
)

// engineOn returns an Engine on memstore s, as a store in this process
// (local) or as a shared one (its releases go in the background).
func engineOn(t *testing.T, s *memstore.Store, local bool) *Engine {
	t.Helper()
	var claims store.Claims = s
	if !local {
		claims = &sharedStore{s: s}
	}
	e := New(claims, s, "replica-1", time.Second, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

func inFlightIn(t *testing.T, s *memstore.Store, domain, id string) int {
	t.Helper()
	us, err := s.Units(t.Context(), domain, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return us[0].InFlight
}

// movedTo is a catalog edit's domainOf that moves unit "a" to domain to.
func movedTo(to string) func(string) string {
	return func(unit string) string {
		if unit == "a" {
			return to
		}
		return ""
	}
}

// movedClaim returns an engine on a memstore (see engineOn) holding a claim
// on unit "a" (cap 1) in domain "d", which Rehome has moved to "new".
func movedClaim(t *testing.T, local bool) (*Engine, *memstore.Store, *Claim) {
	t.Helper()
	s := memstore.New()
	e := engineOn(t, s, local)
	claim, err := e.Wait(t.Context(), acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.Rehome(t.Context(), movedTo("new"))
	if n := inFlightIn(t, s, "new", "a"); n != 1 {
		t.Fatalf("in flight in the new domain after Rehome = %d, want the moved claim's 1", n)
	}
	return e, s, claim
}

// TestRehomeCountsAClaimInItsUnitsNewDomain: a claim granted before an
// edit moved its account to another domain holds its slot there too, until
// it is released, kept or not.
func TestRehomeCountsAClaimInItsUnitsNewDomain(t *testing.T) {
	for _, local := range []bool{true, false} {
		name := map[bool]string{true: "local", false: "shared"}[local]
		t.Run(name+"/released", func(t *testing.T) {
			e, s, claim := movedClaim(t, local)
			ctx := t.Context()
			e.Rehome(ctx, movedTo("new")) // again: nothing more to copy
			if n := inFlightIn(t, s, "new", "a"); n != 1 {
				t.Fatalf("in flight in the new domain after a second Rehome = %d, want 1", n)
			}
			inNew := store.Acquire{Domain: "new", Ticket: "t2", Queue: "q"}
			planNew := func() (string, []store.Candidate) { return "new", unit("a", 1) }
			if _, err := e.Wait(ctx, inNew, time.Now().Add(100*time.Millisecond), planNew); err == nil {
				t.Fatal("a request in the new domain was granted beside the moved claim: the account's cap of 1 was passed")
			}
			claim.Release(ctx, store.Outcome{Success: true})
			claim.WaitReleased()
			for _, dom := range []string{"d", "new"} {
				if n := inFlightIn(t, s, dom, "a"); n != 0 {
					t.Errorf("in flight in domain %s after the release = %d, want 0", dom, n)
				}
			}
			inNew.Ticket = "t3"
			next, err := e.Wait(ctx, inNew, time.Now().Add(time.Second), planNew)
			if err != nil {
				t.Fatalf("a request in the new domain after the moved claim ended: %v", err)
			}
			next.Release(ctx, store.Outcome{Success: true})
		})
		t.Run(name+"/kept", func(t *testing.T) {
			e, s, claim := movedClaim(t, local)
			ctx := t.Context()
			dom, lease, err := claim.Keep(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if n := inFlightIn(t, s, "new", "a"); n != 1 {
				t.Fatalf("in flight in the new domain once kept = %d, want 1", n)
			}
			if err := e.ReleaseLease(ctx, dom, lease, store.Outcome{Success: true}); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{"d", "new"} {
				if n := inFlightIn(t, s, d, "a"); n != 0 {
					t.Errorf("in flight in domain %s after ReleaseLease(%q) = %d, want 0", d, dom, n)
				}
			}
		})
	}
}

// TestRehomeLeavesUnmovedClaims: claims whose unit stays, or whose unit the
// edit does not know, are not copied.
func TestRehomeLeavesUnmovedClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		e := engineOn(t, s, true)
		ctx := t.Context()
		claim, err := e.Wait(ctx, acquire("t1"), time.Now().Add(time.Second), fixed(unit("a", 1)))
		if err != nil {
			t.Fatal(err)
		}
		e.Rehome(ctx, movedTo("d"))
		e.Rehome(ctx, func(string) string { return "" })
		claim.Release(ctx, store.Outcome{Success: true})
		if n := len(e.copies); n != 0 {
			t.Errorf("%d leases copied, want none", n)
		}
		if n := inFlightIn(t, s, "d", "a"); n != 0 {
			t.Errorf("in flight after the release = %d, want 0", n)
		}
	})
}
