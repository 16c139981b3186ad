package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
)

// Billing stores the money side: billing accounts and prices made through
// the admin API, and the ledger of balance changes. Safe for concurrent
// use, also by several processes sharing one database.
//
// Charges are never posted: a usage record whose Billing is set is its
// charge entry (kind EntryCharge, RequestID the record's, Amount −Price,
// At the record's Started; see ChargeOf), stored once however often the
// record is written, its amount counted in the balance in the record's
// transaction. Statement and Entries list it among the posted entries. A
// record charges nothing when its Billing is nil, has no Account, is
// Unmeasured, or has Price 0; it is still counted in Spend (unmeasured
// ones apart).
type Billing interface {
	// PutBillingAccount creates the account or replaces its settings by
	// ID. It never touches the account's entries or balance.
	PutBillingAccount(ctx context.Context, a BillingAccount) error
	// BillingAccounts returns the stored accounts ordered by ID (the
	// catalog's are not stored).
	BillingAccounts(ctx context.Context) ([]BillingAccount, error)

	// PutPrice stores a price version (billing.Price is what is stored; the
	// catalog's prices are not, billing.NewTable merges both). It is
	// idempotent by (kind, plan, alias, model, effective_from): the same
	// version again changes nothing; the same version with other rates is
	// ErrPriceConflict, since requests may already have been charged at
	// it — a change is a new version with a later effective time.
	PutPrice(ctx context.Context, p billing.Price) error
	// Prices returns every stored version, in the order of billing.Table.All.
	Prices(ctx context.Context) ([]billing.Price, error)

	// Post writes a balance change (a top-up, refund, adjustment or
	// allowance; a charge is refused: charges come only with their usage
	// records), idempotently by (RequestID, Kind): applied is false, and
	// nothing changes, when an entry of that request and kind exists
	// already, whatever its amount. A top-up and an adjustment share one
	// RequestID (the admin API's Idempotency-Key): one of either kind
	// whose RequestID names an entry of the other is ErrKeyReused. A
	// top-up, refund or adjustment that would take the balance beyond
	// ±billing.MaxAmount is ErrBalanceBound, and nothing changes; an
	// allowance entry is never refused (the balance is held at the ends
	// of the int64 range instead), nor is a charge, which would come too
	// late to refuse.
	Post(ctx context.Context, e Entry) (applied bool, err error)
	// Balances is everything admission needs, read in one query: every
	// account's balance, and the spend of every account, key, tenant, pool
	// and task type in the UTC day and month of at. An ID with nothing
	// recorded is absent: its zero value is right.
	Balances(ctx context.Context, at time.Time) (Balances, error)
	// Statement returns the account's entries with From <= At < To (zero
	// ends are open), ordered by At, then RequestID, then Kind; at most
	// limit of them (limit <= 0: no limit).
	Statement(ctx context.Context, account string, from, to time.Time, limit int) ([]Entry, error)
	// Entries returns the entries of one request ID, of every kind and
	// whatever their account, ordered by Kind: what the admin API looks up
	// to refund a request's charge, or to answer a retried top-up with the
	// entry its Idempotency-Key made.
	Entries(ctx context.Context, requestID string) ([]Entry, error)
	// Spend sums the price and cost of the billed usage records that f
	// selects, grouped by f.By, in the order of CompareSpendRows.
	Spend(ctx context.Context, f SpendFilter) ([]SpendRow, error)
}

// Post's refusals.
var (
	// ErrBalanceBound refuses an entry that would take its account's
	// balance beyond ±billing.MaxAmount.
	ErrBalanceBound = fmt.Errorf("the balance would pass the bound of ±%s", billing.MaxAmount)
	// ErrKeyReused refuses a top-up or adjustment whose RequestID names
	// an entry of the other kind: one Idempotency-Key is one change.
	ErrKeyReused = errors.New("the request id names an entry of another kind")
)

// Keyed reports whether k is a kind whose RequestID is the admin API's
// Idempotency-Key (a top-up or an adjustment): one key names one entry of
// either kind, never one of each.
func (k EntryKind) Keyed() bool { return k == EntryTopUp || k == EntryAdjustment }

// PassesBound reports whether e, taking its account's balance to after,
// takes it beyond ±billing.MaxAmount in e's direction: what Post refuses
// with ErrBalanceBound. An allowance entry never does: it closes a cycle
// whatever the balance. A balance already beyond the bound (charges are
// never refused) may still be brought back towards 0.
func (e *Entry) PassesBound(after billing.Micros) bool {
	return e.Kind != EntryAllowance && (e.Amount > 0 && after > billing.MaxAmount || e.Amount < 0 && after < -billing.MaxAmount)
}

// ErrPriceConflict is PutPrice's error for a stored version given again
// with other rates.
var ErrPriceConflict = errors.New("a price of that kind, plan, alias or model and effective time exists with other rates")

// BillingAccount is the downstream customer that holds a balance and a
// price plan; many keys may be bound to one, and entries belong to it, not
// to a key, so rotating or revoking a key leaves its history untouched.
type BillingAccount struct {
	ID   string
	Plan string
	// MaxInflight is how many of its requests may run at once; 0 = 1.
	MaxInflight int
	// OnLimit is what a request finds at MaxInflight: sluice.OnLimitWait
	// ("" too) or sluice.OnLimitRefuse.
	OnLimit string
	// Overdraft is how far below 0 its requests may take its balance. A
	// request's worst case is held against the balance from its admission
	// to its settlement, and it is admitted only while the balance (plus
	// the allowance) less every worst case held, its own included, stays
	// at or above −Overdraft; 0 = none.
	Overdraft billing.Micros
	// Allowance is what the plan grants per Cycle ("day" or "month", UTC),
	// besides the prepaid balance; 0 = none, and then Cycle is "".
	Allowance billing.Micros
	Cycle     string
	// Budgets cap the account's spend per UTC day and month; 0 = no cap.
	Budgets Budgets
}

// Budgets are money caps per UTC day and month; 0 = no cap.
type Budgets struct {
	Day, Month billing.Micros
}

// Cycles of an allowance.
const (
	CycleDay   = "day"
	CycleMonth = "month"
)

// CycleStart is the start of the allowance cycle (CycleDay or CycleMonth,
// UTC) that t is in.
func CycleStart(cycle string, t time.Time) time.Time {
	if cycle == CycleDay {
		return Day(t)
	}
	return Month(t)
}

// CycleEnd is the end of the cycle that starts at start: the next one's start.
func CycleEnd(cycle string, start time.Time) time.Time {
	if cycle == CycleDay {
		return start.AddDate(0, 0, 1)
	}
	return start.AddDate(0, 1, 0)
}

// AllowanceRequestID is the request ID of the EntryAllowance that closes
// account's cycle starting at start: one entry per account and cycle,
// however many replicas post it.
func AllowanceRequestID(account string, start time.Time) string {
	return "allowance:" + account + ":" + start.UTC().Format(time.RFC3339)
}

// Validate reports an account without ID or plan, or with settings out of range.
// WithDefaults is a with what it leaves unset at its default: max_inflight
// 1, on_limit wait and, with an allowance, cycle month. The catalog's
// accounts and the admin API's get them from here alike. A negative
// max_inflight is kept, for Validate to name.
func (a BillingAccount) WithDefaults() BillingAccount {
	if a.MaxInflight == 0 {
		a.MaxInflight = 1
	}
	a.OnLimit = cmp.Or(a.OnLimit, sluice.OnLimitWait)
	if a.Allowance > 0 {
		a.Cycle = cmp.Or(a.Cycle, CycleMonth)
	}
	return a
}

func (a *BillingAccount) Validate() error {
	switch {
	case a.ID == "":
		return errors.New("billing account: id is required")
	case a.Plan == "":
		return fmt.Errorf("billing account %s: plan is required", a.ID)
	case a.MaxInflight < 0:
		return fmt.Errorf("billing account %s: max_inflight %d is negative", a.ID, a.MaxInflight)
	case a.OnLimit != "" && a.OnLimit != "wait" && a.OnLimit != "refuse":
		return fmt.Errorf("billing account %s: on_limit %q: want wait or refuse", a.ID, a.OnLimit)
	case a.Allowance < 0 || a.Budgets.Day < 0 || a.Budgets.Month < 0 || a.Overdraft < 0:
		return fmt.Errorf("billing account %s: allowance, budgets and overdraft must not be negative", a.ID)
	case a.Allowance > 0 && a.Cycle != CycleDay && a.Cycle != CycleMonth:
		return fmt.Errorf("billing account %s: an allowance needs cycle day or month, not %q", a.ID, a.Cycle)
	case a.Allowance == 0 && a.Cycle != "":
		return fmt.Errorf("billing account %s: cycle %q without an allowance", a.ID, a.Cycle)
	}
	for _, f := range [...]struct {
		name string
		m    billing.Micros
	}{{"allowance", a.Allowance}, {"budgets.day", a.Budgets.Day}, {"budgets.month", a.Budgets.Month}, {"overdraft", a.Overdraft}} {
		if err := billing.CheckBound(f.m); err != nil {
			return fmt.Errorf("billing account %s: %s: %w", a.ID, f.name, err)
		}
	}
	return nil
}

// EntryKind is what a ledger entry is.
type EntryKind string

// The kinds of entry.
const (
	EntryCharge     EntryKind = "charge"     // a request's price; negative
	EntryTopUp      EntryKind = "topup"      // money paid in; positive
	EntryRefund     EntryKind = "refund"     // money given back for requests; positive
	EntryAdjustment EntryKind = "adjustment" // an operator's correction; either sign
	// EntryAllowance closes an allowance cycle: what the account spent in
	// it, up to its allowance, given back, so that its balance bears only
	// what each cycle spent beyond its allowance; positive, or 0 for a
	// cycle that spent nothing (the entry still says the cycle had an
	// allowance). Its RequestID is AllowanceRequestID's, At the cycle's end.
	EntryAllowance EntryKind = "allowance"
)

// Entry is one change of a billing account's balance. An account's balance
// is the sum of its entries' amounts.
type Entry struct {
	Account   string
	RequestID string // with Kind, the entry's identity: the request's, or the admin API's Idempotency-Key
	Kind      EntryKind
	Amount    billing.Micros // signed: charges negative, top-ups and refunds positive
	Reason    string         // why; required for refunds and adjustments
	Admin     string         // the admin token's ID that made it; "" for charges
	At        time.Time
}

// Validate reports an entry Post must not take: no account, request ID or
// time, an unknown kind, an amount of the wrong sign, a refund or
// adjustment without a reason, or a charge. A charge exists only as its
// usage record's (see ChargeOf): the record is the charge's one copy, so
// a request can never be charged twice, once by its record and once
// apart, and the request path writes one row per request, not two.
func (e *Entry) Validate() error {
	switch {
	case e.Account == "" || e.RequestID == "":
		return errors.New("ledger entry: account and request id are required")
	case e.At.IsZero():
		return fmt.Errorf("ledger entry %s/%s: time is required", e.RequestID, e.Kind)
	}
	var ok bool
	switch e.Kind {
	case EntryCharge:
		return fmt.Errorf("ledger entry %s: a charge is made by its request's usage record, not posted", e.RequestID)
	case EntryTopUp, EntryRefund:
		ok = e.Amount > 0
	case EntryAllowance:
		ok = e.Amount >= 0 // 0: the cycle spent nothing, and is closed all the same
	case EntryAdjustment:
		ok = e.Amount != 0
	default:
		return fmt.Errorf("ledger entry %s: kind %q: want charge, topup, refund, adjustment or allowance", e.RequestID, e.Kind)
	}
	if !ok {
		return fmt.Errorf("ledger entry %s/%s: amount %s has the wrong sign for its kind", e.RequestID, e.Kind, e.Amount)
	}
	if err := billing.CheckBound(e.Amount); err != nil {
		return fmt.Errorf("ledger entry %s/%s: %w", e.RequestID, e.Kind, err)
	}
	if (e.Kind == EntryRefund || e.Kind == EntryAdjustment) && e.Reason == "" {
		return fmt.Errorf("ledger entry %s/%s: a reason is required", e.RequestID, e.Kind)
	}
	return nil
}

// CompareEntries orders entries as a statement lists them: by At, then
// RequestID, then Kind.
func CompareEntries(a, b Entry) int {
	return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.RequestID, b.RequestID), cmp.Compare(a.Kind, b.Kind))
}

// ChargeOf is the charge entry a usage record's Billing makes, and false
// when it makes none (see Billing).
func ChargeOf(r *sluice.UsageRecord) (Entry, bool) {
	c := r.Billing
	if c == nil || c.Account == "" || c.Unmeasured || c.Price <= 0 {
		return Entry{}, false
	}
	return Entry{Account: c.Account, RequestID: r.RequestID, Kind: EntryCharge, Amount: -billing.Micros(c.Price), At: r.Started.UTC()}, true
}

// Balances is what Billing.Balances reads: the state admission decides on.
// Spends are of billed usage records by the UTC day and month their
// request started in (At's): price is what customers were charged, cost
// what the platform paid upstream (for pool and task type budgets).
type Balances struct {
	At       time.Time
	Accounts map[string]Balance // by billing account ID
	Keys     map[string]Spent   // by key ID
	Tenants  map[string]Spent   // by tenant
	Pools    map[string]Spent   // by pool
	Tasks    map[string]Spent   // by task type
}

// Balance is one billing account's: the sum of its entries, and its spend.
type Balance struct {
	Balance billing.Micros
	Spent
}

// Spent is what was spent in the UTC day and the UTC month of Balances.At.
type Spent struct {
	Day, Month Amounts
}

// InCycle is what was spent in the allowance cycle (CycleDay or
// CycleMonth) that Balances.At is in.
func (s Spent) InCycle(cycle string) Amounts {
	if cycle == CycleDay {
		return s.Day
	}
	return s.Month
}

// Amounts are what customers were charged (Price) and what the platform
// paid upstream (Cost).
type Amounts struct {
	Price, Cost billing.Micros
}

// Plus is a + b, each held at the largest amount.
func (a Amounts) Plus(b Amounts) Amounts {
	return Amounts{Price: a.Price.Add(b.Price), Cost: a.Cost.Add(b.Cost)}
}

// Plus adds amounts spent on one day of the month to s: to the month, and
// to the day if it is today.
func (s Spent) Plus(a Amounts, today bool) Spent {
	s.Month = s.Month.Plus(a)
	if today {
		s.Day = s.Day.Plus(a)
	}
	return s
}

// Day is the start of t's UTC day.
func Day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Month is the start of t's UTC month.
func Month(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}

// Dimension is what a spend report groups by.
type Dimension string

// The dimensions of a spend report.
const (
	ByAccount  Dimension = "account" // billing account
	ByKey      Dimension = "key"
	ByTenant   Dimension = "tenant" // the tenant of the request's key
	ByEndUser  Dimension = "end_user"
	ByTaskType Dimension = "task_type" // the task type the request ran as
	ByPool     Dimension = "pool"      // the pool its upstream capacity came from
	ByAlias    Dimension = "alias"
	ByModel    Dimension = "model" // the upstream model of the record's last execution
	ByDay      Dimension = "day"   // UTC day the request started
)

// SpendFilter selects billed usage records by start (From <= Started < To,
// zero ends open), billing account, key and tenant ("" = all), and says
// what to group them by (none: one row for everything).
//
// A store that keeps records for a time only (sqlledger's Retain) counts
// those it removed by their UTC day, as a whole: in a range when the
// day starts within it, under no end user ("").
type SpendFilter struct {
	From, To time.Time
	Account  string
	KeyID    string
	Tenant   string
	By       []Dimension
}

// Validate reports a dimension that is not one of the above.
func (f *SpendFilter) Validate() error {
	for _, d := range f.By {
		switch d {
		case ByAccount, ByKey, ByTenant, ByEndUser, ByTaskType, ByPool, ByAlias, ByModel, ByDay:
		default:
			return fmt.Errorf("spend: unknown dimension %q", d)
		}
	}
	return nil
}

// SpendRow is one group of a spend report. The dimensions it was not
// grouped by are empty (Day zero).
type SpendRow struct {
	Account, KeyID, Tenant, EndUser, TaskType, Pool, Alias, Model string
	Day                                                           time.Time
	Requests                                                      int64 // billed records
	Unmeasured                                                    int64 // of Requests, those whose usage could not be measured (never charged)
	// Tokens and CachedTokens sum the measured usage of the records
	// (sluice.Usage TotalTokens and CachedTokens): all they used, and of
	// their prompts what was read from the upstream's prompt cache.
	Tokens, CachedTokens int64
	Price, Cost          billing.Micros
}

// Margin is what the platform kept: price − cost.
func (r *SpendRow) Margin() billing.Micros { return r.Price.Add(-r.Cost) }

// CompareSpendRows orders rows by account, key, tenant, end user, task
// type, pool, alias, model and day: the order Spend returns.
func CompareSpendRows(a, b SpendRow) int {
	return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.KeyID, b.KeyID), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.EndUser, b.EndUser),
		cmp.Compare(a.TaskType, b.TaskType), cmp.Compare(a.Pool, b.Pool),
		cmp.Compare(a.Alias, b.Alias), cmp.Compare(a.Model, b.Model), a.Day.Compare(b.Day))
}

// Selects reports whether f selects a record of keyID and tenant started
// at started (its account is checked apart).
func (f *SpendFilter) Selects(keyID, tenant string, started time.Time) bool {
	return (f.Tenant == "" || tenant == f.Tenant) && PolicyFilter{KeyID: f.KeyID, From: f.From, To: f.To}.Selects(keyID, started)
}

// ModelOf is the upstream model a record is reported under: its last
// execution's, the one that served it or failed last; "" with none.
func ModelOf(r *sluice.UsageRecord) string {
	if len(r.Executions) == 0 {
		return ""
	}
	return r.Executions[len(r.Executions)-1].Model
}
