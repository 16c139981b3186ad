package redisstore

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// loadedReplica returns a Store on a fresh prefix with its scripts loaded.
func loadedReplica(b *testing.B) *Store {
	b.Helper()
	s := newTestBackend(b).replica()
	if err := s.Load(b.Context()); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAcquireRelease is the happy path of one request: a grant on the
// first candidate, then its release (two round trips).
func BenchmarkAcquireRelease(b *testing.B) {
	s := loadedReplica(b)
	a := req("", cand("u", 8, "c"))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		a.Ticket = strconv.Itoa(i)
		g, err := s.Acquire(b.Context(), a)
		if err != nil || !g.Granted {
			b.Fatalf("Acquire = %+v, %v", g, err)
		}
		if err := s.Release(b.Context(), "dom", a.Ticket, store.Outcome{Success: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseBusy is the happy path of one request while 63
// others hold leases on the same account and credential: the state of a
// gateway serving 64 requests at once (the bench/run.sh load), where the
// lease hash and expiry set hold 64 entries, not one.
func BenchmarkAcquireReleaseBusy(b *testing.B) {
	s := loadedReplica(b)
	c := cand("u", 0, "c")
	for i := range 63 {
		a := req(fmt.Sprint("held.", i), c)
		a.LeaseTTL = time.Hour
		if g, err := s.Acquire(b.Context(), a); err != nil || !g.Granted {
			b.Fatalf("hold %s = %+v, %v", a.Ticket, g, err)
		}
	}
	a := req("", c)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		a.Ticket = strconv.Itoa(i)
		g, err := s.Acquire(b.Context(), a)
		if err != nil || !g.Granted {
			b.Fatalf("Acquire = %+v, %v", g, err)
		}
		if err := s.Release(b.Context(), "dom", a.Ticket, store.Outcome{Success: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseParallel is the same from many goroutines of one
// replica, for throughput (ns/op is per pair, all goroutines together).
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	s := loadedReplica(b)
	var mu sync.Mutex
	next := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		next++
		a := req("", cand("u", 0, "c"))
		prefix := strconv.Itoa(next) + "."
		mu.Unlock()
		i := 0
		for pb.Next() {
			i++
			a.Ticket = prefix + strconv.Itoa(i)
			g, err := s.Acquire(b.Context(), a)
			if err != nil || !g.Granted {
				b.Errorf("Acquire = %+v, %v", g, err)
				return
			}
			if err := s.Release(b.Context(), "dom", a.Ticket, store.Outcome{Success: true}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAcquireAmong10k runs in a domain of 1,000 units (cap 10) with 10
// credentials each (credential cap 1): 10,000 credentials, 990 units full
// (9,900 live leases). A request never lists the whole domain: routing
// passes a bounded candidate list, here 32 candidates of which the first
// 31 are on full units and the last on one of the 10 free units, so each
// Acquire evaluates 32 candidates before it grants; then it releases.
func BenchmarkAcquireAmong10k(b *testing.B) {
	const units, creds, listed = 1000, 10, 32
	s := loadedReplica(b)
	first := func(u int) store.Candidate {
		return store.Candidate{
			Unit:          store.Unit{ID: fmt.Sprint("u", u), Cap: creds, Base: time.Second, Max: time.Minute},
			Credential:    fmt.Sprint("u", u, "c", u%creds),
			CredentialCap: 1,
		}
	}
	on := func(u, c int) store.Candidate {
		x := first(u)
		x.Credential = fmt.Sprint("u", u, "c", c)
		return x
	}
	free := func(u int) bool { return u%100 == 0 }
	var wg sync.WaitGroup
	for w := range 8 { // fill concurrently: 9,900 Acquires
		wg.Go(func() {
			for u := w; u < units; u += 8 {
				if free(u) {
					continue
				}
				for c := range creds {
					a := req(fmt.Sprint("fill.", u, ".", c), on(u, c))
					a.LeaseTTL = time.Hour
					if g, err := s.Acquire(b.Context(), a); err != nil || !g.Granted {
						b.Errorf("fill %s = %+v, %v", a.Ticket, g, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	rng := rand.New(rand.NewPCG(1, 2))
	lists := make([][]store.Candidate, 64)
	for i := range lists {
		l := make([]store.Candidate, 0, listed)
		for len(l) < listed-1 {
			if u := rng.IntN(units); !free(u) {
				l = append(l, on(u, rng.IntN(creds)))
			}
		}
		lists[i] = append(l, on(100*rng.IntN(units/100), rng.IntN(creds)))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		a := req(strconv.Itoa(i), lists[i%len(lists)]...)
		g, err := s.Acquire(b.Context(), a)
		if err != nil || !g.Granted || g.Index != listed-1 {
			b.Fatalf("Acquire = %+v, %v; want granted at %d", g, err, listed-1)
		}
		if err := s.Release(b.Context(), "dom", a.Ticket, store.Outcome{Success: true}); err != nil {
			b.Fatal(err)
		}
	}
}
