package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// RunAffinity checks the behaviour every store.Affinity must have, as Run
// does for the capacity stores: newBackend is called once per case and
// returns a constructor of replica handles on one shared backend.
func RunAffinity(t *testing.T, newBackend func(t *testing.T) func() store.Affinity) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *affinityFixture)
	}{
		{"BindAndTouch", testAffinityBindAndTouch},
		{"IdleTTL", testAffinityIdleTTL},
		{"MoveOnlyFromWhatWasSeen", testAffinityMoveOnlyFromWhatWasSeen},
		{"BindingDoesNotRefresh", testAffinityBindingDoesNotRefresh},
		{"DomainsApart", testAffinityDomainsApart},
		{"ReplicasShare", testAffinityReplicasShare},
		{"ConcurrentFirstBind", testAffinityConcurrentFirstBind},
		{"KeyBound", testAffinityKeyBound},
		{"TenantBound", testAffinityTenantBound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newReplica := newBackend(t)
			p := fmt.Sprintf("sa%x.%d.", time.Now().UnixNano(), runs.Add(1))
			tt.run(t, &affinityFixture{t: t, newReplica: newReplica, s: newReplica(), prefix: p, domain: p + "dom",
				owner: store.SeedOwner{Tenant: p + "tenant", Key: p + "key"}})
		})
	}
}

type affinityFixture struct {
	t          *testing.T
	newReplica func() store.Affinity
	s          store.Affinity
	prefix     string
	domain     string
	owner      store.SeedOwner // of every binding the case makes through touch and bind
}

func (f *affinityFixture) name(short string) string { return f.prefix + short }

func (f *affinityFixture) touch(s store.Affinity, seed string, ttl time.Duration) string {
	f.t.Helper()
	got, err := s.Touch(f.t.Context(), f.domain, f.owner, seed, ttl)
	if err != nil {
		f.t.Fatalf("Touch(%s): %v", seed, err)
	}
	return got
}

func (f *affinityFixture) bind(s store.Affinity, seed, from, to string, ttl time.Duration) string {
	f.t.Helper()
	got, err := s.Bind(f.t.Context(), f.domain, f.owner, seed, from, to, ttl)
	if err != nil {
		f.t.Fatalf("Bind(%s, %q → %q): %v", seed, from, to, err)
	}
	return got
}

func testAffinityBindAndTouch(t *testing.T, f *affinityFixture) {
	seed := f.name("seed")
	if got := f.touch(f.s, seed, longTTL); got != "" {
		t.Fatalf("Touch of a new seed = %q, want none", got)
	}
	if got := f.bind(f.s, seed, "", "acct-a", longTTL); got != "acct-a" {
		t.Fatalf("first Bind = %q, want acct-a", got)
	}
	if got := f.touch(f.s, seed, longTTL); got != "acct-a" {
		t.Fatalf("Touch after Bind = %q, want acct-a", got)
	}
	if got := f.bind(f.s, seed, "acct-a", "acct-b", longTTL); got != "acct-b" {
		t.Fatalf("move a → b = %q, want acct-b", got)
	}
	if got := f.touch(f.s, seed, longTTL); got != "acct-b" {
		t.Fatalf("Touch after the move = %q, want acct-b", got)
	}
}

// A binding lapses ttl after its last use, and each use pushes that back.
func testAffinityIdleTTL(t *testing.T, f *affinityFixture) {
	const ttl = 400 * time.Millisecond
	seed := f.name("seed")
	f.bind(f.s, seed, "", "acct-a", ttl)
	for range 4 { // 4 × 200ms = twice the TTL, alive because used
		time.Sleep(ttl / 2)
		if got := f.touch(f.s, seed, ttl); got != "acct-a" {
			t.Fatalf("Touch within the idle TTL = %q, want acct-a", got)
		}
	}
	time.Sleep(ttl + clockSlop)
	if got := f.touch(f.s, seed, ttl); got != "" {
		t.Fatalf("Touch after the idle TTL = %q, want none (lapsed)", got)
	}
	if got := f.bind(f.s, seed, "", "acct-b", ttl); got != "acct-b" {
		t.Fatalf("Bind of a lapsed seed = %q, want acct-b", got)
	}
}

// A request that saw an old binding cannot undo a move made since.
func testAffinityMoveOnlyFromWhatWasSeen(t *testing.T, f *affinityFixture) {
	seed := f.name("seed")
	f.bind(f.s, seed, "", "acct-a", longTTL)
	f.bind(f.s, seed, "acct-a", "acct-b", longTTL)
	if got := f.bind(f.s, seed, "acct-a", "acct-c", longTTL); got != "acct-b" {
		t.Fatalf("a stale move a → c = %q, want the binding to stay acct-b", got)
	}
	if got := f.bind(f.s, seed, "", "acct-c", longTTL); got != "acct-b" {
		t.Fatalf("a first Bind of a bound seed = %q, want acct-b", got)
	}
	if got := f.touch(f.s, seed, longTTL); got != "acct-b" {
		t.Fatalf("Touch = %q, want acct-b", got)
	}
}

func testAffinityBindingDoesNotRefresh(t *testing.T, f *affinityFixture) {
	const ttl = 400 * time.Millisecond
	seed := f.name("seed")
	if _, ok, err := f.s.Binding(t.Context(), f.domain, seed); err != nil || ok {
		t.Fatalf("Binding of a new seed = ok %v, %v; want none", ok, err)
	}
	f.bind(f.s, seed, "", "acct-a", ttl)
	b, ok, err := f.s.Binding(t.Context(), f.domain, seed)
	if err != nil || !ok || b.Account != "acct-a" || b.TTL <= 0 || b.TTL > ttl+clockSlop {
		t.Fatalf("Binding = %+v, ok %v, %v; want acct-a with at most %v left", b, ok, err, ttl)
	}
	time.Sleep(ttl / 2)
	f.s.Binding(t.Context(), f.domain, seed)
	time.Sleep(ttl/2 + clockSlop)
	if _, ok, err := f.s.Binding(t.Context(), f.domain, seed); err != nil || ok {
		t.Fatalf("Binding after the TTL, read but not used = ok %v, %v; want lapsed", ok, err)
	}
}

func testAffinityDomainsApart(t *testing.T, f *affinityFixture) {
	seed := f.name("seed")
	f.bind(f.s, seed, "", "acct-a", longTTL)
	got, err := f.s.Touch(t.Context(), f.name("other"), f.owner, seed, longTTL)
	if err != nil || got != "" {
		t.Fatalf("Touch in another domain = %q, %v; want none", got, err)
	}
}

// Every replica sees the bindings of the others.
func testAffinityReplicasShare(t *testing.T, f *affinityFixture) {
	other := f.newReplica()
	seed := f.name("seed")
	f.bind(f.s, seed, "", "acct-a", longTTL)
	if got := f.touch(other, seed, longTTL); got != "acct-a" {
		t.Fatalf("the other replica's Touch = %q, want acct-a", got)
	}
	f.bind(other, seed, "acct-a", "acct-b", longTTL)
	if got := f.touch(f.s, seed, longTTL); got != "acct-b" {
		t.Fatalf("Touch after the other replica moved it = %q, want acct-b", got)
	}
}

// Of first binds racing on replicas, one wins and all of them learn it.
func testAffinityConcurrentFirstBind(t *testing.T, f *affinityFixture) {
	seed := f.name("seed")
	replicas := []store.Affinity{f.s, f.newReplica(), f.newReplica()}
	got := make([]string, 12)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			var err error
			got[i], err = replicas[i%len(replicas)].Bind(t.Context(), f.domain, f.owner, seed, "", fmt.Sprintf("acct-%d", i), longTTL)
			if err != nil {
				t.Errorf("Bind %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("racing first binds answered %q and %q: want one winner for all", got[0], got[i])
		}
	}
	if b := f.touch(f.s, seed, longTTL); b != got[0] {
		t.Fatalf("Touch = %q, want the winner %q", b, got[0])
	}
}

// boundTTL outlasts a case that floods a store with bindings, however
// slow the machine.
const boundTTL = time.Hour

// flood binds n new seeds of owner (named prefix0, prefix1, …) from a few
// goroutines, in order within each.
func (f *affinityFixture) flood(owner store.SeedOwner, prefix string, n int) {
	f.t.Helper()
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if _, err := f.s.Bind(f.t.Context(), f.domain, owner, prefix+fmt.Sprint(i), "", "acct-a", boundTTL); err != nil {
					f.t.Errorf("Bind %s%d: %v", prefix, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// bound reports whether seed of owner is still bound, without using it.
func (f *affinityFixture) bound(seed string) bool {
	f.t.Helper()
	_, ok, err := f.s.Binding(f.t.Context(), f.domain, seed)
	if err != nil {
		f.t.Fatalf("Binding(%s): %v", seed, err)
	}
	return ok
}

// Past store.MaxKeyBindings, a key's least recently used binding goes: not
// one it used since, not another key's of its tenant, not another
// tenant's.
func testAffinityKeyBound(t *testing.T, f *affinityFixture) {
	sibling := store.SeedOwner{Tenant: f.owner.Tenant, Key: f.name("sibling")}
	stranger := store.SeedOwner{Tenant: f.name("stranger"), Key: f.name("stranger-key")}
	oldest, used := f.name("oldest"), f.name("used")
	f.bind(f.s, oldest, "", "acct-a", boundTTL)
	f.bind(f.s, used, "", "acct-a", boundTTL)
	if _, err := f.s.Bind(t.Context(), f.domain, sibling, f.name("sibling-seed"), "", "acct-b", boundTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Bind(t.Context(), f.domain, stranger, f.name("stranger-seed"), "", "acct-c", boundTTL); err != nil {
		t.Fatal(err)
	}
	f.touch(f.s, used, boundTTL)
	f.flood(f.owner, f.name("flood-"), store.MaxKeyBindings-1) // one past the bound
	if f.bound(oldest) {
		t.Errorf("the key's least recently used binding is kept past its bound")
	}
	for _, seed := range []string{used, f.name("sibling-seed"), f.name("stranger-seed")} {
		if !f.bound(seed) {
			t.Errorf("binding %s was forgotten for another key's flood (or its own, though used since)", seed)
		}
	}
}

// Past store.MaxTenantBindings, a tenant's least recently used binding
// goes, whichever of its keys made it; another tenant's stay.
func testAffinityTenantBound(t *testing.T, f *affinityFixture) {
	stranger := store.SeedOwner{Tenant: f.name("stranger"), Key: f.name("stranger-key")}
	if _, err := f.s.Bind(t.Context(), f.domain, stranger, f.name("stranger-seed"), "", "acct-c", boundTTL); err != nil {
		t.Fatal(err)
	}
	oldest := f.name("oldest")
	f.bind(f.s, oldest, "", "acct-a", boundTTL)
	per := store.MaxKeyBindings / 2
	for k := range store.MaxTenantBindings / per {
		f.flood(store.SeedOwner{Tenant: f.owner.Tenant, Key: f.name(fmt.Sprint("key-", k))}, f.name(fmt.Sprint("k", k, "-")), per)
	}
	if f.bound(oldest) {
		t.Errorf("the tenant's least recently used binding is kept past its bound")
	}
	if !f.bound(f.name("stranger-seed")) {
		t.Errorf("another tenant's binding was forgotten for a tenant's flood")
	}
	if !f.bound(f.name(fmt.Sprint("k", store.MaxTenantBindings/per-1, "-", per-1))) {
		t.Errorf("the tenant's most recent binding was forgotten")
	}
}
