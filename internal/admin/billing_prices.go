package admin

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// PriceSpec is the body of POST /admin/billing/prices: one version of a
// plan's price of an alias (kind price) or of an upstream model's cost
// (kind cost), with the catalog's names; rates are decimal strings per
// million tokens (per request, video second or video item for those), and
// a rate left out falls back as in the catalog (cache_read and
// cache_write to input, reasoning to output; others to 0).
type PriceSpec struct {
	Kind          billing.Kind `json:"kind"`
	Plan          string       `json:"plan,omitempty"`
	Alias         string       `json:"alias,omitempty"`
	Model         string       `json:"model,omitempty"`
	EffectiveFrom time.Time    `json:"effective_from,omitzero"` // default now; never in the past
	billing.RateText
}

// Price is a price or cost version as the admin API shows it.
type Price struct {
	Kind          billing.Kind  `json:"kind"`
	Plan          string        `json:"plan,omitempty"`
	Alias         string        `json:"alias,omitempty"`
	Model         string        `json:"model,omitempty"`
	EffectiveFrom time.Time     `json:"effective_from"`
	Version       string        `json:"version"` // as usage records name it
	Rates         billing.Rates `json:"rates"`   // resolved: fallbacks filled
	Source        string        `json:"source"`  // "catalog" or "api"
	InForce       bool          `json:"in_force"`
}

// pastTolerance is how far before the server's clock an effective time
// may be (a client's clock a little behind).
const pastTolerance = time.Minute

// applyPrice handles POST /admin/billing/prices. A version takes effect
// from now on: requests already served were charged at the versions then
// in force, so one in the past is refused, as is a version the catalog or
// the store holds with other rates. Applying the same version again
// changes nothing. It notes its own audit entry: the version, before and
// after.
func (s *server) applyPrice(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	var spec PriceSpec
	if err := decodeJSON(w, r, &spec, false); err != nil {
		return err
	}
	now := s.now().UTC()
	p := billing.Price{Kind: spec.Kind, Plan: strings.TrimSpace(spec.Plan), Alias: strings.TrimSpace(spec.Alias),
		Model: strings.TrimSpace(spec.Model), EffectiveFrom: spec.EffectiveFrom.UTC().Truncate(time.Microsecond)} // as the store keeps it
	if p.EffectiveFrom.IsZero() {
		p.EffectiveFrom = now.Truncate(time.Second) // a version id people can read
	}
	if p.EffectiveFrom.Before(now.Add(-pastTolerance)) {
		return invalid("effective_from %s is in the past: requests served since were charged at the version then in force; a change takes effect from now on",
			p.EffectiveFrom.Format(time.RFC3339))
	}
	if p.Rates, err = spec.RateText.Rates(); err != nil {
		return invalid("%s", err.Error())
	}
	if err := p.Validate(); err != nil {
		return invalid("%s", err.Error())
	}
	if p.Kind == billing.KindPrice && s.catalog != nil && !slices.Contains(s.catalog.Status().Aliases, p.Alias) {
		return invalid("alias %q is not served by the catalog", p.Alias)
	}
	if rec := recorderOf(w); rec != nil {
		rec.entry.Targets = []string{p.Version()}
	}
	stored, err := b.Prices(r.Context())
	if err != nil {
		return err
	}
	before := slices.IndexFunc(stored, func(x billing.Price) bool { return x.Version() == p.Version() && x.Kind == p.Kind })
	if _, err := billing.NewTable(append(slices.Concat(b.Declared().Prices, stored), p)); err != nil {
		return &sluice.Error{Code: CodePriceConflict, Msg: err.Error() + ": a change is a new version with a later effective_from", Err: err}
	}
	if err := b.PutPrice(r.Context(), p); err != nil {
		if errors.Is(err, ledger.ErrPriceConflict) {
			return &sluice.Error{Code: CodePriceConflict, Msg: fmt.Sprintf("%s %s exists with other rates: a change is a new version with a later effective_from", p.Kind, p.Version()), Err: err}
		}
		return err
	}
	b.BillingChanged(r.Context()) // this gateway prices with it from its effective time, not a refresh later
	view := priceView(p, "api", false)
	all, err := s.prices(r, b)
	if err == nil {
		if i := slices.IndexFunc(all, func(x Price) bool { return x.Kind == p.Kind && x.Version == p.Version() }); i >= 0 {
			view = all[i]
		}
	}
	if rec := recorderOf(w); rec != nil {
		var was any
		if before >= 0 {
			was = priceView(stored[before], "api", false)
		}
		rec.entry.Before, _ = json.Marshal(map[string]any{p.Version(): was})
		rec.entry.After, _ = json.Marshal(map[string]any{p.Version(): view})
	}
	s.wrote(r.Context(), "billing.prices.apply", slog.String("kind", string(p.Kind)), slog.String("version", p.Version()))
	writeJSON(w, http.StatusOK, view)
	return nil
}

// listPrices handles GET /admin/billing/prices?kind=&plan=&alias=&model=:
// every version, the catalog's and the stored, ordered by kind, plan,
// alias, model and effective time.
func (s *server) listPrices(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	all, err := s.prices(r, b)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	out := slices.DeleteFunc(all, func(p Price) bool {
		for name, v := range map[string]string{"kind": string(p.Kind), "plan": p.Plan, "alias": p.Alias, "model": p.Model} {
			if want := q.Get(name); want != "" && want != v {
				return true
			}
		}
		return false
	})
	writeJSON(w, http.StatusOK, nonNil(out))
	return nil
}

// prices is every version with its source and whether it is in force now.
func (s *server) prices(r *http.Request, b Billing) ([]Price, error) {
	stored, err := b.Prices(r.Context())
	if err != nil {
		return nil, err
	}
	declared := b.Declared().Prices
	table, err := billing.NewTable(slices.Concat(declared, stored))
	if err != nil {
		return nil, err // the store and the catalog disagree: applyPrice refuses that
	}
	now := s.now()
	var out []Price
	for _, p := range table.All() {
		source := "api"
		if slices.ContainsFunc(declared, func(d billing.Price) bool { return d.Kind == p.Kind && d.Version() == p.Version() }) {
			source = "catalog"
		}
		cur, ok := table.Price(p.Plan, p.Alias, now)
		if p.Kind == billing.KindCost {
			cur, ok = table.Cost(p.Model, now)
		}
		out = append(out, priceView(p, source, ok && cur.Version() == p.Version()))
	}
	return out, nil
}

func priceView(p billing.Price, source string, inForce bool) Price {
	return Price{Kind: p.Kind, Plan: p.Plan, Alias: p.Alias, Model: p.Model, EffectiveFrom: p.EffectiveFrom.UTC(),
		Version: p.Version(), Rates: p.Rates, Source: source, InForce: inForce}
}

// SpendReport answers GET /admin/billing/spend: the billed requests
// started in [From, To), grouped by the dimensions By, with what they were
// charged (price), what they cost upstream (cost) and the margin between.
type SpendReport struct {
	Currency string             `json:"currency"`
	From     time.Time          `json:"from,omitzero"`
	To       time.Time          `json:"to,omitzero"`
	By       []ledger.Dimension `json:"by"`
	Rows     []SpendRow         `json:"rows"`
	Total    SpendRow           `json:"total"`
}

// SpendRow is one group of a spend report; the dimensions it is not
// grouped by are absent.
type SpendRow struct {
	Account    string         `json:"account,omitempty"`
	KeyID      string         `json:"key_id,omitempty"`
	Tenant     string         `json:"tenant,omitempty"`
	EndUser    string         `json:"end_user,omitempty"`
	TaskType   string         `json:"task_type,omitempty"`
	Pool       string         `json:"pool,omitempty"`
	Alias      string         `json:"alias,omitempty"`
	Model      string         `json:"model,omitempty"`
	Day        string         `json:"day,omitempty"` // YYYY-MM-DD, UTC
	Requests   int64          `json:"requests"`
	Unmeasured int64          `json:"unmeasured"`    // of requests: usage not measured, never charged
	Tokens     int64          `json:"tokens"`        // measured tokens used (prompt and output)
	Cached     int64          `json:"cached_tokens"` // of their prompts, read from the upstream's prompt cache
	Price      billing.Micros `json:"price"`
	Cost       billing.Micros `json:"cost"`
	Margin     billing.Micros `json:"margin"` // price − cost
}

// spend handles GET /admin/billing/spend?by=&from=&to=&account=&key=&tenant=.
// by is a comma-separated list of account, key, tenant, end_user,
// task_type, pool, alias, model and day (none: one row); from defaults to
// the start of this UTC month.
func (s *server) spend(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := ledger.SpendFilter{From: ledger.Month(s.now()), Account: q.Get("account"), KeyID: q.Get("key"), Tenant: q.Get("tenant")}
	if err := parseTime(q, "from", &f.From); err != nil {
		return err
	}
	if err := parseTime(q, "to", &f.To); err != nil {
		return err
	}
	for d := range strings.SplitSeq(q.Get("by"), ",") {
		if d = strings.TrimSpace(d); d != "" && !slices.Contains(f.By, ledger.Dimension(d)) {
			f.By = append(f.By, ledger.Dimension(d))
		}
	}
	if err := f.Validate(); err != nil {
		return invalid("by: %s (want account, key, tenant, end_user, task_type, pool, alias, model, day)", err.Error())
	}
	rows, err := b.Spend(r.Context(), f)
	if err != nil {
		return err
	}
	rep := SpendReport{Currency: b.Declared().Currency, From: f.From, To: utc(f.To), By: nonNil(f.By), Rows: make([]SpendRow, 0, len(rows))}
	for _, row := range rows {
		v := SpendRow{Account: row.Account, KeyID: row.KeyID, Tenant: row.Tenant, EndUser: row.EndUser, TaskType: row.TaskType, Pool: row.Pool,
			Alias: row.Alias, Model: row.Model, Requests: row.Requests, Unmeasured: row.Unmeasured, Tokens: row.Tokens,
			Cached: row.CachedTokens, Price: row.Price, Cost: row.Cost, Margin: row.Margin()}
		if !row.Day.IsZero() {
			v.Day = row.Day.UTC().Format(time.DateOnly)
		}
		rep.Rows = append(rep.Rows, v)
		t := &rep.Total
		t.Requests, t.Unmeasured = t.Requests+v.Requests, t.Unmeasured+v.Unmeasured
		t.Tokens, t.Cached = t.Tokens+v.Tokens, t.Cached+v.Cached
		t.Price, t.Cost = t.Price.Add(v.Price), t.Cost.Add(v.Cost)
	}
	rep.Total.Margin = rep.Total.Price.Add(-rep.Total.Cost)
	rep.Currency = cmp.Or(rep.Currency, "USD")
	writeJSON(w, http.StatusOK, rep)
	return nil
}
