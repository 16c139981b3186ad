package sqlledger

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
)

// TestEpochDay: the day number from Unix seconds is the number of the UTC
// day ledger.Day names — either side of midnight, in any zone, before 1970.
func TestEpochDay(t *testing.T) {
	zone := time.FixedZone("UTC+5", 5*3600)
	for _, at := range []time.Time{
		time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 12, 2, 3, 0, 0, 0, zone), // 1 December in UTC
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
	} {
		if got, want := epochDay(at), ledger.Day(at).Unix()/86400; got != want {
			t.Errorf("epochDay(%s) = %d, want %d", at, got, want)
		}
	}
}
