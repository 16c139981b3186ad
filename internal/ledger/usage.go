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
// cannot compute percentiles in their query (memledger, SQLite) feed it.
type Summarizer struct {
	width   time.Duration
	buckets map[time.Time]*statsBuilder
	total   statsBuilder
}

// statsBuilder gathers one UsageStats and the durations of its percentiles.
type statsBuilder struct {
	UsageStats
	latency, ttft []time.Duration
}

// NewSummarizer returns a Summarizer by bucket, which must be valid.
func NewSummarizer(bucket Bucket) *Summarizer {
	return &Summarizer{width: bucket.Width(), buckets: map[time.Time]*statsBuilder{}}
}

// Add counts r.
func (s *Summarizer) Add(r *sluice.UsageRecord) {
	start := r.Started.UTC().Truncate(s.width)
	b, ok := s.buckets[start]
	if !ok {
		b = &statsBuilder{UsageStats: UsageStats{Start: start}}
		s.buckets[start] = b
	}
	b.add(r)
	s.total.add(r)
}

func (b *statsBuilder) add(r *sluice.UsageRecord) {
	b.Requests++
	if r.Code != "" {
		if b.Errors == nil {
			b.Errors = map[string]int64{}
		}
		b.Errors[string(r.Code)]++
	}
	b.PromptTokens += r.Usage.PromptTokens
	b.CompletionTokens += r.Usage.CompletionTokens
	b.CachedTokens += r.Usage.CachedTokens
	if r.Billing != nil {
		b.Price += billing.Micros(r.Billing.Price)
	}
	b.latency = append(b.latency, r.Latency)
	if r.TTFT > 0 {
		b.ttft = append(b.ttft, r.TTFT)
	}
}

func (b *statsBuilder) stats() UsageStats {
	slices.Sort(b.latency)
	slices.Sort(b.ttft)
	out := b.UsageStats
	out.LatencyP50, out.LatencyP95, out.LatencyP99 = Percentile(b.latency, 0.5), Percentile(b.latency, 0.95), Percentile(b.latency, 0.99)
	out.TTFTP50 = Percentile(b.ttft, 0.5)
	return out
}

// Summary is what was added, as Summarize returns it.
func (s *Summarizer) Summary() UsageSummary {
	out := UsageSummary{Total: s.total.stats(), Buckets: make([]UsageStats, 0, len(s.buckets))}
	for _, b := range s.buckets {
		out.Buckets = append(out.Buckets, b.stats())
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
