package ledgertest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// runCache checks CacheReport: a request and its placement count on its
// first execution's account, tokens on every measured execution's, days
// are UTC, and the range is From inclusive, To exclusive.
func runCache(t *testing.T, open func(t *testing.T) ledger.Usage) {
	u := open(t)
	// Just before midnight UTC, and in a zone where it is already the
	// next day: the report's days are UTC.
	day1 := time.Date(2025, 3, 14, 23, 30, 0, 0, time.UTC).In(time.FixedZone("CET", 3600))
	day2 := day1.Add(time.Hour)
	served := func(account string, prompt, cached, written int64) sluice.Execution {
		return sluice.Execution{AccountID: account, Status: sluice.ExecutionOK, Started: day1,
			Usage: sluice.Usage{PromptTokens: prompt, CachedTokens: cached, CacheWriteTokens: written, TotalTokens: prompt + 10, Measured: true}}
	}
	failed := sluice.Execution{AccountID: "org-a", Status: sluice.ExecutionEndpoint, Started: day1,
		Usage: sluice.Usage{PromptTokens: 999}} // an estimate, not measured: counts no tokens
	limited := sluice.Execution{AccountID: "org-a", Status: sluice.ExecutionRate, Started: day1}
	rec := func(id, alias string, started time.Time, placement string, execs ...sluice.Execution) sluice.UsageRecord {
		return sluice.UsageRecord{RequestID: id, Alias: alias, Started: started, Affinity: placement, Executions: execs}
	}
	record(t, u,
		rec("r1", "claude", day1, sluice.PlacementMoved, limited, served("org-b", 1000, 800, 100)),
		rec("r2", "claude", day1.Add(time.Minute), sluice.PlacementHit, served("org-a", 500, 400, 0)),
		rec("r3", "claude", day1.Add(2*time.Minute), sluice.PlacementNew, served("org-a", 200, 0, 200)),
		rec("r4", "gpt", day1.Add(3*time.Minute), "", served("org-b", 100, 50, 0)),
		rec("r5", "claude", day2, sluice.PlacementHit, served("org-a", 300, 250, 0)),
		rec("r6", "claude", day1.Add(4*time.Minute), sluice.PlacementHit, failed),
		rec("r7", "claude", day1.Add(5*time.Minute), sluice.PlacementNew), // refused before any execution: counts nowhere
	)
	utcDay1 := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	utcDay2 := utcDay1.AddDate(0, 0, 1)
	tests := []struct {
		name string
		give ledger.CacheFilter
		want []ledger.CacheRow
	}{
		{"ByAccountAndAlias", ledger.CacheFilter{By: []ledger.Dimension{ledger.ByAlias, ledger.ByAccount}}, []ledger.CacheRow{
			{Account: "org-a", Alias: "claude", Requests: 5, PromptTokens: 1000, CachedTokens: 650, CacheWriteTokens: 200, Hits: 3, New: 1, Moved: 1},
			{Account: "org-b", Alias: "claude", PromptTokens: 1000, CachedTokens: 800, CacheWriteTokens: 100},
			{Account: "org-b", Alias: "gpt", Requests: 1, PromptTokens: 100, CachedTokens: 50},
		}},
		{"ByAliasAndDay", ledger.CacheFilter{By: []ledger.Dimension{ledger.ByAlias, ledger.ByDay}}, []ledger.CacheRow{
			{Alias: "claude", Day: utcDay1, Requests: 4, PromptTokens: 1700, CachedTokens: 1200, CacheWriteTokens: 300, Hits: 2, New: 1, Moved: 1},
			{Alias: "claude", Day: utcDay2, Requests: 1, PromptTokens: 300, CachedTokens: 250, Hits: 1},
			{Alias: "gpt", Day: utcDay1, Requests: 1, PromptTokens: 100, CachedTokens: 50},
		}},
		{"Everything", ledger.CacheFilter{}, []ledger.CacheRow{
			{Requests: 6, PromptTokens: 2100, CachedTokens: 1500, CacheWriteTokens: 300, Hits: 3, New: 1, Moved: 1},
		}},
		{"FromInclusive", ledger.CacheFilter{From: day2, By: []ledger.Dimension{ledger.ByAccount}}, []ledger.CacheRow{
			{Account: "org-a", Requests: 1, PromptTokens: 300, CachedTokens: 250, Hits: 1},
		}},
		{"ToExclusive", ledger.CacheFilter{From: day1.Add(time.Minute), To: day1.Add(3 * time.Minute), By: []ledger.Dimension{ledger.ByAccount}}, []ledger.CacheRow{
			{Account: "org-a", Requests: 2, PromptTokens: 700, CachedTokens: 400, CacheWriteTokens: 200, Hits: 1, New: 1},
		}},
		{"EmptyRange", ledger.CacheFilter{From: day2.Add(time.Second)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := u.CacheReport(t.Context(), tt.give)
			if err != nil {
				t.Fatalf("CacheReport(%+v) = %v", tt.give, err)
			}
			if diff := cmp.Diff(tt.want, got, opts); diff != "" {
				t.Errorf("CacheReport(%+v) mismatch (-want +got):\n%s", tt.give, diff)
			}
		})
	}
	t.Run("UnknownDimension", func(t *testing.T) {
		if _, err := u.CacheReport(t.Context(), ledger.CacheFilter{By: []ledger.Dimension{ledger.ByKey}}); err == nil {
			t.Error("CacheReport by key = nil error, want one")
		}
	})
}
