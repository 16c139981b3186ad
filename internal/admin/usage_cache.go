package admin

import (
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// CacheReport answers GET /admin/usage/cache: the upstream prompt cache's
// use by the requests started in [From, To), grouped by By (upstream
// account, alias, UTC day), with the session-affinity hit rate. It is
// computed from the usage records, so it covers every replica.
type CacheReport struct {
	From time.Time          `json:"from"`
	To   time.Time          `json:"to"`
	By   []ledger.Dimension `json:"by"`
	Rows []CacheRow         `json:"rows"`
	// Total sums every row: each request is in exactly one.
	Total CacheRow `json:"total"`
}

// CacheRow is one group of a cache report; the dimensions it is not
// grouped by are absent. A request, and its placement, count on the
// account of its first execution; tokens are the measured usage of every
// execution, on the account it ran on.
type CacheRow struct {
	AccountID        string `json:"account_id,omitempty"`
	Alias            string `json:"alias,omitempty"`
	Day              string `json:"day,omitempty"` // YYYY-MM-DD, UTC
	Requests         int64  `json:"requests"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CachedTokens     int64  `json:"cached_tokens"`      // of prompt tokens, read from the upstream's prompt cache
	CacheWriteTokens int64  `json:"cache_write_tokens"` // of prompt tokens, written to it
	// CachedShare is cached / prompt tokens; 0 without prompt tokens.
	CachedShare float64 `json:"cached_share"`
	// Affinity counts the session-affinity placements of the requests.
	Affinity Placements `json:"affinity"`
}

// Placements are requests by session-affinity placement: hit (ran on the
// account its seed was bound to), new (no binding yet), moved (bound, ran
// elsewhere). Requests without a seed or not of strategy affinity are none
// of them.
type Placements struct {
	Hits  int64 `json:"hits"`
	New   int64 `json:"new"`
	Moved int64 `json:"moved"`
	// HitRate is hits / (hits + moved); absent when neither happened.
	HitRate *float64 `json:"hit_rate,omitempty"`
}

// cacheDimensions are what a cache report groups by when the request
// names none.
var cacheDimensions = []ledger.Dimension{ledger.ByAccount, ledger.ByAlias}

// cacheReport handles GET /admin/usage/cache?from=&to=&by=: to defaults
// to now, from to a day before to, by (a comma-separated list of account,
// alias and day) to account,alias.
func (s *server) cacheReport(w http.ResponseWriter, r *http.Request) error {
	if s.usage == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway records no usage")
	}
	q := r.URL.Query()
	f := ledger.CacheFilter{To: s.now().UTC()}
	if err := parseTime(q, "to", &f.To); err != nil {
		return err
	}
	f.From = f.To.Add(-defaultUsageWindow)
	if err := parseTime(q, "from", &f.From); err != nil {
		return err
	}
	if !f.From.Before(f.To) {
		return invalid("from %s is not before to %s", f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
	}
	for _, d := range SplitList(q.Get("by")) {
		if !slices.Contains(f.By, ledger.Dimension(d)) {
			f.By = append(f.By, ledger.Dimension(d))
		}
	}
	if len(f.By) == 0 {
		f.By = cacheDimensions
	}
	if err := f.Validate(); err != nil {
		return invalid("by: %s (want account, alias, day)", err.Error())
	}
	rows, err := s.usage.CacheReport(r.Context(), f)
	if err != nil {
		return err
	}
	rep := CacheReport{From: f.From, To: f.To, By: f.By, Rows: make([]CacheRow, 0, len(rows))}
	var total ledger.CacheRow
	for _, row := range rows {
		rep.Rows = append(rep.Rows, cacheRow(row))
		total.Requests += row.Requests
		total.PromptTokens += row.PromptTokens
		total.CachedTokens += row.CachedTokens
		total.CacheWriteTokens += row.CacheWriteTokens
		total.Hits, total.New, total.Moved = total.Hits+row.Hits, total.New+row.New, total.Moved+row.Moved
	}
	rep.Total = cacheRow(total)
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// cacheRow is the view of a ledger row, with its shares.
func cacheRow(r ledger.CacheRow) CacheRow {
	v := CacheRow{AccountID: r.Account, Alias: r.Alias, Requests: r.Requests, PromptTokens: r.PromptTokens,
		CachedTokens: r.CachedTokens, CacheWriteTokens: r.CacheWriteTokens,
		Affinity: Placements{Hits: r.Hits, New: r.New, Moved: r.Moved}}
	if !r.Day.IsZero() {
		v.Day = r.Day.UTC().Format(time.DateOnly)
	}
	if r.PromptTokens > 0 {
		v.CachedShare = float64(r.CachedTokens) / float64(r.PromptTokens)
	}
	if placed := r.Hits + r.Moved; placed > 0 {
		rate := float64(r.Hits) / float64(placed)
		v.Affinity.HitRate = &rate
	}
	return v
}

// CacheQuery selects requests for a cache report and says what to group
// them by: a zero To is the server's now, a zero From a day before To, no
// dimensions account and alias.
type CacheQuery struct {
	From, To time.Time
	By       []ledger.Dimension
}
