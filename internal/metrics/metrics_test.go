package metrics

import (
	"maps"
	"testing"
)

// Spent adds to the series of its account and alias, each kind apart, and
// exports a series only once something was added to it.
func TestSpent(t *testing.T) {
	m := New()
	m.Spent("acme", "fast", 1500, 0)
	m.Spent("acme", "fast", 500, 300)
	m.Spent("", "slow", 0, 40) // cost only: no billing account
	got := counterSeries(t, m, "sluice_billing_spend_micros_total")
	want := map[string]float64{
		"alias=fast billing_account=acme kind=price ": 2000,
		"alias=fast billing_account=acme kind=cost ":  300,
		"alias=slow billing_account= kind=cost ":      40,
	}
	if !maps.Equal(got, want) {
		t.Errorf("spend series = %v, want %v", got, want)
	}
}

// ExecutionCounts count by endpoint and class, and export every class of
// an endpoint once it had an attempt.
func TestExecutionCounts(t *testing.T) {
	m := New()
	c := m.ExecutionCounts([]string{"ok", "rate"})
	c.Add("ep-a", 0)
	c.Add("ep-a", 0)
	c.Add("ep-b", 1)
	got := counterSeries(t, m, "sluice_upstream_executions_total")
	want := map[string]float64{
		"class=ok endpoint=ep-a ":   2,
		"class=rate endpoint=ep-a ": 0,
		"class=ok endpoint=ep-b ":   0,
		"class=rate endpoint=ep-b ": 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("execution series = %v, want %v", got, want)
	}
}

// counterSeries gathers the counter family name: each series' value by its
// labels, written "name=value " in label order.
func counterSeries(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var id string
			for _, l := range s.GetLabel() {
				id += l.GetName() + "=" + l.GetValue() + " "
			}
			got[id] = s.GetCounter().GetValue()
		}
	}
	return got
}
