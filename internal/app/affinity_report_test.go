package app_test

import (
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/ledger"
)

// The cache report, from the usage records the gateway wrote: two
// conversations of three turns on an affinity alias read their history
// from the simulator's prompt cache, and a fourth turn of one of them
// moves off its disabled account. The report's cached tokens are the
// records' own, and its hit rate is hits / (hits + moves): 4 / 5.
func TestCacheReportThroughTheServer(t *testing.T) {
	h := newAffinityHarness(t, "{backend: memory}", 4, 4, 4, "1h")
	bound := map[string]string{} // session → the account its turns ran on
	for _, s := range []string{"report-a", "report-b"} {
		for n := range 3 {
			code, acct := h.sendTurn(turn{header: session(s), body: conversation(s, n)})
			if code != http.StatusOK || (n > 0 && acct != bound[s]) {
				t.Fatalf("%s turn %d = %d on %q, want 200 on %q", s, n, code, acct, bound[s])
			}
			bound[s] = acct
		}
	}
	h.adminPost(t, "/admin/accounts/"+bound["report-a"]+"/disable")
	code, moved := h.sendTurn(turn{header: session("report-a"), body: conversation("report-a", 3)})
	if code != http.StatusOK || moved == "" || moved == bound["report-a"] {
		t.Fatalf("report-a turn 3 = %d on %q, want 200 off its disabled account %s", code, moved, bound["report-a"])
	}

	// What the records say, per account: the report must agree.
	type sums struct{ prompt, cached int64 }
	want := map[string]*sums{}
	from, to := time.Now(), time.Now().Add(time.Minute)
	placed := map[string]int{}
	for _, r := range h.usage(t, 7) {
		placed[r.Affinity]++
		if r.Started.Before(from) {
			from = r.Started
		}
		for _, e := range r.Executions {
			if want[e.AccountID] == nil {
				want[e.AccountID] = &sums{}
			}
			want[e.AccountID].prompt += e.Usage.PromptTokens
			want[e.AccountID].cached += e.Usage.CachedTokens
		}
	}
	if wantPlaced := map[string]int{sluice.PlacementHit: 4, sluice.PlacementNew: 2, sluice.PlacementMoved: 1}; !maps.Equal(placed, wantPlaced) {
		t.Errorf("records' placements = %v, want %v", placed, wantPlaced)
	}
	rep, err := h.adminClient().CacheReport(t.Context(), admin.CacheQuery{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	var cached int64
	for _, row := range rep.Rows {
		w := want[row.AccountID]
		if row.Alias != "fast" || w == nil || row.PromptTokens != w.prompt || row.CachedTokens != w.cached {
			t.Errorf("row %+v, want alias fast and the records' tokens on %s: %+v", row, row.AccountID, w)
		}
		cached += row.CachedTokens
	}
	if len(rep.Rows) != len(want) {
		t.Errorf("report has %d rows, want one per account that served: %v", len(rep.Rows), want)
	}
	tot := rep.Total
	if cached == 0 || tot.CachedTokens != cached || tot.CachedShare <= 0 || tot.CachedShare >= 1 {
		t.Errorf("total %+v, want the rows' cached tokens (some, not all of the prompt)", tot)
	}
	placements := admin.Placements{Hits: 4, New: 2, Moved: 1}
	if a := tot.Affinity; tot.Requests != 7 || a.Hits != placements.Hits || a.New != placements.New || a.Moved != placements.Moved ||
		a.HitRate == nil || *a.HitRate != 0.8 {
		t.Errorf("total %+v with placements %+v, want 7 requests, %+v and hit rate 0.8", tot, a, placements)
	}

	// By alias and day: one row, the same totals.
	byDay, err := h.adminClient().CacheReport(t.Context(), admin.CacheQuery{From: from, To: to, By: []ledger.Dimension{ledger.ByAlias, ledger.ByDay}})
	if err != nil {
		t.Fatal(err)
	}
	if len(byDay.Rows) != 1 || byDay.Rows[0].Day != from.UTC().Format(time.DateOnly) || byDay.Rows[0].CachedTokens != cached ||
		byDay.Rows[0].Affinity.Hits != placements.Hits {
		t.Errorf("by alias and day = %+v, want one row of today with the totals", byDay.Rows)
	}
}
