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

// ExecutionCounts count by endpoint, account, credential and class, and
// export every class of a source once it had an attempt; tokens add up by
// account and credential, over the credential's endpoints.
func TestExecutionCounts(t *testing.T) {
	m := New()
	c := m.ExecutionCounts([]string{"ok", "rate"})
	c.Add(Attempt{Endpoint: "ep-a", Account: "org", Credential: "k1", Class: 0, PromptTokens: 100, CachedTokens: 60})
	c.Add(Attempt{Endpoint: "ep-b", Account: "org", Credential: "k1", Class: 0, PromptTokens: 50})
	c.Add(Attempt{Endpoint: "ep-a", Account: "org", Credential: "k2", Class: 1})
	got := counterSeries(t, m, "sluice_upstream_executions_total")
	want := map[string]float64{
		"account=org class=ok credential=k1 endpoint=ep-a ":   1,
		"account=org class=rate credential=k1 endpoint=ep-a ": 0,
		"account=org class=ok credential=k1 endpoint=ep-b ":   1,
		"account=org class=rate credential=k1 endpoint=ep-b ": 0,
		"account=org class=ok credential=k2 endpoint=ep-a ":   0,
		"account=org class=rate credential=k2 endpoint=ep-a ": 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("execution series = %v, want %v", got, want)
	}
	got = counterSeries(t, m, "sluice_upstream_tokens_total")
	want = map[string]float64{
		"account=org credential=k1 kind=prompt ": 150,
		"account=org credential=k1 kind=cached ": 60,
		"account=org credential=k2 kind=prompt ": 0,
		"account=org credential=k2 kind=cached ": 0,
	}
	if !maps.Equal(got, want) {
		t.Errorf("token series = %v, want %v", got, want)
	}
}

// An attempt counts itself without allocating, once its source has had
// one: the request path pays a map read and two or three atomic adds.
func TestExecutionCountsAddAllocatesNothing(t *testing.T) {
	c := New().ExecutionCounts([]string{"ok", "rate"})
	a := Attempt{Endpoint: "ep-a", Account: "org", Credential: "k1", Class: 1, PromptTokens: 10, CachedTokens: 5}
	c.Add(a)
	if n := testing.AllocsPerRun(100, func() { c.Add(a) }); n != 0 {
		t.Errorf("Add allocates %v times per attempt, want 0", n)
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
