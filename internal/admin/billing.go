package admin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/ledger"
)

// The money side of the admin API: billing accounts (the catalog's, read
// only, and those stored here), their balances and statements, top-ups,
// adjustments and refunds, stored price versions, and spend reports. Keys
// are bound to accounts through the key routes (PATCH /admin/keys/{id} and
// the batch operation set_billing_account). Every amount, in and out, is a
// decimal string of the deployment's currency; never a JSON number.

// Billing is what the admin API needs of the money side: the ledger store
// and what the serving catalog declares. Implementations must be safe for
// concurrent use.
type Billing interface {
	ledger.Billing
	// Declared is the serving catalog's billing section: its accounts and
	// prices are read-only here.
	Declared() DeclaredBilling
	// BillingChanged is called after an entry was posted, an account put
	// or a price version applied, so that this gateway reads the store now
	// — its balance view, and the accounts and prices admission uses —
	// rather than at its next periodic refresh (other replicas see it at
	// theirs, within a second). It returns once the gateway has read the
	// store, or has given up.
	BillingChanged(ctx context.Context)
}

// DeclaredBilling is what the serving catalog declares for billing.
type DeclaredBilling struct {
	Currency string                  // ISO 4217; "" when the catalog has no billing section
	Billed   bool                    // the catalog's billing section bills: every key must be bound
	Accounts []ledger.BillingAccount // billing.accounts, defaults filled
	Prices   []billing.Price         // billing.plans and billing.costs, every version
}

// IdempotencyHeader names a top-up or adjustment: a POST retried with the
// same value posts nothing more and answers the entry the first one made.
const IdempotencyHeader = "Idempotency-Key"

// billingAccountByPath is the billing account {id}: its settings and balance.
var billingAccountByPath = subject{targets: pathID, view: (*server).billingAccountAudit}

// registerBilling adds the billing routes; without a Billing they answer 404.
func (s *server) registerBilling() {
	s.read("GET /admin/billing/accounts", s.listBillingAccounts)
	s.read("GET /admin/billing/accounts/{id}", s.showBillingAccount)
	s.write("PUT /admin/billing/accounts/{id}", "billing.accounts.put", billingAccountByPath, s.putBillingAccount)
	s.write("POST /admin/billing/accounts/{id}/topup", "billing.topup", billingAccountByPath, s.post(ledger.EntryTopUp))
	s.write("POST /admin/billing/accounts/{id}/adjust", "billing.adjust", billingAccountByPath, s.post(ledger.EntryAdjustment))
	s.write("POST /admin/billing/accounts/{id}/refund", "billing.refund", billingAccountByPath, s.refund)
	s.read("GET /admin/billing/accounts/{id}/statement", s.statement)
	s.read("GET /admin/billing/prices", s.listPrices)
	s.write("POST /admin/billing/prices", "billing.prices.apply", selfNoted, s.applyPrice)
	s.read("GET /admin/billing/spend", s.spend)
}

// ledger returns the Billing, or a 404 when the gateway has none.
func (s *server) ledger() (Billing, error) {
	if s.billing == nil {
		return nil, sluice.Errorf(sluice.CodeNotFound, "this gateway keeps no billing ledger")
	}
	return s.billing, nil
}

// BillingAccountSpec is the body of PUT /admin/billing/accounts/{id}: the
// whole of a stored account's settings, as the catalog names them.
type BillingAccountSpec struct {
	Plan        string         `json:"plan"`
	MaxInflight int            `json:"max_inflight,omitempty"` // default 1
	OnLimit     string         `json:"on_limit,omitempty"`     // wait (default) | refuse
	Overdraft   billing.Micros `json:"overdraft,omitzero"`     // how far below 0 its requests may take the balance; default 0
	Allowance   billing.Micros `json:"allowance,omitzero"`     // per cycle, besides the prepaid balance
	Cycle       string         `json:"cycle,omitempty"`        // day | month (default), with an allowance
	Budgets     Budgets        `json:"budgets,omitzero"`
}

// Budgets are money caps per UTC day and month; zero = none.
type Budgets struct {
	Day   billing.Micros `json:"day,omitzero"`
	Month billing.Micros `json:"month,omitzero"`
}

// BillingAccount is a billing account as the admin API shows it: its
// settings, where it is declared, and its balance and spend now.
type BillingAccount struct {
	ID     string `json:"id"`
	Source string `json:"source"` // "catalog" (read-only here) or "api"
	BillingAccountSpec
	Balance billing.Micros `json:"balance"` // the sum of its entries
	// With an allowance, the current cycle's: its spend, what is left of
	// the allowance, what is left of the prepaid balance (the balance
	// without the spend the allowance covers), and what the account may
	// still spend: balance + allowance, admission's measure.
	Current   *CycleState    `json:"current_cycle,omitempty"`
	Available billing.Micros `json:"available"` // balance, plus the allowance with one
	Spent     Spent          `json:"spent"`     // in the UTC day and month of Now
	Now       time.Time      `json:"now"`
	// Suspension is set while the account is suspended: its keys get 403
	// billing_account_suspended.
	Suspension *Suspension `json:"suspension,omitempty"`
}

// CycleState is where an account with an allowance stands in its cycle.
type CycleState struct {
	Start          time.Time      `json:"start"`
	End            time.Time      `json:"end"`
	Spent          billing.Micros `json:"spent"`
	AllowanceLeft  billing.Micros `json:"allowance_left"`
	PrepaidBalance billing.Micros `json:"prepaid_balance"`
}

// Spent is what was charged (price) and what it cost upstream (cost) in
// the UTC day and month.
type Spent struct {
	Day   Amounts `json:"day"`
	Month Amounts `json:"month"`
}

// Amounts are a price and a cost.
type Amounts struct {
	Price billing.Micros `json:"price"`
	Cost  billing.Micros `json:"cost"`
}

// billingAccounts returns every account, the catalog's first, each with
// where it is declared.
func (s *server) billingAccounts(ctx context.Context, b Billing) ([]BillingAccount, error) {
	stored, err := b.BillingAccounts(ctx)
	if err != nil {
		return nil, err
	}
	var out []BillingAccount
	for _, a := range b.Declared().Accounts {
		out = append(out, BillingAccount{ID: a.ID, Source: "catalog", BillingAccountSpec: accountSpec(a)})
	}
	for _, a := range stored {
		if !slices.ContainsFunc(out, func(c BillingAccount) bool { return c.ID == a.ID }) {
			out = append(out, BillingAccount{ID: a.ID, Source: "api", BillingAccountSpec: accountSpec(a)})
		}
	}
	slices.SortFunc(out, func(a, b BillingAccount) int { return strings.Compare(a.ID, b.ID) })
	for i := range out {
		out[i].Suspension = s.suspensionOf(catalog.SuspendedBillingAccount, out[i].ID)
	}
	return out, nil
}

// withBalances fills the accounts' balances and spend, read in one query.
func (s *server) withBalances(ctx context.Context, b Billing, accounts []BillingAccount) error {
	now := s.now().UTC()
	bal, err := b.Balances(ctx, now)
	if err != nil {
		return err
	}
	for i := range accounts {
		a, acc := bal.Accounts[accounts[i].ID], &accounts[i]
		acc.Balance, acc.Available, acc.Now = a.Balance, a.Balance, now
		acc.Spent = Spent{Day: Amounts(a.Day), Month: Amounts(a.Month)}
		if acc.Allowance > 0 {
			// The balance bears the cycle's charges in full; the allowance
			// covers them up to itself (see ledger.EntryAllowance).
			start := ledger.CycleStart(acc.Cycle, now)
			spent := a.InCycle(acc.Cycle).Price
			covered := min(spent, acc.Allowance)
			acc.Current = &CycleState{Start: start, End: ledger.CycleEnd(acc.Cycle, start), Spent: spent,
				AllowanceLeft: acc.Allowance.Add(-covered), PrepaidBalance: a.Balance.Add(covered)}
			acc.Available = a.Balance.Add(acc.Allowance)
		}
	}
	return nil
}

// findAccount returns the account id with its balance, or a 404.
func (s *server) findAccount(ctx context.Context, b Billing, id string) (*BillingAccount, error) {
	all, err := s.billingAccounts(ctx, b)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(all, func(a BillingAccount) bool { return a.ID == id })
	if i < 0 {
		return nil, notFound("billing account", id, nil)
	}
	one := all[i : i+1]
	if err := s.withBalances(ctx, b, one); err != nil {
		return nil, err
	}
	return &one[0], nil
}

func accountSpec(a ledger.BillingAccount) BillingAccountSpec {
	a = a.WithDefaults()
	return BillingAccountSpec{Plan: a.Plan, MaxInflight: a.MaxInflight, OnLimit: a.OnLimit,
		Overdraft: a.Overdraft, Allowance: a.Allowance, Cycle: a.Cycle, Budgets: Budgets{Day: a.Budgets.Day, Month: a.Budgets.Month}}
}

// listBillingAccounts handles GET /admin/billing/accounts.
func (s *server) listBillingAccounts(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	all, err := s.billingAccounts(r.Context(), b)
	if err != nil {
		return err
	}
	if err := s.withBalances(r.Context(), b, all); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, nonNil(all))
	return nil
}

// showBillingAccount handles GET /admin/billing/accounts/{id}.
func (s *server) showBillingAccount(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	a, err := s.findAccount(r.Context(), b, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// billingAccountAudit is the account as the audit log shows it: its
// settings and balance, or nil.
func (s *server) billingAccountAudit(ctx context.Context, id string) (any, error) {
	if s.billing == nil {
		return nil, nil
	}
	a, err := s.findAccount(ctx, s.billing, id)
	if _, missing := errors.AsType[*sluice.Error](err); missing {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return struct {
		Source string `json:"source"`
		BillingAccountSpec
		Balance billing.Micros `json:"balance"`
	}{a.Source, a.BillingAccountSpec, a.Balance}, nil
}

// putBillingAccount handles PUT /admin/billing/accounts/{id}: it creates
// the account (201) or replaces its settings (200); its entries and
// balance stay as they are. A catalog account is changed in the catalog.
func (s *server) putBillingAccount(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	var spec BillingAccountSpec
	if err := decodeJSON(w, r, &spec, false); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkID(id); err != nil {
		return err
	}
	ctx := r.Context()
	d := b.Declared()
	if slices.ContainsFunc(d.Accounts, func(a ledger.BillingAccount) bool { return a.ID == id }) {
		return &sluice.Error{Code: CodeBillingAccountReadOnly, Msg: fmt.Sprintf("billing account %q is declared in the catalog: change it there, not through the admin API", id)}
	}
	a := ledger.BillingAccount{ID: id, Plan: strings.TrimSpace(spec.Plan), MaxInflight: spec.MaxInflight, OnLimit: spec.OnLimit,
		Overdraft: spec.Overdraft, Allowance: spec.Allowance, Cycle: spec.Cycle, Budgets: ledger.Budgets{Day: spec.Budgets.Day, Month: spec.Budgets.Month}}.WithDefaults()
	if err := a.Validate(); err != nil {
		return invalid("%s", err.Error())
	}
	plans, err := s.plans(ctx, b)
	if err != nil {
		return err
	}
	if !plans[a.Plan] {
		return invalid("plan %q has no prices, in the catalog or applied through POST /admin/billing/prices: its requests could never be priced", a.Plan)
	}
	stored, err := b.BillingAccounts(ctx)
	if err != nil {
		return err
	}
	existed := slices.ContainsFunc(stored, func(x ledger.BillingAccount) bool { return x.ID == id })
	if err := b.PutBillingAccount(ctx, a); err != nil {
		return err
	}
	b.BillingChanged(ctx) // its keys can be bound, and its requests admitted, at once
	s.wrote(ctx, "billing.accounts.put", slog.String("billing_account", id), slog.String("plan", a.Plan), slog.Bool("created", !existed))
	out, err := s.findAccount(ctx, b, id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if !existed {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
	return nil
}

// plans are the price plans with at least one price: the catalog's and
// the stored ones.
func (s *server) plans(ctx context.Context, b Billing) (map[string]bool, error) {
	stored, err := b.Prices(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range append(b.Declared().Prices, stored...) {
		if p.Kind == billing.KindPrice {
			out[p.Plan] = true
		}
	}
	return out, nil
}

// MoneyChange is the body of a top-up or an adjustment.
type MoneyChange struct {
	Amount billing.Micros `json:"amount"`           // a top-up's is positive; an adjustment's either sign, not 0
	Reason string         `json:"reason,omitempty"` // required for an adjustment
}

// Refund is the body of POST /admin/billing/accounts/{id}/refund: the
// request whose charge is given back, whole, once.
type Refund struct {
	RequestID string `json:"request_id"`
	Reason    string `json:"reason"`
}

// Posted answers a top-up, adjustment or refund: the entry, whether this
// call made it (false: an earlier call with the same Idempotency-Key, or
// for a refund the same request, did, and nothing changed), and the
// account's balance after it.
type Posted struct {
	Entry   Entry          `json:"entry"`
	Applied bool           `json:"applied"`
	Balance billing.Micros `json:"balance"`
}

// Entry is a ledger entry as the admin API shows it.
type Entry struct {
	Account   string           `json:"account"`
	RequestID string           `json:"request_id"` // the charged request's, or the Idempotency-Key of a top-up or adjustment
	Kind      ledger.EntryKind `json:"kind"`
	Amount    billing.Micros   `json:"amount"` // signed: charges negative
	Reason    string           `json:"reason,omitempty"`
	Admin     string           `json:"admin,omitempty"` // the admin token that made it
	At        time.Time        `json:"at"`
}

func entryView(e ledger.Entry) Entry {
	return Entry{Account: e.Account, RequestID: e.RequestID, Kind: e.Kind, Amount: e.Amount, Reason: e.Reason, Admin: e.Admin, At: utc(e.At)}
}

// post handles POST /admin/billing/accounts/{id}/topup and /adjust.
func (s *server) post(kind ledger.EntryKind) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		b, err := s.ledger()
		if err != nil {
			return err
		}
		var c MoneyChange
		if err := decodeJSON(w, r, &c, false); err != nil {
			return err
		}
		c.Reason = strings.TrimSpace(c.Reason)
		switch {
		case kind == ledger.EntryTopUp && c.Amount <= 0:
			return invalid("amount %q: a top-up is positive (an adjustment takes either sign)", c.Amount)
		case kind == ledger.EntryAdjustment && c.Amount == 0:
			return invalid("amount is required and not 0")
		case kind == ledger.EntryAdjustment && c.Reason == "":
			return invalid("reason is required for an adjustment")
		}
		if err := billing.CheckBound(c.Amount); err != nil {
			return invalid("%v", err)
		}
		idem, err := idempotencyKey(r)
		if err != nil {
			return err
		}
		e := ledger.Entry{Account: r.PathValue("id"), RequestID: idem, Kind: kind, Amount: c.Amount, Reason: c.Reason,
			Admin: tokenOf(w), At: s.now().UTC().Truncate(time.Microsecond)}
		return s.postEntry(w, r, b, e)
	}
}

// refund handles POST /admin/billing/accounts/{id}/refund: the request's
// charge on this account comes back as a refund entry of that request,
// which the ledger takes once however often it is asked.
func (s *server) refund(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	var body Refund
	if err := decodeJSON(w, r, &body, false); err != nil {
		return err
	}
	body.RequestID, body.Reason = strings.TrimSpace(body.RequestID), strings.TrimSpace(body.Reason)
	switch {
	case body.RequestID == "":
		return invalid("request_id is required: the request whose charge is refunded")
	case body.Reason == "":
		return invalid("reason is required for a refund")
	}
	id := r.PathValue("id")
	entries, err := b.Entries(r.Context(), body.RequestID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(entries, func(e ledger.Entry) bool { return e.Kind == ledger.EntryCharge && e.Account == id })
	if i < 0 {
		return &sluice.Error{Code: sluice.CodeNotFound, Msg: fmt.Sprintf("request %q has no charge on billing account %q", body.RequestID, id)}
	}
	e := ledger.Entry{Account: id, RequestID: body.RequestID, Kind: ledger.EntryRefund, Amount: -entries[i].Amount,
		Reason: body.Reason, Admin: tokenOf(w), At: s.now().UTC().Truncate(time.Microsecond)}
	if err := billing.CheckBound(e.Amount); err != nil {
		return invalid("request %q: its charge cannot be refunded: %v", body.RequestID, err) // held at the end of the range
	}
	return s.postEntry(w, r, b, e)
}

// postEntry posts e to an account that exists and answers what the
// ledger holds: e, or the entry an earlier call with e's identity made
// (refused as a conflict when it is not the same change).
func (s *server) postEntry(w http.ResponseWriter, r *http.Request, b Billing, e ledger.Entry) error {
	ctx := r.Context()
	if _, err := s.findAccount(ctx, b, e.Account); err != nil {
		return err
	}
	applied, err := b.Post(ctx, e)
	switch {
	case errors.Is(err, ledger.ErrBalanceBound):
		return invalid("%s of %s on billing account %q refused: %v", e.Kind, e.Amount, e.Account, ledger.ErrBalanceBound)
	case errors.Is(err, ledger.ErrKeyReused):
		return &sluice.Error{Code: CodeIdempotencyConflict, Msg: fmt.Sprintf(
			"%s %q already made an entry of another kind: one key is one change, use a new key for another", IdempotencyHeader, e.RequestID)}
	case err != nil:
		return err
	}
	if applied {
		b.BillingChanged(ctx)
	} else {
		got, err := b.Entries(ctx, e.RequestID)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(got, func(x ledger.Entry) bool { return x.Kind == e.Kind })
		if i < 0 {
			return fmt.Errorf("entry %s/%s neither posted nor found", e.RequestID, e.Kind) // the store contradicts itself
		}
		if was := got[i]; e.Kind != ledger.EntryRefund && (was.Account != e.Account || was.Amount != e.Amount) {
			return &sluice.Error{Code: CodeIdempotencyConflict, Msg: fmt.Sprintf(
				"%s %q already made a %s of %s on billing account %q: use a new key for another change", IdempotencyHeader, e.RequestID, e.Kind, was.Amount, was.Account)}
		}
		e = got[i]
	}
	a, err := s.findAccount(ctx, b, e.Account)
	if err != nil {
		return err
	}
	s.wrote(ctx, "billing."+string(e.Kind), slog.String("billing_account", e.Account), slog.String("request_id", e.RequestID),
		slog.String("amount", e.Amount.String()), slog.Bool("applied", applied))
	writeJSON(w, http.StatusOK, Posted{Entry: entryView(e), Applied: applied, Balance: a.Balance})
	return nil
}

// idempotencyKey is the request's Idempotency-Key, or a new one: without
// it a retried POST is a second change.
func idempotencyKey(r *http.Request) (string, error) {
	k := strings.TrimSpace(r.Header.Get(IdempotencyHeader))
	if k == "" {
		return "adm_" + rand.Text(), nil
	}
	if len(k) > 128 || strings.ContainsFunc(k, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		return "", invalid("%s: at most 128 printable ASCII characters without spaces", IdempotencyHeader)
	}
	return k, nil
}

// tokenOf is the ID of the admin token making the write w answers.
func tokenOf(w http.ResponseWriter) string {
	if rec := recorderOf(w); rec != nil {
		return rec.entry.TokenID
	}
	return ""
}

// Statement answers GET /admin/billing/accounts/{id}/statement: the
// account's entries with From <= at < To, oldest first, their sum, and
// the account's balance now.
type Statement struct {
	Account   string         `json:"account"`
	From      time.Time      `json:"from,omitzero"`
	To        time.Time      `json:"to,omitzero"`
	Entries   []Entry        `json:"entries"`
	Total     billing.Micros `json:"total"`     // of Entries
	Truncated bool           `json:"truncated"` // limit entries were listed; there are more
	Balance   billing.Micros `json:"balance"`
}

// Bounds of a statement.
const (
	defaultStatementLimit = 1000
	maxStatementLimit     = 100000
)

// statement handles GET /admin/billing/accounts/{id}/statement?from=&to=&limit=.
func (s *server) statement(w http.ResponseWriter, r *http.Request) error {
	b, err := s.ledger()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	st := Statement{Account: r.PathValue("id"), Entries: []Entry{}}
	if err := parseTime(q, "from", &st.From); err != nil {
		return err
	}
	if err := parseTime(q, "to", &st.To); err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"), defaultStatementLimit, maxStatementLimit)
	if err != nil {
		return err
	}
	if _, err := s.findAccount(r.Context(), b, st.Account); err != nil {
		return err
	}
	entries, err := b.Statement(r.Context(), st.Account, st.From, st.To, limit+1)
	if err != nil {
		return err
	}
	// The balance is read after the entries, so it counts at least those listed.
	a, err := s.findAccount(r.Context(), b, st.Account)
	if err != nil {
		return err
	}
	if len(entries) > limit {
		entries, st.Truncated = entries[:limit], true
	}
	for _, e := range entries {
		st.Entries = append(st.Entries, entryView(e))
		st.Total = st.Total.Add(e.Amount)
	}
	st.Balance = a.Balance
	writeJSON(w, http.StatusOK, st)
	return nil
}

// parseLimit reads a limit from 1 to most; "" is def.
func parseLimit(v string, def, most int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, invalid("limit %q is not a number from 1 to %d", v, most)
	}
	return n, nil
}
