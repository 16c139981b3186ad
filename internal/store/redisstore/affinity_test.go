package redisstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

// TestAffinityContract runs the affinity bindings' contract suite; every
// replica handle is a new client and Store on one fresh prefix.
func TestAffinityContract(t *testing.T) {
	storetest.RunAffinity(t, func(t *testing.T) func() store.Affinity {
		b := newTestBackend(t)
		return func() store.Affinity { return b.replica() }
	})
}

// TestLapsedBindingsLeaveTheIndexes: a binding that lapsed leaves its
// owner's indexes at the next bind, while one of a longer ttl stays: a busy
// key's index holds its live sessions, not every session it ever had (a
// soak found them growing toward the bound).
func TestLapsedBindingsLeaveTheIndexes(t *testing.T) {
	s := newTestBackend(t).replica()
	ctx := t.Context()
	owner := store.SeedOwner{Tenant: "t", Key: "k"}
	bind := func(seed string, ttl time.Duration) {
		t.Helper()
		if _, err := s.Bind(ctx, "d", owner, seed, "", "acct", ttl); err != nil {
			t.Fatal(err)
		}
	}
	bind("long", time.Hour)
	for i := range 10 {
		bind(fmt.Sprintf("short-%d", i), 50*time.Millisecond)
	}
	for lapsed := time.Now().Add(60 * time.Millisecond); time.Now().Before(lapsed); {
		time.Sleep(10 * time.Millisecond)
	}
	bind("new", time.Hour)
	keyIndex, tenantIndex := s.affinityIndexes("d", owner)
	for _, index := range []string{keyIndex, tenantIndex} {
		members, err := s.rdb.ZRange(ctx, index, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"long", "new"}
		if index == tenantIndex {
			want = []string{"k\x00long", "k\x00new"}
		}
		slices.Sort(members)
		if !slices.Equal(members, want) {
			t.Errorf("%s holds %q, want %q: the lapsed bindings gone, the live ones kept", index, members, want)
		}
	}
}
