package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/store"
)

// Billing in the request path. A catalog with a billing section compiles
// it into the snapshot; one without has none, and a request then takes no
// step of this file. Admission fixes on the request what it is charged
// to — billing account, plan, price version — so that a key rebound or a
// price changed while it runs does not move its charge; settlement prices
// its measured usage at that version and counts the charge in the balance
// view before the request's claims are released.

// compiledBilling is the billing section of a catalog, with the billing
// accounts and price versions of the admin API merged in (see withStored).
type compiledBilling struct {
	billed      bool           // the catalog has a billing section that bills: every key must be bound
	table       *billing.Table // the catalog's prices and the stored ones
	declared    []billing.Price
	accounts    map[string]*billingAccount
	tenants     map[string]sluice.Budgets          // the tenants' budgets
	costBudgets map[billing.Subject]billing.Micros // pools' and task types' cost budgets per day
}

// billingAccount is a billing account as admission uses it.
type billingAccount struct {
	id, plan  string
	budgets   sluice.Budgets
	allowance billing.Micros // per cycle, spent before the balance; 0 = none
	cycle     string         // the allowance's: ledger.CycleDay or ledger.CycleMonth
	overdraft billing.Micros // how far below 0 its requests' worst cases may take the balance
	unit      store.Unit     // its concurrency: "billing:<id>", a limit every request of it claims
	// only is []store.Unit{unit}, the limits of a request that has no
	// others, shared so that such a request allocates none (limits are
	// only read).
	only []store.Unit
}

func newBillingAccount(a ledger.BillingAccount) *billingAccount {
	unit := store.Unit{ID: "billing:" + a.ID, Cap: max(a.MaxInflight, 1), Refuse: a.OnLimit == sluice.OnLimitRefuse}
	return &billingAccount{id: a.ID, plan: a.Plan, budgets: sluice.Budgets{Day: int64(a.Budgets.Day), Month: int64(a.Budgets.Month)},
		allowance: a.Allowance, cycle: a.Cycle, overdraft: a.Overdraft, unit: unit, only: []store.Unit{unit}}
}

// credit is what a's requests may spend beyond its balance: its allowance
// and its overdraft.
func (a *billingAccount) credit() billing.Micros { return a.allowance.Add(a.overdraft) }

// compileBilling compiles c's billing section; nil when it has none that
// bills or counts costs.
func compileBilling(c *config.Catalog) (*compiledBilling, error) {
	b := &c.Billing
	if !b.Billed() && len(b.Costs) == 0 {
		return nil, nil
	}
	var prices []billing.Price
	for _, p := range b.Plans {
		for _, pr := range p.Prices {
			price, err := version(billing.Price{Kind: billing.KindPrice, Plan: p.ID, Alias: pr.Alias}, pr.RateText, pr.EffectiveFrom)
			if err != nil {
				return nil, err
			}
			prices = append(prices, price)
		}
	}
	for _, co := range b.Costs {
		cost, err := version(billing.Price{Kind: billing.KindCost, Model: co.Model}, co.RateText, co.EffectiveFrom)
		if err != nil {
			return nil, err
		}
		prices = append(prices, cost)
	}
	table, err := billing.NewTable(prices)
	if err != nil {
		return nil, err
	}
	cb := &compiledBilling{billed: b.Billed(), table: table, declared: prices, accounts: map[string]*billingAccount{},
		tenants: map[string]sluice.Budgets{}, costBudgets: map[billing.Subject]billing.Micros{}}
	for _, a := range b.Accounts {
		cb.accounts[a.ID] = newBillingAccount(a.Ledger())
	}
	for _, t := range c.Tenants {
		if t.Budgets != (config.Budgets{}) {
			cb.tenants[t.ID] = budgets(t.Budgets)
		}
	}
	for _, p := range c.Pools {
		if p.CostBudgetDay > 0 {
			cb.costBudgets[billing.Subject{Kind: billing.Pool, ID: p.ID}] = p.CostBudgetDay.Micros()
		}
	}
	for _, tt := range c.TaskTypes {
		if tt.CostBudgetDay > 0 {
			cb.costBudgets[billing.Subject{Kind: billing.Task, ID: tt.ID}] = tt.CostBudgetDay.Micros()
		}
	}
	return cb, nil
}

// StoredBilling is what the admin API stored for billing: billing accounts
// and price versions, as the ledger store lists them.
type StoredBilling struct {
	Accounts []ledger.BillingAccount
	Prices   []billing.Price
}

// equal reports whether a and b list the same accounts and versions.
func (a *StoredBilling) equal(b *StoredBilling) bool {
	return slices.Equal(a.Accounts, b.Accounts) && slices.EqualFunc(a.Prices, b.Prices, func(x, y billing.Price) bool {
		return x.Kind == y.Kind && x.Version() == y.Version() && x.Rates == y.Rates
	})
}

// withStored returns cb with the stored accounts and prices merged in,
// and what it left out, for the caller to log. The catalog wins: a stored
// account with the ID of a catalog account is left out, and so is a
// stored price version the catalog gives at the same instant with other
// rates. cb itself is not changed.
func (cb *compiledBilling) withStored(sb *StoredBilling) (*compiledBilling, []error) {
	if cb == nil || (len(sb.Accounts) == 0 && len(sb.Prices) == 0) {
		return cb, nil
	}
	out := *cb
	table, dropped, err := billing.Merge(cb.declared, sb.Prices)
	if err != nil {
		dropped = append(dropped, fmt.Errorf("the stored prices are left out: %w", err))
	} else {
		out.table = table
	}
	out.accounts = maps.Clone(cb.accounts)
	for _, a := range sb.Accounts {
		if _, declared := cb.accounts[a.ID]; declared {
			dropped = append(dropped, fmt.Errorf("billing account %s is declared in the catalog: the stored one is left out", a.ID))
			continue
		}
		out.accounts[a.ID] = newBillingAccount(a)
	}
	return &out, dropped
}

// version is p with the rates and start the catalog gives it.
func version(p billing.Price, rates billing.RateText, from string) (billing.Price, error) {
	var err error
	if p.Rates, err = rates.Rates(); err != nil {
		return p, err
	}
	if p.EffectiveFrom, err = time.Parse(time.RFC3339, from); err != nil {
		return p, fmt.Errorf("effective_from: %w", err)
	}
	return p, nil
}

func budgets(b config.Budgets) sluice.Budgets {
	return sluice.Budgets{Day: int64(b.Day), Month: int64(b.Month)}
}

// charging is what admission fixed on a request for its billing: the
// billing account (nil for an unbilled catalog that only counts costs),
// the price version in force when it arrived, and the budgets it must
// stay within.
type charging struct {
	account  *billingAccount
	price    *billing.Price // the table's; never nil once admitted (noPrice for a job whose price is gone)
	worst    billing.Micros // what it may cost at most, held against the balance while it runs
	key      string
	tenant   string
	task     string
	pool     string        // the pool of its key's route policy; "" = none
	budgets  []limit       // checked before it waits and once it has its claim
	budgeted billing.Kinds // the kinds of the budgets' subjects: the view counts its spend for those
	received time.Time
	job      bool // an async job was submitted: the job's record carries the charge
}

// limit is a budget of a subject per UTC day and month; 0 = none.
type limit struct {
	s          billing.Subject
	day, month billing.Micros
}

var (
	errBillingUnbound = &sluice.Error{Code: sluice.CodeKeyUnbound, Msg: "this key is not bound to a billing account"}
	errBillingStale   = &sluice.Error{Code: sluice.CodeStateUnavailable, Msg: "billing balances are unavailable; retry later", RetryAfter: time.Second}
)

// charge admits a request (a, as admitted so far) for billing, after its
// scopes: an unbound key of a billed catalog is access_key_unbound; an
// alias its plan has no price for at req.Received is
// billing_price_unavailable; a view the store has not refreshed within its
// staleness bound refuses billed requests (fail closed); an exhausted
// balance or a spent budget is billing_quota_exhausted. It returns nil,
// with no work done, for a catalog without billing.
func (h *Handler) charge(a *admission, req *sluice.Request) (*charging, error) {
	cb := a.snap.billing
	if cb == nil || !cb.billed && !cb.counts(a, req.Received) {
		return nil, nil // nothing to charge, nor to count: the request takes no step of billing
	}
	k := a.key()
	c := &charging{key: k.ID, tenant: k.Tenant, task: a.task, pool: a.policy.pool, received: req.Received}
	if cb.billed {
		ba := cb.accounts[k.BillingAccount]
		if ba == nil {
			if k.BillingAccount != "" && !h.view.Fresh(time.Now()) {
				// The account may be one of the admin API's that this
				// gateway has not read yet (it reads them with the balances).
				h.metrics.BillingUnavailable.Inc()
				return nil, errBillingStale
			}
			return nil, errBillingUnbound
		}
		price, ok := cb.table.Price(ba.plan, req.Model, req.Received)
		if !ok {
			return nil, &sluice.Error{Code: sluice.CodePriceUnavailable, Msg: "model " + req.Model + " has no price in this key's plan"}
		}
		c.account, c.price = ba, price
		c.worst = c.worstCase(req)
		if b := ba.budgets; b != (sluice.Budgets{}) {
			c.budgets = append(c.budgets, limit{billing.Subject{Kind: billing.Account, ID: ba.id}, billing.Micros(b.Day), billing.Micros(b.Month)})
		}
		if b := k.Budgets; b != (sluice.Budgets{}) {
			c.budgets = append(c.budgets, limit{billing.Subject{Kind: billing.Key, ID: k.ID}, billing.Micros(b.Day), billing.Micros(b.Month)})
		}
		if b, ok := cb.tenants[k.Tenant]; ok {
			c.budgets = append(c.budgets, limit{billing.Subject{Kind: billing.Tenant, ID: k.Tenant}, billing.Micros(b.Day), billing.Micros(b.Month)})
		}
	}
	for _, s := range [...]billing.Subject{{Kind: billing.Pool, ID: c.pool}, {Kind: billing.Task, ID: a.task}} {
		if day, ok := cb.costBudgets[s]; ok && !a.ownsRoute() {
			c.budgets = append(c.budgets, limit{s: s, day: day}) // a BYOK request costs the platform nothing
		}
	}
	if c.account == nil && len(c.budgets) == 0 {
		return c, nil // nothing to check in the view
	}
	for _, l := range c.budgets {
		c.budgeted |= billing.KindsOf(l.s.Kind)
	}
	now := time.Now()
	if !h.view.Fresh(now) {
		h.metrics.BillingUnavailable.Inc()
		return nil, errBillingStale
	}
	if c.account != nil && !h.view.Fits(c.account.id, c.account.credit(), c.worst) {
		return nil, errBalanceExhausted // now: it would not be admitted after its wait either
	}
	return c, c.spent(h.view, now)
}

// counts reports whether a request (a) of a catalog that does not bill
// costs the platform something the catalog counts: its pool or its task
// type has a cost budget, or a model of its alias has a cost at at.
func (cb *compiledBilling) counts(a *admission, at time.Time) bool {
	if _, ok := cb.costBudgets[billing.Subject{Kind: billing.Pool, ID: a.policy.pool}]; ok {
		return true
	}
	if _, ok := cb.costBudgets[billing.Subject{Kind: billing.Task, ID: a.task}]; ok {
		return true
	}
	for i := range a.alias.Deployments {
		if _, ok := cb.table.Cost(a.alias.Deployments[i].Model, at); ok {
			return true
		}
	}
	return false
}

var errBalanceExhausted = &sluice.Error{Code: sluice.CodeBillingExhausted, Msg: "the billing account's balance is exhausted"}

// spent returns billing_quota_exhausted when one of c's budgets is spent.
func (c *charging) spent(v *billing.View, now time.Time) error {
	for _, l := range c.budgets {
		s := v.Spent(l.s, now)
		switch {
		case l.day > 0 && s.Day >= l.day:
			return budgetSpent(l.s, "daily")
		case l.month > 0 && s.Month >= l.month:
			return budgetSpent(l.s, "monthly")
		}
	}
	return nil
}

func budgetSpent(s billing.Subject, period string) error {
	what := [...]string{billing.Account: "billing account", billing.Key: "key", billing.Tenant: "tenant",
		billing.Pool: "pool", billing.Task: "task type"}[s.Kind]
	return &sluice.Error{Code: sluice.CodeBillingExhausted, Msg: fmt.Sprintf("the %s budget of %s %s is spent", period, what, s.ID)}
}

// limits are the request's limits with its billing account's concurrency.
func (c *charging) limits(units []store.Unit) []store.Unit {
	switch {
	case c == nil || c.account == nil:
		return units
	case len(units) == 0:
		return c.account.only
	}
	return append(units[:len(units):len(units)], c.account.unit)
}

// granted checks c again once the request holds its claim — requests
// that ran while it waited have been charged or hold their worst cases —
// and holds the request's worst case against the balance until it
// settles: the balance less every worst case held stays at or above
// −overdraft (on this replica's view), however many requests run at once.
func (h *Handler) granted(c *charging, req *sluice.Request) error {
	if c == nil {
		return nil
	}
	if c.account != nil && !h.view.Admit(req.ID, c.account.id, c.account.credit(), c.worst) {
		return errBalanceExhausted
	}
	return c.spent(h.view, time.Now())
}

// worstCase is what req may cost at most: its estimated prompt and all the
// output it allows (req.Reserve() is their sum), at the fixed price.
func (c *charging) worstCase(req *sluice.Request) billing.Micros {
	reserved := int64(req.Reserve())
	prompt := min(req.PromptEstimate(), reserved)
	u := sluice.Usage{PromptTokens: prompt, CompletionTokens: reserved - prompt, Measured: true}
	return c.price.Rates.Charge(u, nil)
}

// settle prices what the request's executions used and counts it in the
// view, in place of its reservation. It returns the record's charge: nil
// for a request that reached no upstream (a local refusal is never
// charged). Each execution is priced at the fixed price version and costed
// at its own model's cost in force when the request arrived; an answer
// whose usage was not measured is marked unmeasured and charged nothing
// for that answer.
func (c *charging) settle(v *billing.View, table *billing.Table, req *sluice.Request, out *Outcome, job *sluice.JobUsage) *sluice.Charge {
	if c == nil {
		return nil
	}
	local := c.local(req)
	defer func() { v.Settle(local) }() // also drops a reservation of a request that never ran
	if len(out.Executions) == 0 || c.job {
		return nil
	}
	rec := &sluice.Charge{}
	for i := range out.Executions {
		x := &out.Executions[i]
		if c.account != nil {
			local.Price = local.Price.Add(c.price.Rates.Charge(x.Usage, job))
		}
		cost, ok := table.Cost(x.Model, c.received)
		if !ok || !x.Owner.Platform() {
			continue // no cost known; or an owner's own credential (BYOK), whose upstream the owner pays
		}
		rec.CostVersion = cost.Version()
		local.Cost = local.Cost.Add(cost.Rates.Charge(x.Usage, job))
	}
	rec.Cost = int64(local.Cost)
	if c.account == nil {
		return rec
	}
	rec.Account, rec.Plan, rec.PriceVersion = c.account.id, c.account.plan, c.price.Version()
	rec.Unmeasured = !billing.Measured(out.Usage, job) && (out.Committed || job != nil)
	local.Account, rec.Price = c.account.id, int64(local.Price)
	return rec
}

// local is the charge of req that the view counts, before its amounts.
func (c *charging) local(req *sluice.Request) billing.Charge {
	return billing.Charge{RequestID: req.ID, Key: c.key, Tenant: c.tenant, Pool: c.pool, Task: c.task, At: c.received, Budgeted: c.budgeted}
}

// costTable is the table costs are read from; nil (no costs) without billing.
func (cb *compiledBilling) costTable() *billing.Table {
	if cb == nil {
		return nil
	}
	return cb.table
}

// jobCharging is what job's submit fixed for its billing, for the record
// of its end: its account and plan, the price of its alias in force when
// it was submitted. Nil when the catalog has no billing now.
func (h *Handler) jobCharging(snap *Snapshot, job *store.Job) *charging {
	cb := snap.billing
	if cb == nil {
		return nil
	}
	// Its budgets were checked at its submit; what it spends counts
	// against every one there may be now.
	c := &charging{key: job.KeyID, tenant: job.Tenant, task: job.TaskType, pool: job.Pool, received: job.Queued,
		budgeted: billing.KindsOf(billing.Account, billing.Key, billing.Tenant, billing.Pool, billing.Task)}
	if job.BillingAccount == "" {
		return c
	}
	c.account = cb.accounts[job.BillingAccount]
	if c.account == nil || c.account.plan != job.PricePlan {
		c.account = &billingAccount{id: job.BillingAccount, plan: job.PricePlan} // removed or moved since: charged as submitted
	}
	price, ok := cb.table.Price(job.PricePlan, job.Alias, job.Queued)
	if !ok {
		h.log.Error("an ended job's price is gone from the catalog; it is charged nothing", "job_id", job.ID, "plan", job.PricePlan, "alias", job.Alias)
		price = &noPrice
	}
	c.price = price
	return c
}

// noPrice charges nothing.
var noPrice billing.Price

// Billing reports whether the catalog has a billing section: requests are
// then admitted on the balance view, which must be kept fresh, and on the
// stored billing accounts and prices (Live.SetStoredBilling).
func (s *Snapshot) Billing() bool { return s.billing != nil }

// Prices are the price and cost versions the catalog declares, for the
// admin API to list beside the stored ones; nil without billing.
func (s *Snapshot) Prices() []billing.Price {
	if s.billing == nil {
		return nil
	}
	return slices.Clone(s.billing.declared)
}

// Allowance is a billing account's allowance per cycle.
type Allowance struct {
	Account string
	Amount  billing.Micros
	Cycle   string // ledger.CycleDay or ledger.CycleMonth
}

// Allowances are the allowances of the billing accounts admission uses
// (the catalog's and the stored ones), ordered by account: the cycles
// whose ends must be closed (see ledger.EntryAllowance).
func (s *Snapshot) Allowances() []Allowance {
	if s.billing == nil {
		return nil
	}
	var out []Allowance
	for _, a := range s.billing.accounts {
		if a.allowance > 0 {
			out = append(out, Allowance{Account: a.id, Amount: a.allowance, Cycle: a.cycle})
		}
	}
	slices.SortFunc(out, func(a, b Allowance) int { return strings.Compare(a.Account, b.Account) })
	return out
}

// BillingAccount reports whether id is a billing account keys of this
// snapshot may be bound to: the catalog's, or a stored one.
func (s *Snapshot) BillingAccount(id string) bool {
	return s.billing != nil && s.billing.accounts[id] != nil
}
