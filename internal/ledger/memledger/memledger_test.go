package memledger_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/ledger/memledger"
)

func TestContract(t *testing.T) {
	ledgertest.Run(t, func(*testing.T) ledger.Usage { return new(memledger.Store) })
}

func TestBillingContract(t *testing.T) {
	ledgertest.RunBilling(t, func(*testing.T) (ledgertest.Store, ledgertest.Store) {
		s := new(memledger.Store)
		return s, s
	})
}
