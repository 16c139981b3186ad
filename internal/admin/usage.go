package admin

import (
	"cmp"
	"encoding/csv"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Usage listing bounds: GET /admin/usage without since shows the last day,
// and never more than maxUsage records.
const (
	defaultUsageWindow = 24 * time.Hour
	defaultUsageLimit  = 100
	maxUsage           = 10000
	// maxBuckets bounds the buckets of one usage summary, a day by minute:
	// a year by minute would be half a million rows. Without a bucket the
	// summary takes the narrowest that gives at most defaultBuckets, what
	// a chart shows legibly.
	maxBuckets     = 24 * 60
	defaultBuckets = 500
)

// usageParams are the query parameters of GET /admin/usage and
// /admin/usage/summary that name a text field of the ledger.UsageFilter
// they select by (besides since, until and limit): the records started in
// [since, until) (no since: a day before until; no until: now, open for
// the list) whose fields are those named. model is the upstream model
// that served the request (its last execution's); code an error code, or
// "ok" for the records without one.
var usageParams = []struct {
	name  string
	field func(*ledger.UsageFilter) *string
}{
	{"tenant", func(f *ledger.UsageFilter) *string { return &f.Tenant }},
	{"key", func(f *ledger.UsageFilter) *string { return &f.KeyID }},
	{"alias", func(f *ledger.UsageFilter) *string { return &f.Alias }},
	{"model", func(f *ledger.UsageFilter) *string { return &f.Model }},
	{"end_user", func(f *ledger.UsageFilter) *string { return &f.EndUser }},
	{"task_type", func(f *ledger.UsageFilter) *string { return &f.TaskType }},
	{"code", func(f *ledger.UsageFilter) *string { return &f.Code }},
}

// UsageValues is f as the query parameters of GET /admin/usage, for a
// client.
func UsageValues(f ledger.UsageFilter) url.Values {
	v := url.Values{}
	for name, t := range map[string]time.Time{"since": f.Since, "until": f.Until} {
		if !t.IsZero() {
			v.Set(name, t.UTC().Format(time.RFC3339Nano))
		}
	}
	for _, p := range usageParams {
		if s := *p.field(&f); s != "" {
			v.Set(p.name, s)
		}
	}
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	return v
}

// usageFilter reads the filter of q (Limit aside). until is its
// default end: zero leaves the list open, now closes a summary's window.
func usageFilter(q url.Values, until time.Time, now time.Time) (ledger.UsageFilter, error) {
	f := ledger.UsageFilter{Until: until}
	if err := parseTime(q, "until", &f.Until); err != nil {
		return f, err
	}
	f.Since = cmp.Or(f.Until, now).Add(-defaultUsageWindow)
	if err := parseTime(q, "since", &f.Since); err != nil {
		return f, err
	}
	if !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, invalid("until %s is not after since %s", f.Until.Format(time.RFC3339Nano), f.Since.Format(time.RFC3339Nano))
	}
	for _, p := range usageParams {
		*p.field(&f) = strings.TrimSpace(q.Get(p.name))
	}
	return f, nil
}

// listUsage handles GET /admin/usage: the records the parameters select,
// oldest first, as JSON, or as CSV with format=csv or Accept: text/csv.
func (s *server) listUsage(w http.ResponseWriter, r *http.Request) error {
	if s.usage == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway records no usage")
	}
	q := r.URL.Query()
	f, err := usageFilter(q, time.Time{}, s.now())
	if err != nil {
		return err
	}
	if f.Limit, err = parseLimit(q.Get("limit"), defaultUsageLimit, maxUsage); err != nil {
		return err
	}
	asCSV, err := wantsCSV(r)
	if err != nil {
		return err
	}
	recs, err := s.usage.ListUsage(r.Context(), f)
	if err != nil {
		return err
	}
	if asCSV {
		return writeUsageCSV(w, recs)
	}
	out := make([]UsageRecord, 0, len(recs))
	for _, rec := range recs {
		out = append(out, usageRecord(rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// wantsCSV reports whether the request asks for CSV: format=csv, or no
// format and an Accept header that names text/csv.
func wantsCSV(r *http.Request) (bool, error) {
	switch format := r.URL.Query().Get("format"); format {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
	default:
		return false, invalid("format %q is not json or csv", format)
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if t, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && t == "text/csv" {
			return true, nil
		}
	}
	return false, nil
}

// UsageCSVColumns are the columns of GET /admin/usage?format=csv, its
// header row: started is UTC RFC 3339, code is empty for a record without
// one, model is the upstream model that served it (its last execution's),
// price_micros is what its billing account was charged (empty when not
// billed).
var UsageCSVColumns = []string{"request_id", "started", "tenant", "key_id", "alias", "model", "protocol", "status", "code",
	"prompt_tokens", "completion_tokens", "cached_tokens", "latency_ms", "price_micros", "billing_account", "end_user", "task_type"}

// writeUsageCSV writes recs as CSV, a row at a time: the body is never
// held whole.
func writeUsageCSV(w http.ResponseWriter, recs []sluice.UsageRecord) error {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="usage.csv"`)
	w.WriteHeader(http.StatusOK)
	out := csv.NewWriter(w)
	_ = out.Write(UsageCSVColumns)
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	for i := range recs {
		r := &recs[i]
		var price, account string
		if c := r.Billing; c != nil {
			price, account = itoa(c.Price), c.Account
		}
		// A write error is the client gone: the rest is not worth writing,
		// and the status is sent.
		if err := out.Write([]string{r.RequestID, r.Started.UTC().Format(time.RFC3339Nano), r.Tenant, r.KeyID, r.Alias,
			ledger.ModelOf(r), string(r.Protocol), strconv.Itoa(r.Status), string(r.Code),
			itoa(r.Usage.PromptTokens), itoa(r.Usage.CompletionTokens), itoa(r.Usage.CachedTokens),
			strconv.FormatFloat(ms(r.Latency), 'f', -1, 64), price, account, r.EndUser, r.TaskType}); err != nil {
			return nil
		}
	}
	out.Flush()
	return nil
}

// UsageSummary is the answer of GET /admin/usage/summary: what the
// records of the window added up to, per bucket (only those that hold a
// record, oldest first) and in all. Spend is in Currency.
//
// The queue waits are not in the records: QueueWaitThisReplicaSinceStart
// is what the replica that answered observed since it started, whatever
// the window and filter, estimated from its histogram; absent on a
// gateway that does not expose it.
type UsageSummary struct {
	Since                          time.Time     `json:"since"`
	Until                          time.Time     `json:"until"`
	Bucket                         ledger.Bucket `json:"bucket"`
	Currency                       string        `json:"currency"`
	Total                          UsageStats    `json:"total"`
	Buckets                        []UsageStats  `json:"buckets"`
	QueueWaitThisReplicaSinceStart *QueueWaits   `json:"queue_wait_this_replica_since_start,omitempty"`
	// Percentiles says how the latency and TTFT percentiles were made:
	// PercentilesExact, or PercentilesUpperBound when closed days were
	// read from their daily roll-ups (see ledger.UsageSummary.Approximate).
	Percentiles string `json:"percentiles"`
}

// The values of UsageSummary.Percentiles.
const (
	// PercentilesExact: interpolated between the two nearest records.
	PercentilesExact = "exact"
	// PercentilesUpperBound: read from histograms of fixed log-spaced
	// buckets, each at or above the exact value by less than
	// ledger.HistogramError (9.1%).
	PercentilesUpperBound = "upper_bound"
)

// UsageStats is what a set of records added up to. Errors counts the
// records that carry an error code, by code. Tokens are as the records
// report them. Latencies are milliseconds, made as UsageSummary.Percentiles
// says; TTFT is of the records that had a first token.
type UsageStats struct {
	Start            *time.Time       `json:"start,omitempty"` // of the bucket
	Requests         int64            `json:"requests"`
	Errors           map[string]int64 `json:"errors"`
	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	CachedTokens     int64            `json:"cached_tokens"`
	Spend            billing.Micros   `json:"spend"` // the price of billed records
	LatencyP50MS     float64          `json:"latency_p50_ms"`
	LatencyP95MS     float64          `json:"latency_p95_ms"`
	LatencyP99MS     float64          `json:"latency_p99_ms"`
	TTFTP50MS        float64          `json:"ttft_p50_ms"`
}

// QueueWaits are queue-wait percentiles in milliseconds.
type QueueWaits struct {
	Observed uint64  `json:"observed"` // requests that waited, or passed the queue without waiting
	P50MS    float64 `json:"p50_ms"`
	P95MS    float64 `json:"p95_ms"`
	P99MS    float64 `json:"p99_ms"`
}

// usageSummary handles GET /admin/usage/summary: the filter's window
// (default: the last day) by bucket=minute|hour|day (default: the
// narrowest that cuts it into at most defaultBuckets; at most maxBuckets).
func (s *server) usageSummary(w http.ResponseWriter, r *http.Request) error {
	if s.usage == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway records no usage")
	}
	q := r.URL.Query()
	now := s.now()
	f, err := usageFilter(q, now, now)
	if err != nil {
		return err
	}
	window := f.Until.Sub(f.Since)
	bucket := ledger.Bucket(q.Get("bucket"))
	if bucket == "" {
		for _, b := range []ledger.Bucket{ledger.BucketMinute, ledger.BucketHour, ledger.BucketDay} {
			if bucket = b; buckets(window, b) <= defaultBuckets {
				break
			}
		}
	}
	if bucket.Width() == 0 {
		return invalid("bucket %q is not minute, hour or day", bucket)
	}
	if n := buckets(window, bucket); n > maxBuckets {
		return invalid("bucket %s cuts the window from since to until into %d buckets, more than %d: choose a wider bucket or a shorter window",
			bucket, n, maxBuckets)
	}
	sum, err := s.usage.SummarizeUsage(r.Context(), f, bucket)
	if err != nil {
		return err
	}
	out := UsageSummary{Since: f.Since, Until: f.Until, Bucket: bucket, Currency: "USD", Total: usageStats(sum.Total),
		Buckets: make([]UsageStats, 0, len(sum.Buckets)), Percentiles: PercentilesExact}
	if sum.Approximate {
		out.Percentiles = PercentilesUpperBound
	}
	if s.billing != nil {
		out.Currency = cmp.Or(s.billing.Declared().Currency, out.Currency)
	}
	for _, b := range sum.Buckets {
		out.Buckets = append(out.Buckets, usageStats(b))
	}
	if s.queueWaits != nil {
		if n, waits := s.queueWaits([]float64{0.5, 0.95, 0.99}); n > 0 && len(waits) == 3 {
			out.QueueWaitThisReplicaSinceStart = &QueueWaits{Observed: n, P50MS: ms(waits[0]), P95MS: ms(waits[1]), P99MS: ms(waits[2])}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// buckets is how many buckets of b the window spans, counting the
// partial ones at its ends.
func buckets(window time.Duration, b ledger.Bucket) int64 {
	return int64((window + b.Width() - 1) / b.Width())
}

func usageStats(st ledger.UsageStats) UsageStats {
	out := UsageStats{Requests: st.Requests, Errors: st.Errors, PromptTokens: st.PromptTokens, CompletionTokens: st.CompletionTokens,
		CachedTokens: st.CachedTokens, Spend: st.Price, LatencyP50MS: ms(st.LatencyP50), LatencyP95MS: ms(st.LatencyP95),
		LatencyP99MS: ms(st.LatencyP99), TTFTP50MS: ms(st.TTFTP50)}
	if out.Errors == nil {
		out.Errors = map[string]int64{}
	}
	if !st.Start.IsZero() {
		start := st.Start.UTC()
		out.Start = &start
	}
	return out
}
