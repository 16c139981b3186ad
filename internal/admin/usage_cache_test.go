package admin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/ledger"
)

// setCacheRows gives the harness's ledger two accounts of an affinity
// alias (one that only took moved requests' tokens) and an alias without
// affinity on one of them.
func setCacheRows(h *harness) {
	h.usage.setCacheRows(
		ledger.CacheRow{Account: "org-1", Alias: "claude", Requests: 10, PromptTokens: 10000, CachedTokens: 7500, CacheWriteTokens: 1000, Hits: 6, New: 2, Moved: 2},
		ledger.CacheRow{Account: "org-1", Alias: "gpt", Requests: 3, PromptTokens: 300},
		ledger.CacheRow{Account: "org-2", Alias: "claude", PromptTokens: 2000, CachedTokens: 500, CacheWriteTokens: 1500},
	)
}

func rate(r float64) *float64 { return &r }

func TestCacheReport(t *testing.T) {
	h := newHarness(t)
	setCacheRows(h)
	by := []ledger.Dimension{ledger.ByAlias, ledger.ByAccount}
	got, err := h.client.CacheReport(t.Context(), admin.CacheQuery{From: reportFrom, To: reportTo, By: by})
	if err != nil {
		t.Fatal(err)
	}
	if f := h.usage.cacheFilter(); !f.From.Equal(reportFrom) || !f.To.Equal(reportTo) || !cmp.Equal(f.By, by) {
		t.Errorf("CacheReport got %+v, want [%v, %v) by %v", f, reportFrom, reportTo, by)
	}
	want := &admin.CacheReport{From: reportFrom, To: reportTo, By: by, Rows: []admin.CacheRow{
		{AccountID: "org-1", Alias: "claude", Requests: 10, PromptTokens: 10000, CachedTokens: 7500, CacheWriteTokens: 1000, CachedShare: 0.75,
			Affinity: admin.Placements{Hits: 6, New: 2, Moved: 2, HitRate: rate(0.75)}},
		{AccountID: "org-1", Alias: "gpt", Requests: 3, PromptTokens: 300},
		{AccountID: "org-2", Alias: "claude", PromptTokens: 2000, CachedTokens: 500, CacheWriteTokens: 1500, CachedShare: 0.25},
	}, Total: admin.CacheRow{Requests: 13, PromptTokens: 12300, CachedTokens: 8000, CacheWriteTokens: 2500, CachedShare: 8000.0 / 12300,
		Affinity: admin.Placements{Hits: 6, New: 2, Moved: 2, HitRate: rate(0.75)}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CacheReport mismatch (-want +got):\n%s", diff)
	}
}

func TestCacheReportDefaults(t *testing.T) {
	h := newHarness(t)
	before := time.Now()
	rep, err := h.client.CacheReport(t.Context(), admin.CacheQuery{})
	if err != nil {
		t.Fatal(err)
	}
	f := h.usage.cacheFilter()
	if f.To.Before(before) || f.To.After(time.Now()) || f.To.Sub(f.From) != 24*time.Hour {
		t.Errorf("CacheReport got %+v, want the day before now", f)
	}
	if want := []ledger.Dimension{ledger.ByAccount, ledger.ByAlias}; !cmp.Equal(f.By, want) || !cmp.Equal(rep.By, want) {
		t.Errorf("CacheReport grouped by %v (report says %v), want %v", f.By, rep.By, want)
	}
	if rep.Rows == nil || rep.Total.Affinity.HitRate != nil {
		t.Errorf("empty report = %+v, want rows [] and no hit rate", rep)
	}
}

func TestCacheReportRefusesBadQueries(t *testing.T) {
	h := newHarness(t)
	for _, give := range []string{
		"/admin/usage/cache?by=key",
		"/admin/usage/cache?by=account,model",
		"/admin/usage/cache?from=yesterday",
		"/admin/usage/cache?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z",
	} {
		resp, body := h.do(t, "GET", give, testToken, "")
		if got := decodeError(t, body).Error.Code; resp.StatusCode != 400 || got != "invalid_request" {
			t.Errorf("GET %s = %d %q, want 400 invalid_request", give, resp.StatusCode, got)
		}
	}
}

func TestCLIUsageCache(t *testing.T) {
	h := newHarness(t)
	setCacheRows(h)
	code, out, errOut := h.runCLI(t, "usage", "cache", "--from", "2026-03-01T00:00:00Z", "--to", "2026-03-02T00:00:00Z")
	if code != 0 {
		t.Fatalf("usage cache exit = %d, stderr %q", code, errOut)
	}
	want := `Requests from 2026-03-01T00:00:00Z to 2026-03-02T00:00:00Z

ACCOUNT  ALIAS   REQUESTS  PROMPT  CACHED  CACHE WRITE  CACHED SHARE  HITS  NEW  MOVED  HIT RATE
org-1    claude  10        10000   7500    1000         75.0%         6     2    2      75.0%
org-1    gpt     3         300     0       0            0.0%          0     0    0      -
org-2    claude  0         2000    500     1500         25.0%         0     0    0      -
(total)  -       13        12300   8000    2500         65.0%         6     2    2      75.0%
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("usage cache output mismatch (-want +got):\n%s", diff)
	}
	if code, _, _ := h.runCLI(t, "usage", "cache", "--by", "alias,day"); code != 0 || !cmp.Equal(h.usage.cacheFilter().By, []ledger.Dimension{ledger.ByAlias, ledger.ByDay}) {
		t.Errorf("usage cache --by alias,day = exit %d, filter %+v", code, h.usage.cacheFilter())
	}
	if code, _, errOut := h.runCLI(t, "usage", "cache", "--by", "key"); code == 0 || !strings.Contains(errOut, "by:") {
		t.Errorf("usage cache --by key = exit %d, stderr %q; want a failure naming by", code, errOut)
	}
}

// A usage record shows its cache-write tokens and its placement.
func TestUsageShowsCacheWritesAndPlacement(t *testing.T) {
	h := newHarness(t)
	used := sluice.Usage{PromptTokens: 100, CachedTokens: 60, CacheWriteTokens: 40, Measured: true}
	h.usage.RecordUsage(t.Context(), []sluice.UsageRecord{{
		RequestID: "req-1", Alias: "claude", Status: 200, Started: reportFrom, Usage: used, Affinity: sluice.PlacementHit,
		Executions: []sluice.Execution{{AccountID: "org-1", Status: sluice.ExecutionOK, Started: reportFrom, Usage: used}},
	}})
	_, body := h.do(t, "GET", "/admin/usage?since=2026-03-01T00:00:00Z", testToken, "")
	if tokens := `"cached_tokens":60,"cache_write_tokens":40`; strings.Count(body, tokens) != 2 {
		t.Errorf("GET /admin/usage = %s\nwant %s in the record's usage and its execution's", body, tokens)
	}
	if placement := `"affinity":"hit"`; !strings.Contains(body, placement) {
		t.Errorf("GET /admin/usage = %s\nwant %s", body, placement)
	}
}
