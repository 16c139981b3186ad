package ledgertest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// filtered are records that differ in every field a UsageFilter selects
// by, a minute apart: c tried m1 before m2 served it, d never ran.
func filtered() []sluice.UsageRecord {
	exec := func(model string, minute int) sluice.Execution {
		return sluice.Execution{EdgeID: "c/e/" + model, Model: model, Status: sluice.ExecutionOK, Started: at(minute)}
	}
	return []sluice.UsageRecord{
		{RequestID: "a", Tenant: "t1", KeyID: "k1", Alias: "fast", EndUser: "u1", TaskType: "chat", Status: 200, Started: at(0),
			Executions: []sluice.Execution{exec("m1", 0)}},
		{RequestID: "b", Tenant: "t2", KeyID: "k2", Alias: "slow", EndUser: "u2", TaskType: "code", Status: 504, Started: at(1),
			Code: sluice.CodeCapacityWaitTimeout, Executions: []sluice.Execution{exec("m2", 1)}},
		{RequestID: "c", Tenant: "t1", KeyID: "k2", Alias: "fast", EndUser: "u1", TaskType: "chat", Status: 200, Started: at(2),
			Executions: []sluice.Execution{exec("m1", 2), exec("m2", 2)}},
		{RequestID: "d", Tenant: "t2", KeyID: "k1", Alias: "slow", Status: 401, Started: at(3), Code: sluice.CodeNoCredentials},
	}
}

// runFilters checks that ListUsage selects by every field of UsageFilter,
// limits after selecting, and keeps the executions of what it selects.
func runFilters(t *testing.T, open func(t *testing.T) ledger.Usage) {
	u := open(t)
	record(t, u, filtered()...)
	for _, c := range []struct {
		name string
		f    ledger.UsageFilter
		want []string
	}{
		{"None", ledger.UsageFilter{}, []string{"a", "b", "c", "d"}},
		{"Since", ledger.UsageFilter{Since: at(1)}, []string{"b", "c", "d"}},
		{"Until", ledger.UsageFilter{Until: at(2)}, []string{"a", "b"}},
		{"SinceUntil", ledger.UsageFilter{Since: at(1), Until: at(3)}, []string{"b", "c"}},
		{"Tenant", ledger.UsageFilter{Tenant: "t1"}, []string{"a", "c"}},
		{"Key", ledger.UsageFilter{KeyID: "k2"}, []string{"b", "c"}},
		{"Alias", ledger.UsageFilter{Alias: "slow"}, []string{"b", "d"}},
		{"ModelServed", ledger.UsageFilter{Model: "m2"}, []string{"b", "c"}},
		{"ModelTriedFirstOnly", ledger.UsageFilter{Model: "m1"}, []string{"a"}},
		{"EndUser", ledger.UsageFilter{EndUser: "u2"}, []string{"b"}},
		{"TaskType", ledger.UsageFilter{TaskType: "chat"}, []string{"a", "c"}},
		{"CodeOK", ledger.UsageFilter{Code: ledger.CodeOK}, []string{"a", "c"}},
		{"Code", ledger.UsageFilter{Code: string(sluice.CodeNoCredentials)}, []string{"d"}},
		{"Several", ledger.UsageFilter{Tenant: "t1", Alias: "fast", Code: ledger.CodeOK, Since: at(1)}, []string{"c"}},
		{"LimitAfterFilter", ledger.UsageFilter{Tenant: "t2", Limit: 1}, []string{"b"}},
		{"NoneSelected", ledger.UsageFilter{Tenant: "t3"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := u.ListUsage(t.Context(), c.f)
			if err != nil {
				t.Fatalf("ListUsage(%+v) = %v", c.f, err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.RequestID)
				if want := map[string]int{"a": 1, "b": 1, "c": 2}[r.RequestID]; len(r.Executions) != want {
					t.Errorf("record %s has %d executions, want %d", r.RequestID, len(r.Executions), want)
				}
			}
			if diff := cmp.Diff(c.want, ids); diff != "" {
				t.Errorf("ListUsage(%+v) IDs (-want +got):\n%s", c.f, diff)
			}
		})
	}
}

// runSummary checks SummarizeUsage: UTC buckets holding records only,
// percentiles interpolated as percentile_cont does, errors by code, the
// price of billed records, and the filter applied.
func runSummary(t *testing.T, open func(t *testing.T) ledger.Usage) {
	u := open(t)
	day := time.Date(2025, 3, 14, 10, 0, 0, 0, time.UTC)
	rec := func(id, tenant string, started time.Time, latency, ttft time.Duration, price int64, code sluice.Code) sluice.UsageRecord {
		r := sluice.UsageRecord{RequestID: id, Tenant: tenant, Started: started.In(time.FixedZone("CET", 3600)), Status: 200, Code: code,
			Latency: latency, TTFT: ttft, Usage: sluice.Usage{PromptTokens: 100, CompletionTokens: 10, CachedTokens: 40, Measured: true}}
		if price > 0 {
			r.Billing = &sluice.Charge{Account: "acme", Price: price}
		}
		return r
	}
	ms := time.Millisecond
	record(t, u,
		rec("r1", "t1", day.Add(10*time.Second), 100*ms, 0, 1000, ""),
		rec("r2", "t1", day.Add(50*time.Second), 200*ms, 50*ms, 0, sluice.CodeCapacityWaitTimeout),
		rec("r3", "t2", day.Add(90*time.Second), 300*ms, 70*ms, 2500, ""),
		rec("r4", "t1", day.Add(13*time.Hour), 400*ms, 90*ms, 0, sluice.CodeCapacityWaitTimeout),
	)
	stats := func(start time.Time, n int64, errors map[string]int64, price int64, p50, p95, p99, ttft time.Duration) ledger.UsageStats {
		return ledger.UsageStats{Start: start, Requests: n, Errors: errors, PromptTokens: 100 * n, CompletionTokens: 10 * n,
			CachedTokens: 40 * n, Price: billing.Micros(price), LatencyP50: p50, LatencyP95: p95, LatencyP99: p99, TTFTP50: ttft}
	}
	timeout := string(sluice.CodeCapacityWaitTimeout)
	total := stats(time.Time{}, 4, map[string]int64{timeout: 2}, 3500, 250*ms, 385*ms, 397*ms, 70*ms)
	for _, c := range []struct {
		name   string
		f      ledger.UsageFilter
		bucket ledger.Bucket
		want   ledger.UsageSummary
	}{
		{"ByMinute", ledger.UsageFilter{}, ledger.BucketMinute, ledger.UsageSummary{Total: total, Buckets: []ledger.UsageStats{
			stats(day, 2, map[string]int64{timeout: 1}, 1000, 150*ms, 195*ms, 199*ms, 50*ms),
			stats(day.Add(time.Minute), 1, nil, 2500, 300*ms, 300*ms, 300*ms, 70*ms),
			stats(day.Add(13*time.Hour), 1, map[string]int64{timeout: 1}, 0, 400*ms, 400*ms, 400*ms, 90*ms),
		}}},
		{"ByDay", ledger.UsageFilter{}, ledger.BucketDay, ledger.UsageSummary{Total: total, Buckets: []ledger.UsageStats{
			stats(day.Truncate(24*time.Hour), 4, map[string]int64{timeout: 2}, 3500, 250*ms, 385*ms, 397*ms, 70*ms),
		}}},
		{"Filtered", ledger.UsageFilter{Tenant: "t1", Until: day.Add(time.Hour)}, ledger.BucketHour, ledger.UsageSummary{
			Total: stats(time.Time{}, 2, map[string]int64{timeout: 1}, 1000, 150*ms, 195*ms, 199*ms, 50*ms),
			Buckets: []ledger.UsageStats{
				stats(day, 2, map[string]int64{timeout: 1}, 1000, 150*ms, 195*ms, 199*ms, 50*ms),
			}}},
		{"Empty", ledger.UsageFilter{Tenant: "t3"}, ledger.BucketHour, ledger.UsageSummary{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := u.SummarizeUsage(t.Context(), c.f, c.bucket)
			if err != nil {
				t.Fatalf("SummarizeUsage = %v", err)
			}
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("SummarizeUsage(%+v, %s) (-want +got):\n%s", c.f, c.bucket, diff)
			}
		})
	}
	t.Run("UnknownBucket", func(t *testing.T) {
		if _, err := u.SummarizeUsage(t.Context(), ledger.UsageFilter{}, "week"); err == nil {
			t.Error("SummarizeUsage by week = nil error, want one")
		}
	})
}
