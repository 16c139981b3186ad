package memcatalog_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/catalog/catalogtest"
	"github.com/sluicehq/sluice/internal/catalog/memcatalog"
)

func TestContract(t *testing.T) {
	catalogtest.Run(t, func(*testing.T) catalogtest.Store { return new(memcatalog.Store) })
}
