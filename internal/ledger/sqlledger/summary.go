package sqlledger

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// SummarizeUsage adds up the records f selects by bucket. By day, and
// without a key or end user to select (which the roll-ups do not keep),
// the days rolled up (see RollUp) that lie whole in the window are read
// from their roll-ups and the rest from the records, all added up in Go:
// the summary is then Approximate. Otherwise PostgreSQL adds the records
// up in the query, percentiles included; SQLite has no percentiles, and
// its records (an embedded store's: few) are added up in Go.
func (s *Store) SummarizeUsage(ctx context.Context, f ledger.UsageFilter, bucket ledger.Bucket) (ledger.UsageSummary, error) {
	width := bucket.Width()
	if width == 0 {
		return ledger.UsageSummary{}, fmt.Errorf("usage summary: unknown bucket %q", bucket)
	}
	var runs []dayRun
	if bucket == ledger.BucketDay && f.KeyID == "" && f.EndUser == "" {
		var err error
		if runs, err = s.rolledRuns(ctx, f.Since, f.Until); err != nil {
			return ledger.UsageSummary{}, fmt.Errorf("usage summary: %w", err)
		}
	}
	var (
		sum ledger.UsageSummary
		err error
	)
	switch {
	case len(runs) > 0:
		sum, err = s.summarizeRolledUp(ctx, f, runs)
	case s.db.Postgres():
		sum, err = s.summarizeInSQL(ctx, f, width)
	default:
		sum, err = s.summarizeInGo(ctx, f, ledger.NewSummarizer(bucket))
	}
	if err != nil {
		return ledger.UsageSummary{}, fmt.Errorf("usage summary: %w", err)
	}
	return sum, nil
}

// summarizeInSQL reads one row per bucket and one for the total (the
// grouping set (), a row of NULL sums when nothing is selected), then the error counts the same way. The bucket is
// started_at divided by its width in microseconds: minutes, hours and UTC
// days all start on a multiple of theirs since the epoch. The width is
// written into the query, not passed: GROUP BY must repeat the expression
// of the SELECT exactly, parameters included.
func (s *Store) summarizeInSQL(ctx context.Context, f ledger.UsageFilter, width time.Duration) (ledger.UsageSummary, error) {
	b := `started_at / ` + strconv.FormatInt(width.Microseconds(), 10)
	where, args := usageWhere(f)
	rows, err := s.db.Query(ctx, `SELECT b, n, COALESCE(prompt, 0), COALESCE(completion, 0), COALESCE(cached, 0), COALESCE(price, 0),
		COALESCE(latency[1], 0), COALESCE(latency[2], 0), COALESCE(latency[3], 0), COALESCE(ttft, 0) FROM (
		SELECT `+b+` AS b, COUNT(*) AS n,
			CAST(SUM(prompt_tokens) AS BIGINT) AS prompt, CAST(SUM(completion_tokens) AS BIGINT) AS completion,
			CAST(SUM(cached_tokens) AS BIGINT) AS cached,
			CAST(SUM(CASE WHEN billed THEN price_micros ELSE 0 END) AS BIGINT) AS price,
			percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY latency_us) AS latency,
			percentile_cont(0.5) WITHIN GROUP (ORDER BY ttft_us) FILTER (WHERE ttft_us > 0) AS ttft
		FROM usage_records WHERE `+where+` GROUP BY GROUPING SETS ((`+b+`), ())) s
		ORDER BY b NULLS FIRST`, args...)
	if err != nil {
		return ledger.UsageSummary{}, err
	}
	defer rows.Close()
	var (
		sum   ledger.UsageSummary
		index = map[int64]*ledger.UsageStats{} // bucket → its stats; the total under -1
	)
	for rows.Next() {
		var (
			bucket        sql.NullInt64
			st            ledger.UsageStats
			p50, p95, p99 float64
			ttft          float64
			price         int64
		)
		if err := rows.Scan(&bucket, &st.Requests, &st.PromptTokens, &st.CompletionTokens, &st.CachedTokens, &price,
			&p50, &p95, &p99, &ttft); err != nil {
			return ledger.UsageSummary{}, err
		}
		st.Price = billing.Micros(price)
		st.LatencyP50, st.LatencyP95, st.LatencyP99, st.TTFTP50 = micros(p50), micros(p95), micros(p99), micros(ttft)
		if !bucket.Valid {
			sum.Total = st
			continue
		}
		st.Start = time.UnixMicro(bucket.Int64 * width.Microseconds()).UTC()
		sum.Buckets = append(sum.Buckets, st)
	}
	if err := rows.Err(); err != nil {
		return ledger.UsageSummary{}, err
	}
	// Indexed once every bucket is in: appending moves the slice.
	index[-1] = &sum.Total
	for i := range sum.Buckets {
		index[sum.Buckets[i].Start.UnixMicro()/width.Microseconds()] = &sum.Buckets[i]
	}
	return sum, s.countErrors(ctx, b, where, args, index)
}

// countErrors adds the error counts of the records where selects to the
// stats of their bucket (index, by the bucket expression b) and of the
// total (index[-1]).
func (s *Store) countErrors(ctx context.Context, b, where string, args []any, index map[int64]*ledger.UsageStats) error {
	rows, err := s.db.Query(ctx, `SELECT `+b+`, code, COUNT(*) FROM usage_records WHERE `+where+` AND code <> ''
		GROUP BY GROUPING SETS ((`+b+`, code), (code))`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			bucket sql.NullInt64
			code   string
			n      int64
		)
		if err := rows.Scan(&bucket, &code, &n); err != nil {
			return err
		}
		key := int64(-1)
		if bucket.Valid {
			key = bucket.Int64
		}
		st, ok := index[key]
		if !ok {
			continue // a record committed after the first query read its range
		}
		if st.Errors == nil {
			st.Errors = map[string]int64{}
		}
		st.Errors[code] = n
	}
	return rows.Err()
}

// micros is a duration in microseconds (as the percentiles of the
// columns come back), to the microsecond.
func micros(us float64) time.Duration {
	return time.Duration(us * float64(time.Microsecond)).Round(time.Microsecond)
}

// summarizeRolledUp adds up the roll-ups of runs (days that lie whole in
// f's window) and the records of the rest of the window, by day.
func (s *Store) summarizeRolledUp(ctx context.Context, f ledger.UsageFilter, runs []dayRun) (ledger.UsageSummary, error) {
	sum := ledger.NewRollupSummarizer()
	for _, run := range runs {
		if err := s.addRolled(ctx, sum, f, run); err != nil {
			return ledger.UsageSummary{}, err
		}
	}
	for _, sp := range outside(f.Since, f.Until, runs) {
		held := f
		held.Since, held.Until = sp.from, sp.to
		if err := s.addRecords(ctx, sum, held); err != nil {
			return ledger.UsageSummary{}, err
		}
	}
	return sum.Summary(), nil
}

// addRolled adds the roll-up rows of run that f selects to sum. Rows of
// one day and code with the same histograms are added up in the query
// (over a month of roll-ups, most of the work), which says how many
// rows held each pair of histograms; the histograms are added up in Go.
func (s *Store) addRolled(ctx context.Context, sum *ledger.Summarizer, f ledger.UsageFilter, run dayRun) error {
	where, args := rolledWhere(f, run)
	rows, err := s.db.Query(ctx, `SELECT day, code, CAST(SUM(requests) AS BIGINT), CAST(SUM(prompt_tokens) AS BIGINT),
		CAST(SUM(completion_tokens) AS BIGINT), CAST(SUM(cached_tokens) AS BIGINT),
		CAST(SUM(CASE WHEN billed THEN price_micros ELSE 0 END) AS BIGINT), latency, ttft, COUNT(*)
		FROM usage_days WHERE `+where+` GROUP BY day, code, latency, ttft`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r             ledger.RolledStats
			day, price, n int64
			latency, ttft string
		)
		if err := rows.Scan(&day, &r.Code, &r.Requests, &r.PromptTokens, &r.CompletionTokens, &r.CachedTokens, &price,
			&latency, &ttft, &n); err != nil {
			return err
		}
		r.Day, r.Price = time.UnixMicro(day*dayMicros).UTC(), billing.Micros(price)
		if r.Latency, err = ledger.ParseHistogram(latency); err != nil {
			return err
		}
		if r.TTFT, err = ledger.ParseHistogram(ttft); err != nil {
			return err
		}
		r.Latency.Times(n)
		r.TTFT.Times(n)
		sum.AddRolled(&r)
	}
	return rows.Err()
}

// summarizeInGo adds the records f selects up in sum.
func (s *Store) summarizeInGo(ctx context.Context, f ledger.UsageFilter, sum *ledger.Summarizer) (ledger.UsageSummary, error) {
	if err := s.addRecords(ctx, sum, f); err != nil {
		return ledger.UsageSummary{}, err
	}
	return sum.Summary(), nil
}

// addRecords reads what a summary needs of each record f selects and
// adds it to sum.
func (s *Store) addRecords(ctx context.Context, sum *ledger.Summarizer, f ledger.UsageFilter) error {
	where, args := usageWhere(f)
	rows, err := s.db.Query(ctx, `SELECT started_at, code, prompt_tokens, completion_tokens, cached_tokens, billed, price_micros,
		latency_us, ttft_us FROM usage_records WHERE `+where, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r                      sluice.UsageRecord
			c                      sluice.Charge
			started, latency, ttft int64
			billed                 bool
		)
		if err := rows.Scan(&started, &r.Code, &r.Usage.PromptTokens, &r.Usage.CompletionTokens, &r.Usage.CachedTokens,
			&billed, &c.Price, &latency, &ttft); err != nil {
			return err
		}
		if billed {
			r.Billing = &c
		}
		r.Started = time.UnixMicro(started)
		r.Latency, r.TTFT = time.Duration(latency)*time.Microsecond, time.Duration(ttft)*time.Microsecond
		sum.Add(&r)
	}
	return rows.Err()
}
