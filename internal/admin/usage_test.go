package admin_test

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/ledger"
)

var usageDay = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// usageHarness holds two records of 2026-03-01: r1 of tenant web, billed,
// served by gpt-4o-mini; r2 of tenant ops, refused.
func usageHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.usage.RecordUsage(t.Context(), []sluice.UsageRecord{{
		RequestID: "r1", KeyID: "k1", Tenant: "web", Alias: "fast", Protocol: sluice.ProtocolOpenAIChat, Status: 200,
		Started: usageDay, Latency: 1500 * time.Millisecond, TTFT: 200 * time.Millisecond, EndUser: "alice, \"the\" user", TaskType: "chat",
		Usage:      sluice.Usage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 2, TotalTokens: 15, Measured: true},
		Billing:    &sluice.Charge{Account: "acme", Price: 1234},
		Executions: []sluice.Execution{{Model: "gpt-4o-mini", Status: sluice.ExecutionOK, Started: usageDay}},
	}, {
		RequestID: "r2", KeyID: "k2", Tenant: "ops", Alias: "slow", Protocol: sluice.ProtocolOpenAIChat, Status: 429,
		Code: sluice.CodeCapacityWaitTimeout, Started: usageDay.Add(90 * time.Second), Latency: 500 * time.Millisecond,
	}})
	return h
}

// TestUsageFilters: every parameter reaches the ledger's filter, and the
// records it selects come back.
func TestUsageFilters(t *testing.T) {
	h := usageHarness(t)
	q := ledger.UsageFilter{Since: usageDay.Add(-time.Hour), Until: usageDay.Add(time.Hour), Tenant: "web", KeyID: "k1", Alias: "fast",
		Model: "gpt-4o-mini", EndUser: "alice, \"the\" user", TaskType: "chat", Code: "ok", Limit: 7}
	recs, err := h.client.Usage(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].RequestID != "r1" {
		t.Fatalf("Usage = %+v, want r1 alone", recs)
	}
	if r := recs[0]; r.Model != "gpt-4o-mini" || r.EndUser != q.EndUser || r.TaskType != "chat" || r.BillingAccount != "acme" || r.Price != 1234 {
		t.Errorf("record r1 = %+v, want its model, end user, task type and charge", r)
	}
	got, _ := h.usage.got()
	want := ledger.UsageFilter{Since: q.Since, Until: q.Until, Tenant: "web", KeyID: "k1", Alias: "fast", Model: "gpt-4o-mini",
		EndUser: "alice, \"the\" user", TaskType: "chat", Code: "ok", Limit: 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListUsage filter (-want +got):\n%s", diff)
	}
	if recs, err = h.client.Usage(t.Context(), ledger.UsageFilter{Since: usageDay.Add(-time.Hour), Code: string(sluice.CodeCapacityWaitTimeout)}); err != nil ||
		len(recs) != 1 || recs[0].RequestID != "r2" {
		t.Errorf("Usage by code = %+v, %v; want r2", recs, err)
	}
}

// TestUsageCSV: format=csv and Accept: text/csv answer the documented
// columns, a row per record, as an attachment.
func TestUsageCSV(t *testing.T) {
	h := usageHarness(t)
	since := url.QueryEscape(usageDay.Add(-time.Hour).Format(time.RFC3339))
	for name, c := range map[string]struct {
		query  string
		header []string
	}{
		"format":   {"&format=csv", nil},
		"accept":   {"", []string{"Accept", "application/json;q=0.5, text/csv"}},
		"filtered": {"&format=csv&tenant=web", nil},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := h.do(t, http.MethodGet, "/admin/usage?since="+since+c.query, testToken, "", c.header...)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
				!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			want := [][]string{admin.UsageCSVColumns,
				{"r1", "2026-03-01T12:00:00Z", "web", "k1", "fast", "gpt-4o-mini", "openai.chat", "200", "", "10", "5", "2", "1500", "1234", "acme", "alice, \"the\" user", "chat"},
				{"r2", "2026-03-01T12:01:30Z", "ops", "k2", "slow", "", "openai.chat", "429", "capacity_wait_timeout", "0", "0", "0", "500", "", "", "", ""},
			}
			if name == "filtered" {
				want = want[:2]
			}
			if diff := cmp.Diff(want, rows); diff != "" {
				t.Errorf("CSV (-want +got):\n%s", diff)
			}
		})
	}
	if code, out, errOut := h.runCLI(t, "usage", "list", "--csv", "--since", "2026-03-01T00:00:00Z", "--tenant", "ops"); code != 0 ||
		!strings.HasPrefix(out, "request_id,started,") || !strings.Contains(out, "\nr2,") || strings.Contains(out, "\nr1,") {
		t.Errorf("usage list --csv --tenant ops = %d, %q, %q", code, out, errOut)
	}
}

// TestUsageSummary: the buckets and total of the window, the default
// bucket chosen by the window, and this replica's queue waits.
func TestUsageSummary(t *testing.T) {
	h := usageHarness(t)
	sum, err := h.client.UsageSummary(t.Context(), ledger.UsageFilter{Since: usageDay.Add(-time.Hour), Until: usageDay.Add(time.Hour)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Bucket != ledger.BucketMinute || len(sum.Buckets) != 2 || sum.QueueWaitThisReplicaSinceStart != nil {
		t.Fatalf("summary of two hours = %+v, want 2 buckets by minute, no queue waits", sum)
	}
	start := usageDay.Add(time.Minute)
	wantSecond := admin.UsageStats{Start: &start, Requests: 1, Errors: map[string]int64{"capacity_wait_timeout": 1}, LatencyP50MS: 500,
		LatencyP95MS: 500, LatencyP99MS: 500}
	if diff := cmp.Diff(wantSecond, sum.Buckets[1]); diff != "" {
		t.Errorf("second bucket (-want +got):\n%s", diff)
	}
	if tot := sum.Total; tot.Requests != 2 || tot.Spend != 1234 || tot.PromptTokens != 10 || tot.LatencyP50MS != 1000 || tot.TTFTP50MS != 200 || tot.Start != nil {
		t.Errorf("total = %+v", tot)
	}
	for window, want := range map[time.Duration]ledger.Bucket{
		500 * time.Minute: ledger.BucketMinute, 501 * time.Minute: ledger.BucketHour, 30 * 24 * time.Hour: ledger.BucketDay} {
		sum, err := h.client.UsageSummary(t.Context(), ledger.UsageFilter{Since: usageDay.Add(-window), Until: usageDay}, "")
		if err != nil || sum.Bucket != want {
			t.Errorf("window %v: bucket %v, %v; want %s", window, sum, err, want)
		}
	}
	if _, err := h.client.UsageSummary(t.Context(), ledger.UsageFilter{Since: usageDay.Add(-24 * time.Hour), Until: usageDay}, ledger.BucketMinute); err != nil {
		t.Errorf("a day by minute: %v", err)
	}
	if _, err := h.client.UsageSummary(t.Context(), ledger.UsageFilter{Tenant: "web"}, ledger.BucketDay); err != nil {
		t.Fatal(err)
	}
	if f, b := h.usage.got(); f.Tenant != "web" || b != ledger.BucketDay || f.Until.Sub(f.Since) != 24*time.Hour {
		t.Errorf("SummarizeUsage got %+v by %s, want tenant web, the last day, by day", f, b)
	}

	url := newServer(t, admin.Options{Tokens: testTokens, Usage: h.usage,
		QueueWaits: func(qs []float64) (uint64, []time.Duration) {
			return 40, []time.Duration{time.Millisecond, 20 * time.Millisecond, 300 * time.Millisecond}
		}})
	h.client = adminclient.NewClient(url, testToken)
	if sum, err = h.client.UsageSummary(t.Context(), ledger.UsageFilter{}, ""); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&admin.QueueWaits{Observed: 40, P50MS: 1, P95MS: 20, P99MS: 300}, sum.QueueWaitThisReplicaSinceStart); diff != "" {
		t.Errorf("queue waits (-want +got):\n%s", diff)
	}
}

// TestUsageParameters: a bad parameter is a 400 invalid_request that names it.
func TestUsageParameters(t *testing.T) {
	h := usageHarness(t)
	for _, c := range []struct{ path, names string }{
		{"/admin/usage?since=yesterday", "since"},
		{"/admin/usage?until=2026-13-01T00:00:00Z", "until"},
		{"/admin/usage?since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z", "until"},
		{"/admin/usage?limit=0", "limit"},
		{"/admin/usage?limit=10001", "limit"},
		{"/admin/usage?format=xml", "format"},
		{"/admin/usage/summary?bucket=week", "bucket"},
		{"/admin/usage/summary?bucket=minute&since=2026-03-01T00:00:00Z&until=2026-03-02T00:01:00Z", "bucket"},
		{"/admin/usage/summary?since=2020-01-01T00:00:00Z&until=2026-03-01T00:00:00Z", "bucket"},
		{"/admin/usage/summary?until=now", "until"},
	} {
		resp, body := h.do(t, http.MethodGet, c.path, testToken, "")
		if e := decodeError(t, body); resp.StatusCode != http.StatusBadRequest || e.Error.Code != "invalid_request" ||
			!strings.HasPrefix(e.Error.Message, c.names+" ") {
			t.Errorf("GET %s = %d %+v, want 400 invalid_request naming %s", c.path, resp.StatusCode, e.Error, c.names)
		}
	}
}
