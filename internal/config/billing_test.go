package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/billing"
)

// billingYAML is baseYAML billed: one plan pricing fast, a cost for its
// model, one account, the web key bound to it.
const billingYAML = baseYAML + `billing:
  plans:
    - id: standard
      prices:
        - {alias: fast, input: "0.60", output: "2.40", effective_from: "2026-01-01T00:00:00Z"}
  costs:
    - {model: gpt-4o-mini, input: "0.15", output: "0.60", effective_from: "2026-01-01T00:00:00Z"}
  accounts:
    - {id: acme, plan: standard}
`

func loadBilling(t *testing.T, doc string) (*Catalog, error) {
	t.Helper()
	doc = strings.Replace(doc, "{id: web-app, secret_env: SLUICE_KEY_WEB, models: [fast]}", "{id: web-app, secret_env: SLUICE_KEY_WEB, models: [fast], billing_account: acme}", 1)
	return Load([]byte(doc), lookup(testEnv))
}

func TestBillingSection(t *testing.T) {
	c, err := loadBilling(t, billingYAML)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	b := c.Billing
	if !b.Billed() || b.Currency != "USD" {
		t.Errorf("billed %v currency %q, want billed in USD by default", b.Billed(), b.Currency)
	}
	if a := b.Accounts[0]; a.MaxInflight != 1 || a.OnLimit != "wait" {
		t.Errorf("account defaults = max_inflight %d on_limit %q, want 1 and wait", a.MaxInflight, a.OnLimit)
	}
	if r, _ := b.Plans[0].Prices[0].Rates(); r.Input != 600_000 || r.CacheRead != 600_000 {
		t.Errorf("fast's rates = %+v, want input 0.60 and cache_read falling back to it", r)
	}
	if c.Keys[0].BillingAccount != "acme" {
		t.Errorf("web-app's billing account = %q", c.Keys[0].BillingAccount)
	}
}

func TestBillingValidation(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"UnknownPlan", "{id: acme, plan: standard}", "{id: acme, plan: gold}", `billing.accounts[0].plan: unknown plan "gold"`},
		{"UnknownAlias", "{alias: fast, input", "{alias: slow, input", `billing.plans[0].prices[0].alias: unknown model alias "slow"`},
		{"UnknownModel", "{model: gpt-4o-mini, input", "{model: gpt-9, input", `billing.costs[0].model: no deployment uses model "gpt-9"`},
		{"BadRate", `output: "2.40"`, `output: "2.4e1"`, `billing.plans[0].prices[0]: output: amount "2.4e1"`},
		{"SevenDecimals", `input: "0.15"`, `input: "0.1500001"`, `billing.costs[0]: input: amount "0.1500001": at most 6 decimals`},
		{"NegativeRate", `input: "0.60"`, `input: "-0.60"`, `billing.plans[0].prices[0]: input: -0.60 is negative`},
		{"BadEffectiveFrom", `output: "2.40", effective_from: "2026-01-01T00:00:00Z"`, `output: "2.40", effective_from: "2026-01-01"`, `billing.plans[0].prices[0].effective_from: want an RFC 3339 time`},
		{"DuplicateVersion", `output: "2.40", effective_from: "2026-01-01T00:00:00Z"}`,
			`output: "2.40", effective_from: "2026-01-01T00:00:00Z"}
        - {alias: fast, input: "0.70", effective_from: "2026-01-01T01:00:00+01:00"}`,
			`billing.plans[0].prices[1].effective_from: "fast" already has a version from 2026-01-01T01:00:00+01:00`},
		{"OnLimit", "{id: acme, plan: standard}", "{id: acme, plan: standard, on_limit: queue}", `billing.accounts[0].on_limit: must be wait or refuse, got "queue"`},
		{"Currency", "billing:\n", "billing:\n  currency: usd\n", `billing.currency: want an ISO 4217 code such as USD, got "usd"`},
		{"AllowanceCycle", "{id: acme, plan: standard}", `{id: acme, plan: standard, allowance: "25.00", cycle: week}`, `billing.accounts[0].cycle: must be day or month, got "week"`},
		{"CycleWithoutAllowance", "{id: acme, plan: standard}", "{id: acme, plan: standard, cycle: day}", `billing.accounts[0].cycle: needs an allowance`},
		{"NegativeAllowance", "{id: acme, plan: standard}", `{id: acme, plan: standard, allowance: "-1.00"}`, `amount "-1.00" must not be negative`},
		{"AllowancePastTheBound", "{id: acme, plan: standard}", `{id: acme, plan: standard, allowance: "1000000000000.01"}`,
			`amount 1000000000000.01 is beyond the bound of ±1000000000000.00`},
		{"OverdraftPastTheBound", "{id: acme, plan: standard}", `{id: acme, plan: standard, overdraft: "9223372036854.775807"}`,
			`amount 9223372036854.775807 is beyond the bound of ±1000000000000.00`},
		{"RatePastTheBound", `input: "0.60"`, `input: "1000000000001"`, `billing.plans[0].prices[0]: input: amount 1000000000001.00 is beyond the bound`},
		{"DuplicateAccount", "    - {id: acme, plan: standard}\n", "    - {id: acme, plan: standard}\n    - {id: acme, plan: standard}\n", `billing.accounts[1].id: duplicate id "acme"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(billingYAML, "{id: web-app, secret_env: SLUICE_KEY_WEB, models: [fast]}", "{id: web-app, secret_env: SLUICE_KEY_WEB, models: [fast], billing_account: acme}", 1)
			if !strings.Contains(doc, tt.from) {
				t.Fatalf("the catalog has no %q", tt.from)
			}
			_, err := Load([]byte(strings.Replace(doc, tt.from, tt.to, 1)), lookup(testEnv))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// The billing section is what bills: its currency alone bills every key,
// with billing accounts and prices from the admin API, which the catalog
// does not see — so a key may name an account the catalog does not
// declare. A section with only costs bills no one.
func TestBillingFromTheAdminAPI(t *testing.T) {
	doc := baseYAML + "billing: {currency: EUR}\n"
	c, err := Load([]byte(strings.Replace(doc, "models: [fast]}", "models: [fast], billing_account: stored-acct}", 1)), lookup(testEnv))
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if !c.Billing.Billed() || c.Keys[0].BillingAccount != "stored-acct" {
		t.Errorf("billed %v, key bound to %q; want billed, bound to stored-acct", c.Billing.Billed(), c.Keys[0].BillingAccount)
	}
	costs := baseYAML + "billing:\n  costs:\n    - {model: gpt-4o-mini, input: \"0.15\", effective_from: \"2026-01-01T00:00:00Z\"}\n"
	if c, err := Load([]byte(costs), lookup(testEnv)); err != nil || c.Billing.Billed() {
		t.Errorf("costs only: Load = %v, billed %v; want valid and unbilled", err, c != nil && c.Billing.Billed())
	}
}

// Budgets are amounts, checked as they are decoded: a bad one is reported
// at its line.
func TestBudgetsDecode(t *testing.T) {
	doc := billingYAML + "tenants:\n  - id: web\n    budgets: {day: \"1.5\", month: \"-3\"}\n"
	_, err := loadBilling(t, doc)
	line := strings.Count(doc, "\n") // the last line
	want := `line ` + strconv.Itoa(line) + `: tenants[0].budgets.month: amount "-3" must not be negative`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load = %v, want %q", err, want)
	}
	c, err := loadBilling(t, strings.Replace(doc, `"-3"`, `"30.25"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tenants[0].Budgets; got.Day.Micros() != 1_500_000 || got.Month.Micros() != 30*billing.Unit+250_000 {
		t.Errorf("budgets = %+v", got)
	}
}

// What needs a billing section is refused without one, rather than
// accepted and ignored.
func TestBillingNeeded(t *testing.T) {
	for doc, want := range map[string]string{
		strings.Replace(baseYAML, "models: [fast]}", "models: [fast], billing_account: acme}", 1):              `keys[0].billing_account: needs a billing section`,
		strings.Replace(baseYAML, "models: [fast]}", `models: [fast], budgets: {day: "1"}}`, 1):                `keys[0].budgets: needs a billing section`,
		strings.Replace(baseYAML, "[org-1, anthropic-k1]}", `[org-1, anthropic-k1], cost_budget_day: "5"}`, 1): `pools[0].cost_budget_day: needs billing.costs`,
	} {
		if _, err := Load([]byte(doc), lookup(testEnv)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want %q", err, want)
		}
	}
}

// An allowance resets every cycle: month unless the catalog says day.
func TestBillingAllowance(t *testing.T) {
	doc := strings.Replace(billingYAML, "    - {id: acme, plan: standard}\n",
		"    - {id: acme, plan: standard, allowance: \"25.00\"}\n    - {id: daily, plan: standard, allowance: \"0.50\", cycle: day}\n", 1)
	c, err := loadBilling(t, doc)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if a := c.Billing.Accounts[0]; a.Allowance.Micros() != 25*billing.Unit || a.Cycle != "month" {
		t.Errorf("acme's allowance = %s per %q, want 25.00 per month", a.Allowance.Micros(), a.Cycle)
	}
	if a := c.Billing.Accounts[1]; a.Allowance.Micros() != billing.Unit/2 || a.Cycle != "day" {
		t.Errorf("daily's allowance = %s per %q, want 0.50 per day", a.Allowance.Micros(), a.Cycle)
	}
}
