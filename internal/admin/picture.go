package admin

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// UpstreamPicture is how an upstream account has fared, from the
// executions in the usage database (every replica's, so the cluster's):
// per credential and for the account, over fixed windows ending now,
// with a verdict on what a throttle limited. Credentials are the
// account's credentials as they are now, each with its status and
// cooldown.
type UpstreamPicture struct {
	Credentials []CredentialState `json:"credentials"`
	Windows     []PictureWindow   `json:"windows"`
	// Error says the usage database did not answer: Windows is empty.
	Error string `json:"error,omitempty"`
}

// PictureWindow sums the account's executions that started in [From, To).
type PictureWindow struct {
	Window string    `json:"window"` // its span: 15m, 24h
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Limited says what a throttle limited in the window (see limitedBy):
	// "credential", "account", or "" (nothing was throttled).
	Limited string         `json:"limited"`
	Account UpstreamCounts `json:"account"` // every credential together
	// Credentials has one entry per credential of the account, and one
	// for any other the window's executions name (removed since), by ID.
	Credentials []CredentialCounts `json:"credentials"`
}

// CredentialCounts are the counts of one credential in a window.
type CredentialCounts struct {
	ID string `json:"id"`
	UpstreamCounts
}

// UpstreamCounts sum executions by how they ended.
type UpstreamCounts struct {
	Executions int64 `json:"executions"`
	OK         int64 `json:"ok"`
	// RateLimited counts the throttles (failure class rate: a 429, a
	// RESOURCE_EXHAUSTED, …; a 429 that means an empty wallet is billing).
	RateLimited int64 `json:"rate_limited"`
	// Failed counts the other failures by execution status: auth,
	// billing, endpoint, request, cancelled.
	Failed map[string]int64 `json:"failed,omitempty"`
	// PromptTokens and CachedTokens sum the measured usage; CachedShare
	// is CachedTokens / PromptTokens (0 without prompt tokens).
	PromptTokens int64   `json:"prompt_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	CachedShare  float64 `json:"cached_share"`
	// MeanOKMillis is the mean duration of the ok executions (0 without).
	MeanOKMillis float64 `json:"mean_ok_duration_ms"`

	okTime time.Duration // the ok executions' durations, summed
}

// The verdicts of PictureWindow.Limited.
const (
	LimitedCredential = "credential"
	LimitedAccount    = "account"
)

// pictureWindows are the spans of an account's picture: what is happening
// now, and the day around it.
var pictureWindows = []struct {
	name string
	span time.Duration
}{{"15m", 15 * time.Minute}, {"24h", 24 * time.Hour}}

// accountPicture adds a's upstream picture to the account a, read from the
// usage database; a gateway without one shows none. A database that does
// not answer leaves the picture with its Error, the state still shown.
func (s *server) accountPicture(ctx context.Context, a AccountState) (AccountState, error) {
	if s.usage == nil {
		return a, nil
	}
	creds, err := s.pool.Credentials(ctx)
	if err != nil {
		return a, err
	}
	p := &UpstreamPicture{Credentials: []CredentialState{}, Windows: []PictureWindow{}}
	for _, c := range creds {
		if c.Account == a.ID {
			p.Credentials = append(p.Credentials, credentialView(c))
		}
	}
	a.Picture = p
	to := s.now().UTC()
	for _, w := range pictureWindows {
		f := ledger.UpstreamFilter{Account: a.ID, From: to.Add(-w.span), To: to}
		rows, err := s.usage.UpstreamReport(ctx, f)
		if err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "account picture: usage database unavailable", slog.String("account_id", a.ID), slog.Any("err", err))
			p.Windows, p.Error = []PictureWindow{}, "the usage database did not answer"
			return a, nil
		}
		p.Windows = append(p.Windows, pictureWindow(w.name, f, a.Credentials, rows))
	}
	return a, nil
}

// pictureWindow sums rows, the report of f, per credential (every one of
// credentials, if only with zeros) and for the account.
func pictureWindow(name string, f ledger.UpstreamFilter, credentials []string, rows []ledger.UpstreamRow) PictureWindow {
	w := PictureWindow{Window: name, From: f.From, To: f.To, Limited: limitedBy(rows)}
	byID := map[string]*UpstreamCounts{}
	for _, id := range credentials {
		byID[id] = &UpstreamCounts{}
	}
	for _, r := range rows {
		c := byID[r.Credential]
		if c == nil {
			c = &UpstreamCounts{}
			byID[r.Credential] = c
		}
		c.add(r)
		w.Account.add(r)
	}
	for id, c := range byID {
		c.finish()
		w.Credentials = append(w.Credentials, CredentialCounts{ID: id, UpstreamCounts: *c})
	}
	w.Account.finish()
	slices.SortFunc(w.Credentials, func(x, y CredentialCounts) int { return strings.Compare(x.ID, y.ID) })
	return w
}

// add counts the executions of r.
func (c *UpstreamCounts) add(r ledger.UpstreamRow) {
	c.Executions += r.Executions
	switch r.Status {
	case sluice.ExecutionOK:
		c.OK += r.Executions
		c.okTime += r.Duration
	case sluice.ExecutionRate:
		c.RateLimited += r.Executions
	default:
		if c.Failed == nil {
			c.Failed = map[string]int64{}
		}
		c.Failed[string(r.Status)] += r.Executions
	}
	c.PromptTokens += r.PromptTokens
	c.CachedTokens += r.CachedTokens
}

// finish computes the shares once every row was added.
func (c *UpstreamCounts) finish() {
	if c.PromptTokens > 0 {
		c.CachedShare = float64(c.CachedTokens) / float64(c.PromptTokens)
	}
	if c.OK > 0 {
		c.MeanOKMillis = float64(c.okTime.Microseconds()) / 1000 / float64(c.OK)
	}
}

// limitedBy is the verdict on an account's executions in a window, rows
// by credential and status:
//   - "" when no execution was throttled;
//   - "credential" when some credential was throttled while another was
//     served (an ok execution) without a single throttle: the limit hit is
//     the throttled credentials' own, their neighbours were not held back;
//   - "account" when some credential was throttled and none was served
//     without one: every credential that was served also met the limit,
//     which is the account's (or the account had a single credential).
func limitedBy(rows []ledger.UpstreamRow) string {
	throttled, served := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		switch r.Status {
		case sluice.ExecutionRate:
			throttled[r.Credential] = true
		case sluice.ExecutionOK:
			served[r.Credential] = true
		}
	}
	if len(throttled) == 0 {
		return ""
	}
	for id := range served {
		if !throttled[id] {
			return LimitedCredential
		}
	}
	return LimitedAccount
}
