package memstore

import (
	"fmt"
	"testing"
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
