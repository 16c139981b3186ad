package metrics

import (
	"testing"
	"time"
)

// TestKeyStoreMetrics checks that the key store's age is read at each
// scrape (so it grows while refreshes fail) and that the failures counter
// returned is the one exported.
func TestKeyStoreMetrics(t *testing.T) {
	m := New()
	refreshed := time.Now().Add(-45 * time.Second)
	failures := m.WatchKeyStore(func() time.Time { return refreshed })
	failures.Add(3)
	scrape := func() (age, failed float64) {
		t.Helper()
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "sluice_key_store_age_seconds":
				age = mf.GetMetric()[0].GetGauge().GetValue()
			case "sluice_key_store_refresh_failures_total":
				failed = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return age, failed
	}
	if age, failed := scrape(); age < 45 || age > 60 || failed != 3 {
		t.Errorf("scrape = age %v, failures %v; want about 45 and 3", age, failed)
	}
	refreshed = time.Now()
	if age, _ := scrape(); age > 5 {
		t.Errorf("age after a refresh = %v, want about 0", age)
	}
}
