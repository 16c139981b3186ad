package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// billingSynopses are the usage lines of "sluice billing …".
var billingSynopses = map[string]string{
	"accounts":    "",
	"show":        "ACCOUNT",
	"create":      "ACCOUNT --plan PLAN " + accountFlagsSynopsis,
	"update":      "ACCOUNT [--plan PLAN] " + accountFlagsSynopsis,
	"bind":        "ACCOUNT (KEY_ID… | --selector SELECTOR [--dry-run])",
	"unbind":      "(KEY_ID… | --selector SELECTOR [--dry-run])",
	"topup":       "ACCOUNT AMOUNT [--reason TEXT] [--idempotency-key KEY]",
	"adjust":      "ACCOUNT AMOUNT --reason TEXT [--idempotency-key KEY]",
	"refund":      "ACCOUNT REQUEST_ID --reason TEXT",
	"statement":   "ACCOUNT [--from RFC3339] [--to RFC3339] [--limit N]",
	"prices":      "[--kind price|cost] [--plan PLAN] [--alias ALIAS] [--model MODEL]",
	"apply-price": "(--plan PLAN --alias ALIAS | --model MODEL) RATES [--effective-from RFC3339]",
	"report":      "[--by account,key,end_user,alias,model,day] [--from RFC3339] [--to RFC3339] [--account ID] [--key ID]",
	"suspend":     suspendSynopsis,
	"resume":      resumeSynopsis,
}

const accountFlagsSynopsis = "[--max-inflight N] [--on-limit wait|refuse] [--overdraft AMOUNT] [--allowance AMOUNT [--cycle day|month]] [--budget-day AMOUNT] [--budget-month AMOUNT]"

// billingCommand runs "sluice billing …".
func (c *cli) billingCommand(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing billing subcommand (accounts, show, create, update, bind, unbind, topup, adjust, refund, statement, prices, apply-price, report, suspend, resume)"}
	}
	sub, args := args[0], args[1:]
	cmd := c.command("billing "+sub, billingSynopses[sub])
	switch sub {
	case "accounts":
		return cmd.billingAccounts(args)
	case "show":
		return cmd.billingShow(args)
	case "create", "update":
		return cmd.billingPut(args, sub == "create")
	case "bind", "unbind":
		return cmd.billingBind(args, sub == "bind")
	case "topup", "adjust":
		return cmd.billingPost(args, sub)
	case "refund":
		return cmd.billingRefund(args)
	case "statement":
		return cmd.billingStatement(args)
	case "prices":
		return cmd.billingPrices(args)
	case "apply-price":
		return cmd.billingApplyPrice(args)
	case "report":
		return cmd.billingReport(args)
	case "suspend", "resume":
		return cmd.billingSuspend(args, sub == "suspend")
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown billing subcommand %q", sub)}
}

// moneyFlag defines a flag holding an amount, read with billing.ParseMoney.
func moneyFlag(fs *flag.FlagSet, name, help string) **billing.Micros {
	v := new(*billing.Micros)
	fs.Func(name, help, func(s string) error {
		m, err := billing.ParseMoney(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		*v = &m
		return nil
	})
	return v
}

func (cmd *command) billingAccounts(args []string) error {
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	all, err := cl.BillingAccounts(cmd.ctx)
	if err != nil {
		return err
	}
	if cmd.json {
		return cmd.printJSON(all)
	}
	t := newTable(cmd.stdout)
	t.row("ID", "PLAN", "BALANCE", "SPENT TODAY", "SPENT THIS MONTH", "MAX INFLIGHT", "ON LIMIT", "SOURCE")
	for _, a := range all {
		t.row(a.ID, a.Plan, a.Balance.String(), a.Spent.Day.Price.String(), a.Spent.Month.Price.String(), strconv.Itoa(a.MaxInflight), a.OnLimit, a.Source)
	}
	return t.flush()
}

func (cmd *command) billingShow(args []string) error {
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	a, err := cl.BillingAccount(cmd.ctx, id)
	if err != nil {
		return err
	}
	return cmd.printAccount(a)
}

func (cmd *command) printAccount(a *admin.BillingAccount) error {
	if cmd.json {
		return cmd.printJSON(a)
	}
	t := newTable(cmd.stdout)
	t.row("ID:", a.ID)
	t.row("Source:", a.Source)
	t.row("Plan:", a.Plan)
	t.row("Balance:", a.Balance.String())
	t.row("Spent today:", a.Spent.Day.Price.String()+" (cost "+a.Spent.Day.Cost.String()+")")
	t.row("Spent this month:", a.Spent.Month.Price.String()+" (cost "+a.Spent.Month.Cost.String()+")")
	t.row("Max in flight:", strconv.Itoa(a.MaxInflight)+", then "+a.OnLimit)
	t.row("Overdraft:", a.Overdraft.String())
	if a.Allowance > 0 {
		t.row("Allowance:", a.Allowance.String()+" per "+a.Cycle)
	}
	if c := a.Current; c != nil {
		t.row("This cycle:", c.Start.Format(time.RFC3339)+" to "+c.End.Format(time.RFC3339)+": spent "+c.Spent.String()+
			", allowance left "+c.AllowanceLeft.String()+", prepaid balance "+c.PrepaidBalance.String())
	}
	t.row("Available:", a.Available.String())
	t.row("Budgets:", "day "+amountOrNone(a.Budgets.Day)+", month "+amountOrNone(a.Budgets.Month))
	t.row("Suspended:", suspendedSince(a.Suspension))
	if a.Suspension != nil {
		t.row("Reason:", a.Suspension.Reason)
	}
	return t.flush()
}

func amountOrNone(m billing.Micros) string {
	if m == 0 {
		return "none"
	}
	return m.String()
}

// billingPut runs "billing create|update": create refuses an account that
// exists; update changes only the flags given.
func (cmd *command) billingPut(args []string, create bool) error {
	plan := cmd.fs.String("plan", "", "the price `PLAN` (required to create)")
	maxInflight := cmd.fs.Int("max-inflight", 0, "how many of its requests may run at once (`N`; default 1)")
	onLimit := cmd.fs.String("on-limit", "", "at max-inflight: wait (default) or refuse (`ACTION`)")
	overdraft := moneyFlag(cmd.fs, "overdraft", "how far below 0 its requests may take the balance (`AMOUNT`; default 0)")
	allowance := moneyFlag(cmd.fs, "allowance", "what the plan grants per cycle besides the prepaid balance (`AMOUNT`; 0 = none)")
	cycle := cmd.fs.String("cycle", "", "the allowance's cycle: day or month (`CYCLE`)")
	day := moneyFlag(cmd.fs, "budget-day", "cap of its spend per UTC day (`AMOUNT`; 0 = none)")
	month := moneyFlag(cmd.fs, "budget-month", "cap of its spend per UTC month (`AMOUNT`; 0 = none)")
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	var spec admin.BillingAccountSpec
	cur, err := cl.BillingAccount(cmd.ctx, id)
	var apiErr *APIError
	switch {
	case err == nil && create:
		return fmt.Errorf("billing account %q exists: use 'sluice billing update'", id)
	case err == nil:
		spec = cur.BillingAccountSpec
	case !errors.As(err, &apiErr) || apiErr.Status != 404:
		return err
	case !create:
		return err
	case *plan == "":
		return cmd.usage("--plan is required")
	}
	seen := map[string]bool{}
	cmd.fs.Visit(func(f *flag.Flag) { seen[f.Name] = true })
	if seen["plan"] {
		spec.Plan = *plan
	}
	if seen["max-inflight"] {
		spec.MaxInflight = *maxInflight
	}
	if seen["on-limit"] {
		spec.OnLimit = *onLimit
	}
	if *overdraft != nil {
		spec.Overdraft = **overdraft
	}
	if *allowance != nil {
		spec.Allowance = **allowance
	}
	switch {
	case seen["cycle"]:
		spec.Cycle = *cycle
	case spec.Allowance == 0:
		spec.Cycle = "" // --allowance 0 takes the cycle with it
	}
	if *day != nil {
		spec.Budgets.Day = **day
	}
	if *month != nil {
		spec.Budgets.Month = **month
	}
	a, err := cl.PutBillingAccount(cmd.ctx, id, spec)
	if err != nil {
		return err
	}
	return cmd.printAccount(a)
}

// billingBind runs "billing bind ACCOUNT KEY…|--selector" and "billing
// unbind KEY…|--selector": a key at a time through its settings, or a
// batch (which can be a dry run).
func (cmd *command) billingBind(args []string, bind bool) error {
	selector := cmd.fs.String("selector", "", "label `SELECTOR` of the keys, e.g. team=web,env!=prod")
	dryRun := cmd.fs.Bool("dry-run", false, "with --selector: change nothing, list the keys it would change")
	minPos := 0
	if bind {
		minPos = 1
	}
	pos, err := cmd.parse(args, minPos, 1<<20)
	if err != nil {
		return err
	}
	var account string
	if bind {
		account, pos = pos[0], pos[1:]
	}
	switch {
	case (*selector == "") == (len(pos) == 0):
		return cmd.usage("name the keys, or give --selector, not both")
	case *dryRun && *selector == "":
		return cmd.usage("--dry-run goes with --selector")
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	if *selector != "" {
		res, err := cl.Batch(cmd.ctx, admin.Batch{Selector: *selector, Operation: admin.BatchSetBillingAccount, BillingAccount: &account, DryRun: *dryRun})
		if err != nil {
			return err
		}
		if cmd.json {
			return cmd.printJSON(res)
		}
		return cmd.printBatch(res)
	}
	var out []*admin.KeyRecord
	for _, id := range pos {
		k, err := cl.UpdateKey(cmd.ctx, id, admin.KeyChange{BillingAccount: &account})
		if err != nil {
			return fmt.Errorf("key %s: %w", id, err)
		}
		out = append(out, k)
	}
	if cmd.json {
		return cmd.printJSON(out)
	}
	for _, k := range out {
		if bind {
			fmt.Fprintf(cmd.stdout, "key %s is bound to billing account %s\n", k.ID, account)
		} else {
			fmt.Fprintf(cmd.stdout, "key %s is bound to no billing account\n", k.ID)
		}
	}
	return nil
}

// billingPost runs "billing topup|adjust ACCOUNT AMOUNT". Without
// --idempotency-key the CLI makes one, and names it when the call fails:
// rerun with it, and the change is made at most once.
func (cmd *command) billingPost(args []string, action string) error {
	reason := cmd.fs.String("reason", "", "why (`TEXT`; required for an adjustment)")
	key := cmd.fs.String("idempotency-key", "", "names the change: a rerun with the same `KEY` changes nothing more (default: a new key)")
	pos, err := cmd.parse(negativeLast(args), 2, 2)
	if err != nil {
		return err
	}
	amount, err := billing.ParseMoney(pos[1])
	if err != nil {
		return cmd.usage("%v", err)
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	if *key == "" {
		*key = "cli_" + rand.Text()
	}
	change := admin.MoneyChange{Amount: amount, Reason: *reason}
	post := cl.TopUp
	if action == "adjust" {
		post = cl.Adjust
	}
	p, err := post(cmd.ctx, pos[0], *key, change)
	if err != nil {
		return fmt.Errorf("%w\nto retry without posting twice: sluice billing %s %s %s --idempotency-key %s", err, action, pos[0], pos[1], *key)
	}
	return cmd.printPosted(p)
}

// negativeLast moves a negative amount ("-0.50", which the flag package
// would take for a flag) after a "--" at the end, where it is positional.
func negativeLast(args []string) []string {
	var rest, amounts []string
	for _, a := range args {
		if len(a) > 1 && a[0] == '-' && (a[1] >= '0' && a[1] <= '9' || a[1] == '.') {
			amounts = append(amounts, a)
		} else {
			rest = append(rest, a)
		}
	}
	if len(amounts) == 0 {
		return args
	}
	return append(append(rest, "--"), amounts...)
}

func (cmd *command) billingRefund(args []string) error {
	reason := cmd.fs.String("reason", "", "why (`TEXT`; required)")
	pos, err := cmd.parse(args, 2, 2)
	if err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	p, err := cl.Refund(cmd.ctx, pos[0], admin.Refund{RequestID: pos[1], Reason: *reason})
	if err != nil {
		return err
	}
	return cmd.printPosted(p)
}

func (cmd *command) printPosted(p *admin.Posted) error {
	if cmd.json {
		return cmd.printJSON(p)
	}
	e := p.Entry
	if p.Applied {
		fmt.Fprintf(cmd.stdout, "%s of %s on %s (%s); balance %s\n", e.Kind, e.Amount, e.Account, e.RequestID, p.Balance)
	} else {
		fmt.Fprintf(cmd.stdout, "%s %s was made before (%s of %s on %s); nothing changed; balance %s\n",
			e.Kind, e.RequestID, when(e.At), e.Amount, e.Account, p.Balance)
	}
	return nil
}

func (cmd *command) billingStatement(args []string) error {
	var from, to time.Time
	timeFlag(cmd, &from, "from", "entries at or after `TIME` (RFC 3339)")
	timeFlag(cmd, &to, "to", "… and before `TIME` (RFC 3339)")
	limit := cmd.fs.Int("limit", 0, "at most `N` entries (default 1000)")
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	st, err := cl.Statement(cmd.ctx, id, from, to, *limit)
	if err != nil {
		return err
	}
	if cmd.json {
		return cmd.printJSON(st)
	}
	t := newTable(cmd.stdout)
	t.row("AT", "KIND", "AMOUNT", "REQUEST", "REASON", "ADMIN")
	for _, e := range st.Entries {
		t.row(when(e.At), string(e.Kind), e.Amount.String(), e.RequestID, orDash(e.Reason), orDash(e.Admin))
	}
	if err := t.flush(); err != nil {
		return err
	}
	more := ""
	if st.Truncated {
		more = " (more entries follow: raise --limit or narrow --from/--to)"
	}
	fmt.Fprintf(cmd.stdout, "\n%d entries, total %s%s; balance now %s\n", len(st.Entries), st.Total, more, st.Balance)
	return nil
}

func (cmd *command) billingPrices(args []string) error {
	var q PriceQuery
	cmd.fs.StringVar(&q.Kind, "kind", "", "price or cost (`KIND`)")
	cmd.fs.StringVar(&q.Plan, "plan", "", "only this `PLAN`")
	cmd.fs.StringVar(&q.Alias, "alias", "", "only this `ALIAS`")
	cmd.fs.StringVar(&q.Model, "model", "", "only this upstream `MODEL`")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	prices, err := cl.Prices(cmd.ctx, q)
	if err != nil {
		return err
	}
	if cmd.json {
		return cmd.printJSON(prices)
	}
	t := newTable(cmd.stdout)
	t.row("KIND", "PLAN/ALIAS|MODEL", "EFFECTIVE FROM", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "REASONING", "REQUEST", "SOURCE", "")
	for _, p := range prices {
		what := p.Model
		if p.Kind == billing.KindPrice {
			what = p.Plan + "/" + p.Alias
		}
		r := p.Rates
		inForce := ""
		if p.InForce {
			inForce = "in force"
		}
		t.row(string(p.Kind), what, when(p.EffectiveFrom), r.Input.String(), r.Output.String(), r.CacheRead.String(), r.CacheWrite.String(),
			r.Reasoning.String(), r.Request.String(), p.Source, inForce)
	}
	return t.flush()
}

func (cmd *command) billingApplyPrice(args []string) error {
	var spec admin.PriceSpec
	cmd.fs.StringVar(&spec.Plan, "plan", "", "the price `PLAN` (a price: with --alias)")
	cmd.fs.StringVar(&spec.Alias, "alias", "", "the `ALIAS` the plan sells")
	cmd.fs.StringVar(&spec.Model, "model", "", "the upstream `MODEL` whose cost this is (a cost)")
	for _, r := range []struct {
		name string
		to   *string
	}{
		{"input", &spec.Input}, {"output", &spec.Output}, {"cache-read", &spec.CacheRead}, {"cache-write", &spec.CacheWrite},
		{"reasoning", &spec.Reasoning}, {"request", &spec.Request}, {"video-second", &spec.VideoSecond}, {"video-item", &spec.VideoItem},
	} {
		cmd.fs.StringVar(r.to, r.name, "", "rate (`AMOUNT`; tokens per million)")
	}
	timeFlag(cmd, &spec.EffectiveFrom, "effective-from", "in force from `TIME` (RFC 3339; default now; never in the past)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case spec.Model != "" && spec.Plan == "" && spec.Alias == "":
		spec.Kind = billing.KindCost
	case spec.Model == "" && spec.Plan != "" && spec.Alias != "":
		spec.Kind = billing.KindPrice
	default:
		return cmd.usage("give --plan and --alias (a price) or --model (a cost)")
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	p, err := cl.ApplyPrice(cmd.ctx, spec)
	if err != nil {
		return err
	}
	if cmd.json {
		return cmd.printJSON(p)
	}
	fmt.Fprintf(cmd.stdout, "%s %s applied: input %s, output %s per million tokens, %s per request\n",
		p.Kind, p.Version, p.Rates.Input, p.Rates.Output, p.Rates.Request)
	return nil
}

func (cmd *command) billingReport(args []string) error {
	var q SpendQuery
	timeFlag(cmd, &q.From, "from", "requests started at or after `TIME` (RFC 3339; default: the start of this UTC month)")
	timeFlag(cmd, &q.To, "to", "… and before `TIME` (RFC 3339)")
	by := cmd.fs.String("by", "account", "group by these `DIMENSIONS`: account, key, tenant, end_user, task_type, pool, alias, model, day")
	cmd.fs.StringVar(&q.Account, "account", "", "only this billing `ACCOUNT`")
	cmd.fs.StringVar(&q.KeyID, "key", "", "only this key (`ID`)")
	cmd.fs.StringVar(&q.Tenant, "tenant", "", "only the keys of this `TENANT`")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	for _, d := range admin.SplitList(*by) {
		q.By = append(q.By, ledger.Dimension(d))
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	rep, err := cl.Spend(cmd.ctx, q)
	if err != nil {
		return err
	}
	if cmd.json {
		return cmd.printJSON(rep)
	}
	fmt.Fprintf(cmd.stdout, "Billed requests from %s to %s, in %s\n\n", when(rep.From), when(rep.To), rep.Currency)
	t := groupedTable(cmd.stdout, rep.By, "REQUESTS", "UNMEASURED", "TOKENS", "CACHED", "PRICE", "COST", "MARGIN")
	cells := func(r admin.SpendRow) []string {
		out := groupCells(rep.By, map[ledger.Dimension]string{ledger.ByAccount: r.Account, ledger.ByKey: r.KeyID, ledger.ByTenant: r.Tenant,
			ledger.ByEndUser: r.EndUser, ledger.ByTaskType: r.TaskType, ledger.ByPool: r.Pool, ledger.ByAlias: r.Alias,
			ledger.ByModel: r.Model, ledger.ByDay: r.Day})
		return append(out, strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.Unmeasured, 10), strconv.FormatInt(r.Tokens, 10),
			strconv.FormatInt(r.Cached, 10), r.Price.String(), r.Cost.String(), r.Margin.String())
	}
	for _, r := range rep.Rows {
		t.row(cells(r)...)
	}
	if len(rep.By) > 0 {
		total := cells(rep.Total)
		total[0] = "(total)"
		t.row(total...)
	}
	return t.flush()
}
