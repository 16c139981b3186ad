package memstore

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

func TestAffinityContract(t *testing.T) {
	storetest.RunAffinity(t, func(*testing.T) func() store.Affinity {
		s := New()
		return func() store.Affinity { return s }
	})
}

// Past MaxBindings the least recently used binding of the tenant holding
// the most goes: not a recent one, not the oldest of a tenant holding few.
func TestAffinityBounded(t *testing.T) {
	s := New()
	ctx := t.Context()
	bind := func(tenant, key, seed string) {
		s.Bind(ctx, "d", store.SeedOwner{Tenant: tenant, Key: key}, seed, "", "a", time.Hour)
	}
	bound := func(seed string) bool {
		_, ok, _ := s.Binding(ctx, "d", seed)
		return ok
	}
	// The oldest first: t1's, then t0's, its two keys full; t2 … t8 full.
	for tenant := 1; tenant <= 8; tenant++ {
		if tenant == 2 {
			for i := range store.MaxTenantBindings {
				bind("t0", fmt.Sprint("t0-k", i%2), fmt.Sprint("t0-", i))
			}
		}
		for i := range store.MaxKeyBindings {
			bind(fmt.Sprint("t", tenant), fmt.Sprint("t", tenant, "-k"), fmt.Sprint("t", tenant, "-", i))
		}
	}
	if n := s.bindings.lru.Len(); n != MaxBindings {
		t.Fatalf("%d bindings, want the bound %d", n, MaxBindings)
	}
	bind("small", "small-k", "small-0")
	if n := s.bindings.lru.Len(); n != MaxBindings {
		t.Fatalf("%d bindings kept, want %d", n, MaxBindings)
	}
	switch {
	case !bound("small-0"):
		t.Errorf("the new binding was dropped")
	case !bound("t1-0"):
		t.Errorf("the oldest binding, of a tenant holding fewer, was dropped")
	case bound("t0-0"):
		t.Errorf("the least recently used binding of the tenant holding the most is still there")
	}
}

// The probe of issue 24 item 11: tenant B's 100,500 new conversations
// cost tenant A its one binding. Now they cost B its own oldest only.
func TestAffinityFloodKeepsAnotherTenantsBinding(t *testing.T) {
	s := New()
	ctx := t.Context()
	s.Bind(ctx, "d", store.SeedOwner{Tenant: "a", Key: "a-key"}, "a-seed", "", "acct-1", time.Hour)
	b := store.SeedOwner{Tenant: "b", Key: "b-key"}
	for i := range 100_500 {
		s.Bind(ctx, "d", b, fmt.Sprint("b-", i), "", "acct-2", time.Hour)
	}
	if got, _ := s.Touch(ctx, "d", store.SeedOwner{Tenant: "a", Key: "a-key"}, "a-seed", time.Hour); got != "acct-1" {
		t.Errorf("tenant A's binding after tenant B's flood = %q, want acct-1", got)
	}
	if n := s.bindings.lru.Len(); n != 1+store.MaxKeyBindings {
		t.Errorf("%d bindings kept, want A's and B's key's bound %d", n, store.MaxKeyBindings)
	}
}

// TestLapsedBindingsAreForgotten: bindings that lapsed are forgotten when a
// new one is made, least recently used first, not kept until a bound
// pushes them out (a soak found a busy store holding every idle session).
func TestLapsedBindingsAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		owner := store.SeedOwner{Tenant: "t", Key: "k"}
		bind := func(seed string, ttl time.Duration) {
			t.Helper()
			if _, err := s.Bind(t.Context(), "d", owner, seed, "", "acct", ttl); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 10 {
			bind(fmt.Sprintf("short-%d", i), 20*time.Millisecond)
		}
		time.Sleep(30 * time.Millisecond)
		bind("new", time.Hour)
		if n := len(s.bindings.bySeed); n != 1 {
			t.Errorf("%d bindings kept, want 1: the ten lapsed ones forgotten", n)
		}
	})
}
