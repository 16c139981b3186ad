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

// Past MaxBindings the least recently used binding goes, not a recent one.
func TestAffinityBounded(t *testing.T) {
	s := New()
	ctx := t.Context()
	for i := range MaxBindings {
		s.Bind(ctx, "d", fmt.Sprint(i), "", "a", time.Hour)
	}
	s.Touch(ctx, "d", "0", time.Hour) // the oldest, used again
	s.Bind(ctx, "d", "new", "", "a", time.Hour)
	if n := s.bindings.lru.Len(); n != MaxBindings {
		t.Fatalf("%d bindings kept, want %d", n, MaxBindings)
	}
	if got, _ := s.Touch(ctx, "d", "0", time.Hour); got != "a" {
		t.Errorf("the binding used again was dropped")
	}
	if got, _ := s.Touch(ctx, "d", "1", time.Hour); got != "" {
		t.Errorf("the least recently used binding is still there")
	}
}
