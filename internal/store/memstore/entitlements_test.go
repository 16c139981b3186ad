package memstore

import (
	"testing"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

func TestEntitlementsContract(t *testing.T) {
	storetest.RunEntitlements(t, func(*testing.T) func() store.Entitlements {
		s := new(Entitlements)
		return func() store.Entitlements { return s }
	})
}
