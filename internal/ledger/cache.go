package ledger

import (
	"cmp"
	"fmt"
	"time"
)

// CacheFilter selects usage records by start (From <= Started < To, zero
// ends open) for a cache report, and says what to group their executions
// by: ByAccount (here the upstream account an execution ran on, not a
// billing account), ByAlias and ByDay (the UTC day the request started);
// none is one row for everything.
type CacheFilter struct {
	From, To time.Time
	By       []Dimension
}

// Validate reports a dimension a cache report cannot group by.
func (f *CacheFilter) Validate() error {
	for _, d := range f.By {
		switch d {
		case ByAccount, ByAlias, ByDay:
		default:
			return fmt.Errorf("cache report: unknown dimension %q", d)
		}
	}
	return nil
}

// Selects reports whether f selects a record started at started.
func (f *CacheFilter) Selects(started time.Time) bool {
	return PolicyFilter{From: f.From, To: f.To}.Selects("", started)
}

// CacheRow is one group of a cache report. The dimensions it was not
// grouped by are empty (Day zero).
//
// A request counts, with its session-affinity placement, in the group of
// its first execution: where it was placed. Tokens are the measured usage
// of every execution in the group: an attempt that failed before the
// upstream answered read no cache, and its estimated prompt is not counted.
// Records without executions (refused before any attempt) count nowhere.
type CacheRow struct {
	Account string // upstream account
	Alias   string
	Day     time.Time

	Requests         int64
	PromptTokens     int64
	CachedTokens     int64 // of PromptTokens, read from the upstream's prompt cache
	CacheWriteTokens int64 // of PromptTokens, written to it

	// Of Requests, their session-affinity placements (UsageRecord.Affinity).
	Hits, New, Moved int64
}

// CompareCacheRows orders rows by account, alias and day: the order
// CacheReport returns.
func CompareCacheRows(a, b CacheRow) int {
	return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.Alias, b.Alias), a.Day.Compare(b.Day))
}
