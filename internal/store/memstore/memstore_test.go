package memstore

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) func() storetest.Stores {
		s := New()
		return func() storetest.Stores { return s }
	})
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
		level     int
		want      time.Duration
	}{
		{"level 0 is base", 20 * time.Second, 180 * time.Second, 0, 20 * time.Second},
		{"doubles per level", 20 * time.Second, 180 * time.Second, 3, 160 * time.Second},
		{"capped at max", 20 * time.Second, 180 * time.Second, 4, 180 * time.Second},
		{"base 0 is one second", 0, time.Minute, 2, 4 * time.Second},
		{"max 0 is uncapped", time.Second, 0, 10, 1024 * time.Second},
		{"no overflow", time.Second, 0, 1000, math.MaxInt64 / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.base, tt.max, tt.level); got != tt.want {
				t.Errorf("backoff(%v, %v, %d) = %v, want %v", tt.base, tt.max, tt.level, got, tt.want)
			}
		})
	}
}

// TestScanBound checks the bound of no-barging: a ticket with more than
// maxScan tickets ahead is barred even from a unit none of them lists, and
// one with exactly maxScan ahead is not.
func TestScanBound(t *testing.T) {
	s := New()
	full := store.Candidate{Unit: store.Unit{ID: "full", Cap: 1}, Credential: "c-full"}
	free := store.Candidate{Unit: store.Unit{ID: "free"}, Credential: "c-free"}
	acquire := func(ticket string, c store.Candidate) store.Grant {
		t.Helper()
		g, err := s.Acquire(t.Context(), store.Acquire{
			Domain: "d", Ticket: ticket, Queue: "q", Candidates: []store.Candidate{c}, LeaseTTL: time.Minute, Replica: "r",
		})
		if err != nil {
			t.Fatalf("Acquire(%s) error: %v", ticket, err)
		}
		return g
	}
	acquire("holder", full)
	for i := range maxScan {
		if g := acquire(fmt.Sprintf("w%d", i), full); g.Granted || g.Position != i {
			t.Fatalf("w%d = %+v, want queued at %d", i, g, i)
		}
	}
	if g := acquire("at-bound", free); !g.Granted {
		t.Errorf("with %d ahead: %+v, want granted", maxScan, g)
	}
	acquire(fmt.Sprintf("w%d", maxScan), full)
	if g := acquire("past-bound", free); g.Granted || g.Position != maxScan+1 {
		t.Errorf("with %d ahead: %+v, want queued at %d", maxScan+1, g, maxScan+1)
	}
}

// BenchmarkAcquireRelease grants and releases one slot of a unit, alone
// and with a limit (such as a billing account's concurrency) on the
// candidate.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, limits := range [][]store.Unit{nil, {{ID: "billing:acme", Cap: 1024}}} {
		b.Run(fmt.Sprintf("limits=%d", len(limits)), func(b *testing.B) {
			s := New()
			a := store.Acquire{
				Domain:     "d",
				Ticket:     "t",
				Queue:      "q",
				Candidates: []store.Candidate{{Unit: store.Unit{ID: "u", Cap: 10}, Credential: "c", CredentialCap: 2, Limits: limits}},
				LeaseTTL:   time.Hour,
				Replica:    "r",
			}
			b.ReportAllocs()
			for b.Loop() {
				if g, err := s.Acquire(b.Context(), a); err != nil || !g.Granted {
					b.Fatalf("Acquire = %+v, %v; want granted", g, err)
				}
				if err := s.Release(b.Context(), a.Domain, a.Ticket, store.Outcome{Success: true}); err != nil {
					b.Fatalf("Release error: %v", err)
				}
			}
		})
	}
}

// BenchmarkAcquireAmong10k acquires (and releases) a slot among 10,000
// credentials in 1,000 units of 10 slots, where every unit but the last is
// full: Acquire skips 9,990 candidates before its grant.
func BenchmarkAcquireAmong10k(b *testing.B) {
	const units, perUnit = 1000, 10
	s := New()
	cands := make([]store.Candidate, 0, units*perUnit)
	for u := range units {
		unit := store.Unit{ID: fmt.Sprintf("u%d", u), Cap: perUnit}
		for c := range perUnit {
			cands = append(cands, store.Candidate{Unit: unit, Credential: fmt.Sprintf("u%d-c%d", u, c)})
		}
	}
	req := func(ticket string, cands []store.Candidate) store.Acquire {
		return store.Acquire{Domain: "d", Ticket: ticket, Queue: "q", Candidates: cands, LeaseTTL: time.Hour, Replica: "r"}
	}
	for i := range (units - 1) * perUnit {
		if g, err := s.Acquire(b.Context(), req(fmt.Sprintf("fill%d", i), cands[i:i+1])); err != nil || !g.Granted {
			b.Fatalf("filling: Acquire = %+v, %v; want granted", g, err)
		}
	}
	a := req("t", cands)
	b.ReportAllocs()
	for b.Loop() {
		if g, err := s.Acquire(b.Context(), a); err != nil || g.Index != (units-1)*perUnit {
			b.Fatalf("Acquire = %+v, %v; want granted on the first credential of the last unit", g, err)
		}
		if err := s.Release(b.Context(), a.Domain, a.Ticket, store.Outcome{Success: true}); err != nil {
			b.Fatalf("Release error: %v", err)
		}
	}
}

// TestReassert: reasserted leases hold their slots in their unit and
// limits whatever the room (a cap of 1 holds 2), twice is once, and they
// are released like granted ones.
func TestReassert(t *testing.T) {
	s := New()
	c := store.Candidate{Unit: store.Unit{ID: "u", Cap: 1}, Credential: "c", Limits: []store.Unit{{ID: "user:a", Cap: 5}}}
	held := []store.Held{{Lease: "r1", Candidate: c, TTL: time.Minute}, {Lease: "r2", Candidate: c, TTL: time.Minute}}
	for range 2 {
		if err := s.Reassert(t.Context(), "dom", held); err != nil {
			t.Fatal(err)
		}
	}
	inFlight := func() (int, int) {
		t.Helper()
		us, err := s.Units(t.Context(), "dom", []string{"u", "user:a"})
		if err != nil {
			t.Fatal(err)
		}
		return us[0].InFlight, us[1].InFlight
	}
	if u, lim := inFlight(); u != 2 || lim != 2 {
		t.Errorf("after Reassert: u %d, user:a %d in flight, want 2 and 2", u, lim)
	}
	a := store.Acquire{Domain: "dom", Ticket: "new", Queue: "q", Candidates: []store.Candidate{c}, LeaseTTL: time.Minute}
	if g, _ := s.Acquire(t.Context(), a); g.Granted {
		t.Error("a new claim was granted over the reasserted leases")
	}
	for _, l := range []string{"r1", "r2"} {
		if err := s.Release(t.Context(), "dom", l, store.Outcome{Success: true}); err != nil {
			t.Fatal(err)
		}
	}
	if g, _ := s.Acquire(t.Context(), a); !g.Granted {
		t.Errorf("the claim after both releases = %+v, want granted", g)
	}
	if u, lim := inFlight(); u != 1 || lim != 1 {
		t.Errorf("after the releases and one grant: u %d, user:a %d in flight, want 1 and 1", u, lim)
	}
}
