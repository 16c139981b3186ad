package ledgertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// rollerUp is a store that keeps daily roll-ups of closed days
// (sqlledger): the roll-up cases call RollUp and Retain on those that
// have them, and check the same answers on the others.
type rollerUp interface {
	RollUp(ctx context.Context, now time.Time) error
}

type retainer interface {
	Retain(ctx context.Context, cutoff time.Time) (int64, error)
}

// rollupDay0 is the first of the four days of rollupRecords; the fourth
// is "today" for the roll-up.
var rollupDay0 = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)

// rollupRecords are n records a day over the four days from rollupDay0,
// with prefix before their IDs, differing in every dimension a summary
// or spend report selects or groups by, and in latency (from 1 ms to
// seconds) and time to first token (none for some).
func rollupRecords(prefix string, n int) []sluice.UsageRecord {
	var out []sluice.UsageRecord
	for d := range 4 {
		for i := range n {
			g := d*n + i
			r := sluice.UsageRecord{RequestID: fmt.Sprintf("%s%d-%d", prefix, d, i), KeyID: fmt.Sprintf("k%d", g%5),
				Tenant: fmt.Sprintf("t%d", g%3), Alias: []string{"fast", "slow"}[g%2], EndUser: fmt.Sprintf("u%d", g%4),
				TaskType: []string{"chat", "code", ""}[g%3], Pool: []string{"paid", "free"}[g/2%2], Status: 200,
				Started: rollupDay0.AddDate(0, 0, d).Add(time.Duration(i) * 23 * time.Hour / time.Duration(n)),
				Latency: time.Duration(1+g*g*37%5000) * time.Millisecond, Usage: sluice.Usage{PromptTokens: int64(100 + g),
					CompletionTokens: int64(g % 17), CachedTokens: int64(g % 11), TotalTokens: int64(100 + g + g%17), Measured: g%9 != 0},
				Executions: []sluice.Execution{{EdgeID: "c/e/m", Model: []string{"m1", "m2", "m3"}[g%3], Status: sluice.ExecutionOK}}}
			if g%4 != 0 {
				r.TTFT = r.Latency / 3
			}
			if g%7 == 0 {
				r.Status, r.Code = 429, sluice.CodeCapacityWaitTimeout
			}
			if g%5 != 0 {
				r.Billing = &sluice.Charge{Account: fmt.Sprintf("acct-%d", g%2), Price: int64(1000 + g), Cost: int64(300 + g%10),
					Unmeasured: g%9 == 0}
			}
			r.Executions[0].Started = r.Started
			out = append(out, r)
		}
	}
	return out
}

// rollupQuery is one summary or spend report the roll-up cases compare.
type rollupQuery struct {
	name    string
	summary *ledger.UsageFilter // by day
	spend   *ledger.SpendFilter
}

// rollupQueries are the summaries and reports of the window from since to
// until: those the roll-ups answer, and those that select or group by key
// or end user, which they do not keep (answered from the records).
func rollupQueries(since, until time.Time) []rollupQuery {
	sum := func(f ledger.UsageFilter) *ledger.UsageFilter { f.Since, f.Until = since, until; return &f }
	spend := func(f ledger.SpendFilter) *ledger.SpendFilter { f.From, f.To = since, until; return &f }
	by := func(d ...ledger.Dimension) []ledger.Dimension { return d }
	return []rollupQuery{
		{name: "Summary", summary: sum(ledger.UsageFilter{})},
		{name: "SummaryOfTenant", summary: sum(ledger.UsageFilter{Tenant: "t1"})},
		{name: "SummaryOfAliasOK", summary: sum(ledger.UsageFilter{Alias: "slow", Code: ledger.CodeOK})},
		{name: "SummaryOfModelTask", summary: sum(ledger.UsageFilter{Model: "m2", TaskType: "code"})},
		{name: "SummaryOfCode", summary: sum(ledger.UsageFilter{Code: string(sluice.CodeCapacityWaitTimeout)})},
		{name: "SummaryOfKey", summary: sum(ledger.UsageFilter{KeyID: "k3"})},
		{name: "SummaryOfEndUser", summary: sum(ledger.UsageFilter{EndUser: "u1"})},
		{name: "SpendByAccountDay", spend: spend(ledger.SpendFilter{By: by(ledger.ByAccount, ledger.ByDay)})},
		{name: "SpendByEveryKeptDimension", spend: spend(ledger.SpendFilter{
			By: by(ledger.ByTenant, ledger.ByTaskType, ledger.ByPool, ledger.ByAlias, ledger.ByModel, ledger.ByDay)})},
		{name: "SpendOfAccountAndTenant", spend: spend(ledger.SpendFilter{Account: "acct-1", Tenant: "t2"})},
		{name: "SpendByKey", spend: spend(ledger.SpendFilter{By: by(ledger.ByKey, ledger.ByDay)})},
		{name: "SpendOfKey", spend: spend(ledger.SpendFilter{KeyID: "k2", By: by(ledger.ByDay)})},
		{name: "SpendByEndUser", spend: spend(ledger.SpendFilter{By: by(ledger.ByEndUser)})},
	}
}

// answers are what u answers to qs, by name.
type answers struct {
	summaries map[string]ledger.UsageSummary
	spends    map[string][]ledger.SpendRow
}

func answer(t *testing.T, u ledger.Usage, qs []rollupQuery) answers {
	t.Helper()
	out := answers{summaries: map[string]ledger.UsageSummary{}, spends: map[string][]ledger.SpendRow{}}
	for _, q := range qs {
		switch {
		case q.summary != nil:
			sum, err := u.SummarizeUsage(t.Context(), *q.summary, ledger.BucketDay)
			if err != nil {
				t.Fatalf("%s: SummarizeUsage = %v", q.name, err)
			}
			out.summaries[q.name] = sum
		case q.spend != nil:
			b, ok := u.(ledger.Billing)
			if !ok {
				continue
			}
			rows, err := b.Spend(t.Context(), *q.spend)
			if err != nil {
				t.Fatalf("%s: Spend = %v", q.name, err)
			}
			out.spends[q.name] = rows
		}
	}
	return out
}

// withinHistogramError checks that got's percentiles are at or above
// want's, which are exact, by less than ledger.HistogramError (and a
// microsecond of rounding), and that the rest is equal.
func withinHistogramError(t *testing.T, name string, got, want ledger.UsageSummary) {
	t.Helper()
	percentiles := func(s *ledger.UsageStats) []*time.Duration {
		return []*time.Duration{&s.LatencyP50, &s.LatencyP95, &s.LatencyP99, &s.TTFTP50}
	}
	check := func(what string, g, w *ledger.UsageStats) {
		for i, p := range percentiles(g) {
			exact := *percentiles(w)[i]
			if *p < exact || float64(*p) > float64(exact)*(1+ledger.HistogramError)+float64(time.Microsecond) {
				t.Errorf("%s: %s percentile #%d = %v, want in [%v, %v × (1 + %.3f)]", name, what, i, *p, exact, exact, ledger.HistogramError)
			}
			*p = exact
		}
	}
	if len(got.Buckets) == len(want.Buckets) {
		for i := range got.Buckets {
			check(got.Buckets[i].Start.Format(time.DateOnly), &got.Buckets[i], &want.Buckets[i])
		}
	}
	check("total", &got.Total, &want.Total)
	got.Approximate = want.Approximate
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s (-records +roll-ups):\n%s", name, diff)
	}
}

// runRollup checks that summaries by day and spend reports read as the
// records add up, whatever of them a store has rolled up: over closed
// days and today, after records of a closed day arrive late, after the
// roll-up runs again, and after retention removed closed days' records.
// records is a store that is never rolled up; u one that is, when it
// can.
func runRollup(t *testing.T, open func(t *testing.T) ledger.Usage) {
	ctx := t.Context()
	records, u := open(t), open(t)
	recs := rollupRecords("r", 40)
	record(t, records, recs...)
	record(t, u, recs...)
	today := rollupDay0.AddDate(0, 0, 3)
	roller, rolls := u.(rollerUp)
	rollUp := func() {
		if rolls {
			if err := roller.RollUp(ctx, today.Add(12*time.Hour)); err != nil {
				t.Fatalf("RollUp = %v", err)
			}
		}
	}
	// compare checks u's answers against records': a summary the
	// roll-ups answer says it is approximate.
	compare := func(t *testing.T, qs []rollupQuery, skip ...string) {
		want, got := answer(t, records, qs), answer(t, u, qs)
		for _, q := range qs {
			if q.summary != nil && !slices.Contains(skip, q.name) {
				g := got.summaries[q.name]
				byRollups := rolls && q.summary.KeyID == "" && q.summary.EndUser == ""
				if g.Approximate != byRollups {
					t.Errorf("%s: Approximate = %v, want %v", q.name, g.Approximate, byRollups)
				}
				withinHistogramError(t, q.name, g, want.summaries[q.name])
			}
			if q.spend != nil && !slices.Contains(skip, q.name) {
				if diff := cmp.Diff(want.spends[q.name], got.spends[q.name], cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s (-records +roll-ups):\n%s", q.name, diff)
				}
			}
		}
	}
	// From inside the first day to inside today: the first day and today
	// are read from records, the two between from roll-ups.
	partial := rollupQueries(rollupDay0.Add(5*time.Hour), today.Add(20*time.Hour))
	whole := rollupQueries(rollupDay0, time.Time{})

	rollUp()
	t.Run("ClosedDaysAndToday", func(t *testing.T) { compare(t, partial); compare(t, whole) })

	late := rollupRecords("late", 3)
	t.Run("LateRecords", func(t *testing.T) {
		// Records of closed days, rolled up already, and of today; one of
		// them written again, as a spool replays it.
		record(t, records, late...)
		record(t, u, late...)
		record(t, u, late[1], late[4])
		compare(t, partial)
		compare(t, whole)
	})

	t.Run("RollUpAgain", func(t *testing.T) {
		rollUp()
		compare(t, partial)
		compare(t, whole)
	})

	t.Run("AfterRetention", func(t *testing.T) {
		r, ok := u.(retainer)
		if !ok {
			t.Skip("the store keeps every record")
		}
		// The two first days' records are removed: the roll-ups of whole
		// days count them, as the records did. A summary of one key or end
		// user reads records only, and a spend report by end user names
		// none for removed records (see ledger.SpendFilter).
		if _, err := r.Retain(ctx, rollupDay0.AddDate(0, 0, 2)); err != nil {
			t.Fatalf("Retain = %v", err)
		}
		compare(t, whole, "SummaryOfKey", "SummaryOfEndUser", "SpendByEndUser")
	})
}
