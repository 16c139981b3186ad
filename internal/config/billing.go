package config

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Billing is the catalog's billing section: what each alias is sold for
// under each price plan, what each upstream model costs the platform, and
// the billing accounts keys are charged to. The section is what turns
// billing on (see Billed). Balances are not here: they live in the ledger;
// billing accounts and price versions made through the admin API are
// stored there too, and merged with these when the gateway serves.
type Billing struct {
	Currency string           `yaml:"currency"` // ISO 4217 code of every amount; default USD
	Plans    []Plan           `yaml:"plans"`
	Costs    []Cost           `yaml:"costs"`
	Accounts []BillingAccount `yaml:"accounts"`
}

// Billed reports whether the catalog bills its keys: its billing section
// names a currency, a price plan or a billing account. Then every key must
// be bound to a billing account, of the catalog or of the admin API, so
// that `billing: {currency: USD}` alone bills with accounts and prices
// that all come from the admin API. A section with only costs bills no
// one: it counts what requests cost the platform.
func (b *Billing) Billed() bool { return b.Currency != "" || len(b.Plans) > 0 || len(b.Accounts) > 0 }

// Plan is a named price list: what a billing account on it pays per alias.
type Plan struct {
	ID     string  `yaml:"id"`
	Prices []Price `yaml:"prices"`
}

// Price is one version of an alias's rates in a plan, in force from
// EffectiveFrom (RFC 3339) until the alias's next version.
type Price struct {
	Alias            string `yaml:"alias"`
	billing.RateText `yaml:",inline"`
	EffectiveFrom    string `yaml:"effective_from"`
}

// Cost is one version of what an upstream model (a deployment's model)
// costs the platform, in force from EffectiveFrom (RFC 3339).
type Cost struct {
	Model            string `yaml:"model"`
	billing.RateText `yaml:",inline"`
	EffectiveFrom    string `yaml:"effective_from"`
}

// BillingAccount is a downstream customer: the keys bound to it share its
// balance (kept in the ledger), its plan, its concurrency and its budgets.
type BillingAccount struct {
	ID   string `yaml:"id"`
	Plan string `yaml:"plan"`
	// MaxInflight is how many of its requests may run at once (default 1):
	// it bounds how far concurrent requests can drive its balance below 0.
	MaxInflight int `yaml:"max_inflight"`
	// OnLimit is what a request finds at MaxInflight: wait (default) or
	// refuse (429 access_concurrency_exceeded).
	OnLimit string `yaml:"on_limit"`
	// Overdraft is how far below 0 its requests may take its balance
	// (default 0). Each request's worst case (its estimated input and
	// max_tokens at the plan's price) is held against the balance from
	// its admission to its settlement, which charges what it used
	// instead; a request is admitted only while the balance (plus the
	// allowance) less every worst case held, its own included, stays at
	// or above −overdraft.
	Overdraft Money `yaml:"overdraft"`
	// Allowance is what the account may spend each Cycle (day or month,
	// UTC; month by default) before its prepaid balance: a plan's
	// allowance that resets. 0 = none: only the prepaid balance.
	Allowance Money   `yaml:"allowance"`
	Cycle     string  `yaml:"cycle"`
	Budgets   Budgets `yaml:"budgets"`
}

// Ledger is a as the ledger store holds the accounts of the admin API.
func (a *BillingAccount) Ledger() ledger.BillingAccount {
	return ledger.BillingAccount{ID: a.ID, Plan: a.Plan, MaxInflight: a.MaxInflight, OnLimit: a.OnLimit, Overdraft: a.Overdraft.Micros(),
		Allowance: a.Allowance.Micros(), Cycle: a.Cycle, Budgets: ledger.Budgets{Day: a.Budgets.Day.Micros(), Month: a.Budgets.Month.Micros()}}
}

// Budgets bound what is billed per UTC day and month; 0 = no budget. Once
// one is spent, requests are refused with billing_quota_exhausted.
type Budgets struct {
	Day   Money `yaml:"day"`
	Month Money `yaml:"month"`
}

// Money is an amount written as a decimal string ("12.50"), held in
// micro-units of billing.currency.
type Money billing.Micros

// UnmarshalYAML parses the amount with billing.ParseMoney; negative
// amounts, and amounts beyond billing.MaxAmount, are refused. Errors are
// *yaml.TypeError, located, so Decode reports them with every other
// problem.
func (m *Money) UnmarshalYAML(n *yaml.Node) error {
	fail := func(msg string) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
	}
	if n.Kind != yaml.ScalarNode {
		return fail(`want an amount such as "12.50"`)
	}
	v, err := billing.ParseMoney(n.Value)
	if err == nil {
		err = billing.CheckBound(v)
	}
	switch {
	case err != nil:
		return fail(err.Error())
	case v < 0:
		return fail(fmt.Sprintf("amount %q must not be negative", n.Value))
	}
	*m = Money(v)
	return nil
}

// MarshalYAML writes the amount as UnmarshalYAML reads it.
func (m Money) MarshalYAML() (any, error) { return billing.Micros(m).String(), nil }

// Micros is the amount.
func (m Money) Micros() billing.Micros { return billing.Micros(m) }

// applyBillingDefaults fills the billing section's defaults: currency USD
// when it bills; accounts max_inflight 1, on_limit wait, and cycle month
// with an allowance.
func applyBillingDefaults(b *Billing) {
	if b.Billed() {
		setString(&b.Currency, "USD")
	}
	for i := range b.Accounts {
		a := &b.Accounts[i]
		d := a.Ledger().WithDefaults()
		a.MaxInflight, a.OnLimit, a.Cycle = d.MaxInflight, d.OnLimit, d.Cycle
	}
}

// billing checks the billing section and indexes its plans and accounts
// for the keys; it runs after models (prices name aliases).
func (v *validator) billing() {
	b := &v.c.Billing
	if b.Currency != "" && !isCurrency(b.Currency) {
		v.addf("billing.currency", "want an ISO 4217 code such as USD, got %q", b.Currency)
	}
	v.plans = make(map[string]bool)
	for id := range v.unique("billing.plans", "id", len(b.Plans), func(i int) string { return b.Plans[i].ID }) {
		v.plans[id] = true
	}
	for i, p := range b.Plans {
		at := fmt.Sprintf("billing.plans[%d]", i)
		if len(p.Prices) == 0 {
			v.addf(at+".prices", "must list at least one price")
		}
		versions := make(map[string]int) // alias and effective_from → first price
		for j, pr := range p.Prices {
			path := fmt.Sprintf("%s.prices[%d]", at, j)
			switch {
			case pr.Alias == "":
				v.addf(path+".alias", "required")
			case !v.aliases[pr.Alias]:
				v.addf(path+".alias", "unknown model alias %q", pr.Alias)
			}
			v.version(path, pr.RateText, pr.EffectiveFrom, pr.Alias, versions)
		}
	}
	models := make(map[string]bool) // the deployments' upstream models
	for _, m := range v.c.Models {
		for _, d := range m.Deployments {
			models[d.Model] = true
		}
	}
	versions := make(map[string]int)
	for i, c := range b.Costs {
		path := fmt.Sprintf("billing.costs[%d]", i)
		switch {
		case c.Model == "":
			v.addf(path+".model", "required")
		case !models[c.Model]:
			v.addf(path+".model", "no deployment uses model %q", c.Model)
		}
		v.version(path, c.RateText, c.EffectiveFrom, c.Model, versions)
	}
	v.unique("billing.accounts", "id", len(b.Accounts), func(i int) string { return b.Accounts[i].ID })
	for i, a := range b.Accounts {
		at := fmt.Sprintf("billing.accounts[%d]", i)
		switch {
		case a.Plan == "":
			v.addf(at+".plan", "required")
		case !v.plans[a.Plan]:
			v.addf(at+".plan", "unknown plan %q", a.Plan)
		}
		if a.MaxInflight < 0 {
			v.addf(at+".max_inflight", "must be >= 0")
		}
		if a.OnLimit != sluice.OnLimitWait && a.OnLimit != sluice.OnLimitRefuse {
			v.addf(at+".on_limit", "must be %s or %s, got %q", sluice.OnLimitWait, sluice.OnLimitRefuse, a.OnLimit)
		}
		switch {
		case a.Allowance > 0 && a.Cycle != ledger.CycleDay && a.Cycle != ledger.CycleMonth:
			v.addf(at+".cycle", "must be %s or %s, got %q", ledger.CycleDay, ledger.CycleMonth, a.Cycle)
		case a.Allowance == 0 && a.Cycle != "":
			v.addf(at+".cycle", "needs an allowance: the cycle is the allowance's")
		}
	}
	for i, t := range v.c.Tenants {
		v.budgets(fmt.Sprintf("tenants[%d].budgets", i), t.Budgets)
	}
	for i, p := range v.c.Pools {
		v.costBudget(fmt.Sprintf("pools[%d].cost_budget_day", i), p.CostBudgetDay)
	}
	for i, tt := range v.c.TaskTypes {
		v.costBudget(fmt.Sprintf("task_types[%d].cost_budget_day", i), tt.CostBudgetDay)
	}
}

// version checks one version of rates for subject (an alias or a model):
// its rates, its start, and that no other version of subject starts then.
func (v *validator) version(path string, rates billing.RateText, from, subject string, first map[string]int) {
	if _, err := rates.Rates(); err != nil {
		v.addf(path, "%v", err)
	}
	t, err := time.Parse(time.RFC3339, from)
	if err != nil {
		v.addf(path+".effective_from", "want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", from)
		return
	}
	k := subject + "\x00" + t.UTC().String()
	if j, dup := first[k]; dup {
		v.addf(path+".effective_from", "%q already has a version from %s (entry %d)", subject, from, j)
		return
	}
	first[k] = len(first)
}

// budgets checks a budgets block: it needs a billed catalog, whose charges
// it counts.
func (v *validator) budgets(at string, b Budgets) {
	if b != (Budgets{}) && !v.c.Billing.Billed() {
		v.addf(at, "needs a billing section (at least billing.currency): budgets count what is billed")
	}
}

// costBudget checks a platform cost budget: it needs billing.costs, which
// price what the platform pays.
func (v *validator) costBudget(at string, m Money) {
	if m != 0 && len(v.c.Billing.Costs) == 0 {
		v.addf(at, "needs billing.costs: the budget counts what upstream models cost")
	}
}

// keyBilling checks a key's billing account and budgets. The account may
// be one the catalog does not declare: billing accounts are also made
// through the admin API, which the catalog does not see. A key bound to
// an account known nowhere is refused at admission (access_key_unbound),
// and the gateway logs it; a key of the admin API is checked against the
// stored accounts too (pipeline's Snapshot.CheckKey).
func (v *validator) keyBilling(at string, k *Key) {
	if k.BillingAccount != "" && !v.c.Billing.Billed() {
		v.addf(field(at, "billing_account"), "needs a billing section (at least billing.currency): the catalog bills no one")
	}
	v.budgets(field(at, "budgets"), k.Budgets)
}

// isCurrency reports whether s looks like an ISO 4217 code: three capitals.
func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}
