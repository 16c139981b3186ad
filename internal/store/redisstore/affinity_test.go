package redisstore

import (
	"testing"

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
