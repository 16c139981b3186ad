package ledger

import (
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
)

// CodeOK is what UsageFilter.Code names to select the records that ended
// without an error code.
const CodeOK = "ok"

// UsageFilter selects usage records: started at or after Since and before
// Until (a zero end is open), and equal to each of the other fields that is
// not "". Model is the upstream model of the record's last execution (see
// ModelOf); Code is an error code, or CodeOK for records without one.
// Limit bounds how many ListUsage returns (<= 0: no bound).
type UsageFilter struct {
	Since, Until time.Time
	Tenant       string
	KeyID        string
	Alias        string
	Model        string
	EndUser      string
	TaskType     string
	Code         string
	Limit        int
}

// Selects reports whether f selects r.
func (f *UsageFilter) Selects(r *sluice.UsageRecord) bool {
	code := string(r.Code)
	if code == "" {
		code = CodeOK
	}
	return (f.Since.IsZero() || !r.Started.Before(f.Since)) &&
		(f.Until.IsZero() || r.Started.Before(f.Until)) &&
		matches(f.Tenant, r.Tenant) && matches(f.KeyID, r.KeyID) && matches(f.Alias, r.Alias) &&
		matches(f.Model, ModelOf(r)) && matches(f.EndUser, r.EndUser) && matches(f.TaskType, r.TaskType) &&
		matches(f.Code, code)
}

// matches reports whether value is what want names; "" names anything.
func matches(want, value string) bool { return want == "" || want == value }

// Bucket is the width of the periods a usage summary is cut into, aligned
// on UTC (and so on the Unix epoch).
type Bucket string

// The buckets of a usage summary.
const (
	BucketMinute Bucket = "minute"
	BucketHour   Bucket = "hour"
	BucketDay    Bucket = "day"
)

// Width is how long one bucket lasts; 0 for a Bucket that is none of the
// above.
func (b Bucket) Width() time.Duration {
	switch b {
	case BucketMinute:
		return time.Minute
	case BucketHour:
		return time.Hour
	case BucketDay:
		return 24 * time.Hour
	}
	return 0
}

// UsageSummary is what the records a UsageFilter selects add up to, per
// bucket of their start and over the whole filter. Buckets holds only the
// buckets that hold a record, oldest first.
type UsageSummary struct {
	Buckets []UsageStats
	Total   UsageStats // its Start is zero
	// Approximate says the percentiles were read from histograms (a
	// store's daily roll-ups, see RolledStats): each is at or above the
	// exact one, by less than HistogramError. Counts, tokens and prices
	// are exact either way.
	Approximate bool
}

// UsageStats is what a set of usage records adds up to.
type UsageStats struct {
	Start    time.Time // of the bucket
	Requests int64
	// Errors counts the records that carry an error code, by code.
	Errors map[string]int64
	// The tokens the records report, estimated or measured.
	PromptTokens, CompletionTokens, CachedTokens int64
	// Price is the sum of the prices charged to billed records, in the
	// deployment's currency.
	Price billing.Micros
	// Latency percentiles of every record, and the median time to first
	// token of those that had one (TTFT > 0), interpolated between the
	// two nearest values as PostgreSQL's percentile_cont does.
	LatencyP50, LatencyP95, LatencyP99, TTFTP50 time.Duration
}

// Summarizer adds records up into a UsageSummary in Go: the stores that
// cannot compute percentiles in their query (memledger, SQLite) feed it,
// and so do those that add daily roll-ups to records.
type Summarizer struct {
	width   time.Duration
	approx  bool // percentiles from histograms
	buckets map[time.Time]*statsBuilder
	total   statsBuilder
}

// statsBuilder gathers one UsageStats and the durations of its
// percentiles: each duration (exact), or histograms of them (approx).
type statsBuilder struct {
	UsageStats
	latency, ttft   []time.Duration
	latencyH, ttftH Histogram
}

// NewSummarizer returns a Summarizer by bucket, which must be valid, whose
// percentiles are exact.
func NewSummarizer(bucket Bucket) *Summarizer {
	return &Summarizer{width: bucket.Width(), buckets: map[time.Time]*statsBuilder{}}
}

// NewRollupSummarizer returns a Summarizer by day that adds records and
// daily roll-ups (AddRolled) up, its percentiles read from histograms:
// its summary is Approximate.
func NewRollupSummarizer() *Summarizer {
	return &Summarizer{width: BucketDay.Width(), approx: true, buckets: map[time.Time]*statsBuilder{}}
}

// bucket is the builder of the bucket that start is in.
func (s *Summarizer) bucket(start time.Time) *statsBuilder {
	start = start.UTC().Truncate(s.width)
	b, ok := s.buckets[start]
	if !ok {
		b = &statsBuilder{UsageStats: UsageStats{Start: start}}
		s.buckets[start] = b
	}
	return b
}

// Add counts r.
func (s *Summarizer) Add(r *sluice.UsageRecord) {
	s.bucket(r.Started).add(r, s.approx)
	s.total.add(r, s.approx)
}

// RolledStats is what the records of one UTC day and one error code (""
// for none) add up to, as a store keeps them once the day is rolled up:
// the counts and sums of UsageStats, and histograms of the records'
// latencies and of their times to first token (of those that had one).
type RolledStats struct {
	Day                                                    time.Time
	Code                                                   string
	Requests, PromptTokens, CompletionTokens, CachedTokens int64
	Price                                                  billing.Micros
	Latency, TTFT                                          Histogram
}

// AddRolled counts the records r adds up; s must be NewRollupSummarizer's.
func (s *Summarizer) AddRolled(r *RolledStats) {
	s.bucket(r.Day).addRolled(r)
	s.total.addRolled(r)
}

func (b *statsBuilder) add(r *sluice.UsageRecord, approx bool) {
	b.count(string(r.Code), 1, r.Usage.PromptTokens, r.Usage.CompletionTokens, r.Usage.CachedTokens)
	if r.Billing != nil {
		b.Price += billing.Micros(r.Billing.Price)
	}
	switch {
	case approx:
		b.latencyH.Add(r.Latency)
		if r.TTFT > 0 {
			b.ttftH.Add(r.TTFT)
		}
	default:
		b.latency = append(b.latency, r.Latency)
		if r.TTFT > 0 {
			b.ttft = append(b.ttft, r.TTFT)
		}
	}
}

func (b *statsBuilder) addRolled(r *RolledStats) {
	b.count(r.Code, r.Requests, r.PromptTokens, r.CompletionTokens, r.CachedTokens)
	b.Price = b.Price.Add(r.Price)
	b.latencyH.Merge(r.Latency)
	b.ttftH.Merge(r.TTFT)
}

// count adds n requests of code ("" = none) and their tokens.
func (b *statsBuilder) count(code string, n, prompt, completion, cached int64) {
	b.Requests += n
	if code != "" {
		if b.Errors == nil {
			b.Errors = map[string]int64{}
		}
		b.Errors[code] += n
	}
	b.PromptTokens += prompt
	b.CompletionTokens += completion
	b.CachedTokens += cached
}

func (b *statsBuilder) stats(approx bool) UsageStats {
	out := b.UsageStats
	if approx {
		out.LatencyP50, out.LatencyP95, out.LatencyP99 = b.latencyH.Percentile(0.5), b.latencyH.Percentile(0.95), b.latencyH.Percentile(0.99)
		out.TTFTP50 = b.ttftH.Percentile(0.5)
		return out
	}
	slices.Sort(b.latency)
	slices.Sort(b.ttft)
	out.LatencyP50, out.LatencyP95, out.LatencyP99 = Percentile(b.latency, 0.5), Percentile(b.latency, 0.95), Percentile(b.latency, 0.99)
	out.TTFTP50 = Percentile(b.ttft, 0.5)
	return out
}

// Summary is what was added, as Summarize returns it.
func (s *Summarizer) Summary() UsageSummary {
	out := UsageSummary{Total: s.total.stats(s.approx), Buckets: make([]UsageStats, 0, len(s.buckets)), Approximate: s.approx}
	for _, b := range s.buckets {
		out.Buckets = append(out.Buckets, b.stats(s.approx))
	}
	slices.SortFunc(out.Buckets, func(a, b UsageStats) int { return a.Start.Compare(b.Start) })
	return out
}

// Percentile is the p-th percentile (0 <= p <= 1) of sorted, interpolated
// linearly between its two nearest values as percentile_cont does, to the
// microsecond (the stores keep durations to the microsecond); 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	pos := p * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	v := float64(sorted[lo]) + (pos-float64(lo))*float64(sorted[hi]-sorted[lo])
	return time.Duration(v).Round(time.Microsecond)
}
