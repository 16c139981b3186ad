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

// SummarizeUsage adds up the records f selects by bucket. PostgreSQL adds
// them up in the query, percentiles included; SQLite has no percentiles,
// and its records (an embedded store's: few) are added up in Go.
func (s *Store) SummarizeUsage(ctx context.Context, f ledger.UsageFilter, bucket ledger.Bucket) (ledger.UsageSummary, error) {
	width := bucket.Width()
	if width == 0 {
		return ledger.UsageSummary{}, fmt.Errorf("usage summary: unknown bucket %q", bucket)
	}
	var (
		sum ledger.UsageSummary
		err error
	)
	if s.db.Postgres() {
		sum, err = s.summarizeInSQL(ctx, f, width)
	} else {
		sum, err = s.summarizeInGo(ctx, f, bucket)
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

// summarizeInGo reads what a summary needs of each record f selects and
// adds the records up in a ledger.Summarizer.
func (s *Store) summarizeInGo(ctx context.Context, f ledger.UsageFilter, bucket ledger.Bucket) (ledger.UsageSummary, error) {
	where, args := usageWhere(f)
	rows, err := s.db.Query(ctx, `SELECT started_at, code, prompt_tokens, completion_tokens, cached_tokens, billed, price_micros,
		latency_us, ttft_us FROM usage_records WHERE `+where, args...)
	if err != nil {
		return ledger.UsageSummary{}, err
	}
	defer rows.Close()
	sum := ledger.NewSummarizer(bucket)
	for rows.Next() {
		var (
			r                      sluice.UsageRecord
			c                      sluice.Charge
			started, latency, ttft int64
			billed                 bool
		)
		if err := rows.Scan(&started, &r.Code, &r.Usage.PromptTokens, &r.Usage.CompletionTokens, &r.Usage.CachedTokens,
			&billed, &c.Price, &latency, &ttft); err != nil {
			return ledger.UsageSummary{}, err
		}
		if billed {
			r.Billing = &c
		}
		r.Started = time.UnixMicro(started)
		r.Latency, r.TTFT = time.Duration(latency)*time.Microsecond, time.Duration(ttft)*time.Microsecond
		sum.Add(&r)
	}
	return sum.Summary(), rows.Err()
}
