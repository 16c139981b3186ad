package sqlledger

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// noCharge is what an unbilled record writes in the money columns.
var noCharge sluice.Charge

const (
	entryColumns = `request_id, kind, account, amount_micros, reason, admin, at`
	entryParams  = 7
	totalParams  = 5 // day, scope, id, amount_micros, cost_micros
)

// insertEntry is the INSERT of an entry that skips it when its
// (request_id, kind) is taken, or, for a top-up or an adjustment, its
// request_id is taken by the other kind (the unique index
// ledger_entries_keyed), and returns its request ID when it does not.
var insertEntry = `INSERT INTO ledger_entries (` + entryColumns + `) VALUES ` + sqldb.Placeholders(1, entryParams) +
	` ON CONFLICT DO NOTHING RETURNING request_id`

// chargeColumns are a usage record's columns as the charge entry it makes
// (ledger.ChargeOf), and isCharge selects the records that make one: both
// in the terms of the partial index usage_records_charges, which a query
// uses only when its condition repeats the index's.
const (
	chargeColumns = `request_id, 'charge', billing_account, -price_micros, '', '', started_at`
	isCharge      = `billed AND price_micros > 0 AND NOT unmeasured`
	// statementCharges are the charges of an account in a time window,
	// the first LIMIT of them: read through usage_records_charges.
	statementCharges = `SELECT ` + chargeColumns + ` FROM usage_records
		WHERE billing_account = ? AND started_at >= ? AND started_at < ? AND ` + isCharge + `
		ORDER BY started_at, request_id LIMIT ?`
	// keptColumns are a row of ledger_charges as its charge entry: the
	// charge of a record that retention removed (see Retain), and
	// statementKept the first LIMIT of an account's in a time window. A
	// charge is in one of usage_records and ledger_charges, never both.
	keptColumns   = `request_id, 'charge', account, amount_micros, '', '', at`
	statementKept = `SELECT ` + keptColumns + ` FROM ledger_charges
		WHERE account = ? AND at >= ? AND at < ? ORDER BY at, request_id LIMIT ?`
)

// addTotals is the upsert that adds n rows of amounts to billing_totals,
// each sum held at the ends of the int64 range (as billing.Micros.Add
// holds it). A plain + would fail the whole transaction on PostgreSQL
// ("bigint out of range"), and on SQLite turn the total into a float that
// no later read can scan: either way one extreme charge would stop every
// write or every read of billing.
func addTotals(n int) string {
	return `INSERT INTO billing_totals (day, scope, id, amount_micros, cost_micros) VALUES ` + sqldb.Placeholders(n, totalParams) +
		` ON CONFLICT (day, scope, id) DO UPDATE SET amount_micros = ` + heldSum("amount_micros") + `,
		cost_micros = ` + heldSum("cost_micros")
}

// heldSum is the SQL of billing_totals.col + excluded.col held at the ends
// of the int64 range. It compares before it adds, in nested CASEs: the
// only construct whose order of evaluation PostgreSQL promises, so that
// no branch computes the sum it guards against. The smallest int64 is
// written as a difference: as a literal it is out of range before its
// sign applies.
func heldSum(col string) string {
	const most, least = `9223372036854775807`, `(-9223372036854775807 - 1)`
	a, d := `billing_totals.`+col, `excluded.`+col
	return `CASE WHEN ` + d + ` > 0 THEN CASE WHEN ` + a + ` > ` + most + ` - ` + d + ` THEN ` + most + ` ELSE ` + a + ` + ` + d + ` END
		ELSE CASE WHEN ` + a + ` < ` + least + ` - ` + d + ` THEN ` + least + ` ELSE ` + a + ` + ` + d + ` END END`
}

// The scopes of billing_totals: a balance (day 0), and the spends per day.
const (
	scopeBalance = "balance"
	scopeAccount = "account"
	scopeKey     = "key"
	scopeTenant  = "tenant"
	scopePool    = "pool"
	scopeTask    = "task"
)

// total names one row of billing_totals.
type total struct {
	day       int64 // days since the Unix epoch; 0 for a balance
	scope, id string
}

// totals are the amounts a transaction adds to billing_totals.
type totals map[total]ledger.Amounts

func (t totals) add(k total, price, cost billing.Micros) {
	t[k] = t[k].Plus(ledger.Amounts{Price: price, Cost: cost})
}

// sorted returns the rows in one order for every transaction: two
// transactions updating the same rows lock them in the same order, so
// PostgreSQL never finds them deadlocked.
func (t totals) sorted() []total {
	keys := make([]total, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b total) int {
		return cmp.Or(cmp.Compare(a.day, b.day), cmp.Compare(a.scope, b.scope), cmp.Compare(a.id, b.id))
	})
	return keys
}

// epochDay is the day number of t's UTC day: Unix time has no leap
// seconds, so a UTC day is 86,400 of its seconds.
func epochDay(t time.Time) int64 {
	sec := t.Unix()
	day := sec / 86400
	if sec%86400 < 0 {
		day-- // floored, before 1970
	}
	return day
}

// addCharges adds to billing_totals what the new billed records charged
// their accounts' balances and spent: a multi-row statement or a few per
// batch. The records themselves are the charge entries (see ledger.Billing).
// Records are first folded by the rows they add to (one map update a
// record, where adding each to its six rows took six): a batch's records
// mostly share their day and subjects.
func (w *writer) addCharges(ctx context.Context, recs []sluice.UsageRecord, inserted []bool) error {
	byRows := make(map[chargeRows]charged)
	for i := range recs {
		r := &recs[i]
		c := r.Billing
		if !inserted[i] || c == nil {
			continue
		}
		k := chargeRows{epochDay(r.Started), c.Account, r.KeyID, r.Tenant, r.Pool, r.TaskType}
		sum := byRows[k]
		if e, ok := ledger.ChargeOf(r); ok {
			sum.balance = sum.balance.Add(e.Amount)
		}
		sum.price = sum.price.Add(billing.Micros(c.Price))
		sum.cost = sum.cost.Add(billing.Micros(c.Cost))
		byRows[k] = sum
	}
	add := make(totals)
	for k, sum := range byRows {
		if sum.balance != 0 {
			add.add(total{0, scopeBalance, k.account}, sum.balance, 0)
		}
		if sum.price == 0 && sum.cost == 0 {
			continue
		}
		for _, s := range [...]struct{ scope, id string }{
			{scopeAccount, k.account}, {scopeKey, k.key}, {scopeTenant, k.tenant}, {scopePool, k.pool}, {scopeTask, k.task},
		} {
			if s.id != "" {
				add.add(total{k.day, s.scope, s.id}, sum.price, sum.cost)
			}
		}
	}
	return w.addTotals(ctx, add)
}

// chargeRows are the rows of billing_totals a billed record adds to: its
// account's balance, and its day's spends of its account, key, tenant,
// pool and task type ("" = none).
type chargeRows struct {
	day                              int64
	account, key, tenant, pool, task string
}

// charged is what records of the same chargeRows added: to the balance
// (their charges, negative) and to the spends.
type charged struct{ balance, price, cost billing.Micros }

// boxed reuses the interface value of the last string it boxed.
// database/sql takes arguments as []any, and boxing a string allocates:
// a column whose value a batch repeats row after row (a billing account,
// its plan) then allocates once per batch, not once per row.
type boxed struct {
	s string
	v any
}

func (b *boxed) of(s string) any {
	if b.v == nil || s != b.s {
		b.s, b.v = s, s
	}
	return b.v
}

// chargeBoxes are the writer's boxed billing columns of records: their
// account and plan.
type chargeBoxes struct {
	account, plan boxed
}

// addTotals upserts the rows of add in their sorted order.
func (w *writer) addTotals(ctx context.Context, add totals) error {
	for rest := add.sorted(); len(rest) > 0; {
		n, shape := chunk(len(rest))
		args := w.args[:0]
		for _, k := range rest[:n] {
			a := add[k]
			args = append(args, k.day, k.scope, k.id, int64(a.Price), int64(a.Cost))
		}
		if _, err := w.tx.ExecStmt(ctx, w.st.totals[shape], args...); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// PutBillingAccount creates or replaces the account's row.
func (s *Store) PutBillingAccount(ctx context.Context, a ledger.BillingAccount) error {
	if err := a.Validate(); err != nil {
		return err
	}
	_, err := s.db.Exec(ctx, `INSERT INTO billing_accounts (id, plan, max_inflight, on_limit, overdraft_micros, allowance_micros, cycle,
			budget_day_micros, budget_month_micros, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET plan = excluded.plan, max_inflight = excluded.max_inflight, on_limit = excluded.on_limit,
			overdraft_micros = excluded.overdraft_micros, allowance_micros = excluded.allowance_micros, cycle = excluded.cycle,
			budget_day_micros = excluded.budget_day_micros, budget_month_micros = excluded.budget_month_micros,
			updated_at = excluded.updated_at`,
		a.ID, a.Plan, int64(a.MaxInflight), a.OnLimit, int64(a.Overdraft), int64(a.Allowance), a.Cycle,
		int64(a.Budgets.Day), int64(a.Budgets.Month), time.Now().UnixMicro())
	if err != nil {
		return fmt.Errorf("put billing account: %w", err)
	}
	return nil
}

// BillingAccounts returns the stored accounts ordered by ID.
func (s *Store) BillingAccounts(ctx context.Context) ([]ledger.BillingAccount, error) {
	rows, err := s.db.Query(ctx, `SELECT id, plan, max_inflight, on_limit, overdraft_micros, allowance_micros, cycle,
		budget_day_micros, budget_month_micros FROM billing_accounts ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("billing accounts: %w", err)
	}
	defer rows.Close()
	var out []ledger.BillingAccount
	for rows.Next() {
		var a ledger.BillingAccount
		if err := rows.Scan(&a.ID, &a.Plan, &a.MaxInflight, &a.OnLimit, &a.Overdraft, &a.Allowance, &a.Cycle,
			&a.Budgets.Day, &a.Budgets.Month); err != nil {
			return nil, fmt.Errorf("billing accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("billing accounts: %w", err)
	}
	return out, nil
}

const priceColumns = `kind, plan, alias, model, effective_from, input_micros, output_micros, cache_read_micros, cache_write_micros,
	reasoning_micros, request_micros, video_second_micros, video_item_micros`

// PutPrice inserts the version unless it is stored; a stored one with
// other rates is ledger.ErrPriceConflict. Its effective time is kept to
// the microsecond.
func (s *Store) PutPrice(ctx context.Context, p billing.Price) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p.EffectiveFrom = p.EffectiveFrom.UTC().Truncate(time.Microsecond)
	r := &p.Rates
	err := s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		res, err := tx.Exec(ctx, `INSERT INTO prices (`+priceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (kind, plan, alias, model, effective_from) DO NOTHING`,
			string(p.Kind), p.Plan, p.Alias, p.Model, p.EffectiveFrom.UnixMicro(), int64(r.Input), int64(r.Output), int64(r.CacheRead),
			int64(r.CacheWrite), int64(r.Reasoning), int64(r.Request), int64(r.VideoSecond), int64(r.VideoItem))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		stored, err := scanPrices(tx.Query(ctx, `SELECT `+priceColumns+` FROM prices
			WHERE kind = ? AND plan = ? AND alias = ? AND model = ? AND effective_from = ?`,
			string(p.Kind), p.Plan, p.Alias, p.Model, p.EffectiveFrom.UnixMicro()))
		if err != nil {
			return err
		}
		if len(stored) != 1 || stored[0].Rates != p.Rates {
			return fmt.Errorf("%s %s: %w", p.Kind, p.Version(), ledger.ErrPriceConflict)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put price: %w", err)
	}
	return nil
}

// Prices returns the stored versions in the order of billing.Table.All.
func (s *Store) Prices(ctx context.Context) ([]billing.Price, error) {
	out, err := scanPrices(s.db.Query(ctx, `SELECT `+priceColumns+` FROM prices ORDER BY kind, plan, alias, model, effective_from`))
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	return out, nil
}

func scanPrices(rows *sql.Rows, err error) ([]billing.Price, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []billing.Price
	for rows.Next() {
		var (
			p    billing.Price
			from int64
			r    = &p.Rates
		)
		if err := rows.Scan(&p.Kind, &p.Plan, &p.Alias, &p.Model, &from, &r.Input, &r.Output, &r.CacheRead, &r.CacheWrite,
			&r.Reasoning, &r.Request, &r.VideoSecond, &r.VideoItem); err != nil {
			return nil, err
		}
		p.EffectiveFrom = time.UnixMicro(from).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// Post inserts the entry and, if it was new, adds its amount to the
// account's balance row, in one transaction, which it rolls back when the
// new balance passes the bound: the row is locked by then, so two
// concurrent posts cannot both pass the check on the balance before them.
func (s *Store) Post(ctx context.Context, e ledger.Entry) (applied bool, err error) {
	if err := e.Validate(); err != nil {
		return false, err
	}
	err = s.db.InTx(ctx, func(tx *sqldb.Tx) error {
		err := tx.QueryRow(ctx, insertEntry, e.RequestID, string(e.Kind), e.Account, int64(e.Amount), e.Reason, e.Admin,
			e.At.UnixMicro()).Scan(new(string))
		if errors.Is(err, sql.ErrNoRows) {
			return s.postedBefore(ctx, tx, &e)
		}
		if err != nil {
			return err
		}
		var after billing.Micros
		if err := tx.QueryRow(ctx, addTotals(1)+` RETURNING amount_micros`, int64(0), scopeBalance, e.Account, int64(e.Amount),
			int64(0)).Scan(&after); err != nil {
			return err
		}
		if e.PassesBound(after) {
			return ledger.ErrBalanceBound
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("post %s %s: %w", e.Kind, e.RequestID, err)
	}
	return applied, nil
}

// postedBefore explains an entry the INSERT skipped: one of its request ID
// and kind is stored (nil: nothing to do), or a top-up's or adjustment's
// request ID names an entry of the other kind (ledger.ErrKeyReused).
func (s *Store) postedBefore(ctx context.Context, tx *sqldb.Tx, e *ledger.Entry) error {
	if !e.Kind.Keyed() {
		return nil
	}
	var kind ledger.EntryKind
	err := tx.QueryRow(ctx, `SELECT kind FROM ledger_entries WHERE request_id = ? AND kind IN (?, ?)`,
		e.RequestID, string(ledger.EntryTopUp), string(ledger.EntryAdjustment)).Scan(&kind)
	switch {
	case err != nil:
		return err
	case kind != e.Kind:
		return ledger.ErrKeyReused
	}
	return nil
}

// Balances reads the balance rows and this month's spend rows of
// billing_totals in one query.
func (s *Store) Balances(ctx context.Context, at time.Time) (ledger.Balances, error) {
	b := ledger.Balances{At: at, Accounts: map[string]ledger.Balance{}, Keys: map[string]ledger.Spent{},
		Tenants: map[string]ledger.Spent{}, Pools: map[string]ledger.Spent{}, Tasks: map[string]ledger.Spent{}}
	month := ledger.Month(at)
	today := epochDay(at)
	rows, err := s.db.Query(ctx, `SELECT day, scope, id, amount_micros, cost_micros FROM billing_totals
		WHERE scope = ? OR (day >= ? AND day < ?)`, scopeBalance, epochDay(month), epochDay(month.AddDate(0, 1, 0)))
	if err != nil {
		return b, fmt.Errorf("balances: %w", err)
	}
	defer rows.Close()
	spends := map[string]map[string]ledger.Spent{scopeKey: b.Keys, scopeTenant: b.Tenants, scopePool: b.Pools, scopeTask: b.Tasks}
	for rows.Next() {
		var (
			k    total
			a    ledger.Amounts
			p, c int64
		)
		if err := rows.Scan(&k.day, &k.scope, &k.id, &p, &c); err != nil {
			return b, fmt.Errorf("balances: %w", err)
		}
		a.Price, a.Cost = billing.Micros(p), billing.Micros(c)
		switch k.scope {
		case scopeBalance:
			acc := b.Accounts[k.id]
			acc.Balance = a.Price
			b.Accounts[k.id] = acc
		case scopeAccount:
			acc := b.Accounts[k.id]
			acc.Spent = acc.Spent.Plus(a, k.day == today)
			b.Accounts[k.id] = acc
		default:
			if m := spends[k.scope]; m != nil {
				m[k.id] = m[k.id].Plus(a, k.day == today)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return b, fmt.Errorf("balances: %w", err)
	}
	return b, nil
}

// Statement returns the account's entries in [from, to), oldest first.
func (s *Store) Statement(ctx context.Context, account string, from, to time.Time, limit int) ([]ledger.Entry, error) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !from.IsZero() {
		lo = from.UnixMicro()
	}
	if !to.IsZero() {
		hi = to.UnixMicro()
	}
	if limit <= 0 {
		limit = math.MaxInt64
	}
	// The posted entries, the charges and the charges kept after their
	// records, each the first limit of its own in its own index, merged here: the database would compare their text
	// by each table's collation.
	posted, err := s.entries(ctx, nil, `SELECT `+entryColumns+` FROM ledger_entries
		WHERE account = ? AND at >= ? AND at < ? ORDER BY at, request_id, kind LIMIT ?`, account, lo, hi, limit)
	if err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	out, err := s.entries(ctx, posted, statementCharges, account, lo, hi, limit)
	if err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	if out, err = s.entries(ctx, out, statementKept, account, lo, hi, limit); err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	slices.SortFunc(out, ledger.CompareEntries)
	return out[:min(len(out), limit)], nil
}

// Entries reads the request's posted entries and its record's charge, each
// by its table's primary key.
func (s *Store) Entries(ctx context.Context, requestID string) ([]ledger.Entry, error) {
	posted, err := s.entries(ctx, nil, `SELECT `+entryColumns+` FROM ledger_entries WHERE request_id = ?`, requestID)
	if err != nil {
		return nil, fmt.Errorf("entries of %s: %w", requestID, err)
	}
	out, err := s.entries(ctx, posted, `SELECT `+chargeColumns+` FROM usage_records
		WHERE request_id = ? AND billing_account <> '' AND `+isCharge, requestID)
	if err != nil {
		return nil, fmt.Errorf("entries of %s: %w", requestID, err)
	}
	if out, err = s.entries(ctx, out, `SELECT `+keptColumns+` FROM ledger_charges WHERE request_id = ?`, requestID); err != nil {
		return nil, fmt.Errorf("entries of %s: %w", requestID, err)
	}
	slices.SortFunc(out, func(a, b ledger.Entry) int { return cmp.Compare(a.Kind, b.Kind) })
	return out, nil
}

// entries runs a query of entryColumns and appends its rows to out.
func (s *Store) entries(ctx context.Context, out []ledger.Entry, query string, args ...any) ([]ledger.Entry, error) {
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e  ledger.Entry
			at int64
		)
		if err := rows.Scan(&e.RequestID, &e.Kind, &e.Account, &e.Amount, &e.Reason, &e.Admin, &at); err != nil {
			return nil, err
		}
		e.At = time.UnixMicro(at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// spendSource is a table Spend reads, and how: the records still held
// (spendRecords), or the roll-ups of those Retain removed (spendRollups).
// A record is in exactly one of them. Both name the columns of billed,
// billing_account, key_id and tenant alike.
type spendSource struct {
	table string
	// columns are what each dimension groups by; a constant for one the
	// table does not know.
	columns map[ledger.Dimension]string
	// sums are the SpendRow's Requests, Unmeasured, Tokens, CachedTokens,
	// Price and Cost.
	sums []string
}

var (
	spendRecords = spendSource{
		table: "usage_records",
		columns: map[ledger.Dimension]string{
			ledger.ByAccount:  "billing_account",
			ledger.ByKey:      "key_id",
			ledger.ByTenant:   "tenant",
			ledger.ByEndUser:  "end_user",
			ledger.ByTaskType: "task_type",
			ledger.ByPool:     "pool",
			ledger.ByAlias:    "alias",
			ledger.ByModel:    "model",
			ledger.ByDay:      "started_at / 86400000000", // days since the Unix epoch
		},
		sums: []string{`COUNT(*)`, `SUM(CASE WHEN unmeasured THEN 1 ELSE 0 END)`,
			`CAST(SUM(CASE WHEN measured THEN total_tokens ELSE 0 END) AS BIGINT)`, `CAST(SUM(CASE WHEN measured THEN cached_tokens ELSE 0 END) AS BIGINT)`,
			`CAST(SUM(price_micros) AS BIGINT)`, `CAST(SUM(cost_micros) AS BIGINT)`},
	}
	spendRollups = spendSource{
		table: "usage_rollups",
		columns: map[ledger.Dimension]string{
			ledger.ByAccount:  "billing_account",
			ledger.ByKey:      "key_id",
			ledger.ByTenant:   "tenant",
			ledger.ByEndUser:  "''", // not rolled up: as many as requests, nearly
			ledger.ByTaskType: "task_type",
			ledger.ByPool:     "pool",
			ledger.ByAlias:    "alias",
			ledger.ByModel:    "model",
			ledger.ByDay:      "day",
		},
		sums: []string{`CAST(SUM(requests) AS BIGINT)`, `CAST(SUM(unmeasured) AS BIGINT)`, `CAST(SUM(total_tokens) AS BIGINT)`,
			`CAST(SUM(cached_tokens) AS BIGINT)`, `CAST(SUM(price_micros) AS BIGINT)`, `CAST(SUM(cost_micros) AS BIGINT)`},
	}
	// spendDays are the daily roll-ups of every record of a closed day
	// (see RollUp), read for the days they hold whole in the range when
	// the report neither selects nor groups by key or end user, which
	// they do not keep. Such a day is read from nowhere else.
	spendDays = spendSource{
		table: "usage_days",
		columns: map[ledger.Dimension]string{
			ledger.ByAccount:  "billing_account",
			ledger.ByTenant:   "tenant",
			ledger.ByTaskType: "task_type",
			ledger.ByPool:     "pool",
			ledger.ByAlias:    "alias",
			ledger.ByModel:    "model",
			ledger.ByDay:      "day",
		},
		sums: []string{`CAST(SUM(requests) AS BIGINT)`, `CAST(SUM(unmeasured) AS BIGINT)`, `CAST(SUM(measured_tokens) AS BIGINT)`,
			`CAST(SUM(measured_cached) AS BIGINT)`, `CAST(SUM(price_micros) AS BIGINT)`, `CAST(SUM(cost_micros) AS BIGINT)`},
	}
)

// Spend groups the selected billed records in the database, so one row per
// group comes back however many records the range holds. The days rolled
// up (see RollUp) that lie whole in the range are read from usage_days
// when the report neither selects nor groups by key or end user. Of the
// rest of the range, records still held are read from the start of the
// oldest of them (none before it: on PostgreSQL, only the partitions of
// the range), and those Retain removed from their roll-ups, by whole UTC
// days (see ledger.SpendFilter). The sources are added up per group.
func (s *Store) Spend(ctx context.Context, f ledger.SpendFilter) ([]ledger.SpendRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	dims := slices.Compact(slices.Sorted(slices.Values(f.By)))
	queries, err := s.spendQueries(ctx, f, dims)
	if err != nil {
		return nil, fmt.Errorf("spend: %w", err)
	}
	var out []ledger.SpendRow
	for _, q := range queries {
		if out, err = s.spend(ctx, out, dims, q); err != nil {
			return nil, fmt.Errorf("spend: %w", err)
		}
	}
	out = mergeSpend(out)
	slices.SortFunc(out, ledger.CompareSpendRows) // in Go: the database's collation may order text otherwise
	return out, nil
}

// query is an SQL query and its arguments.
type query struct {
	sql  string
	args []any
}

// spendQueries are the queries of a spend report: of the daily roll-ups
// of the days they hold whole, if the report can read them, and for each
// span of the range left, of the records held, unless the span ends
// before the oldest of them, and of the roll-ups of removed records.
func (s *Store) spendQueries(ctx context.Context, f ledger.SpendFilter, dims []ledger.Dimension) ([]query, error) {
	var (
		out  []query
		runs []dayRun
	)
	if f.KeyID == "" && !slices.Contains(dims, ledger.ByKey) && !slices.Contains(dims, ledger.ByEndUser) {
		var err error
		if runs, err = s.rolledRuns(ctx, f.From, f.To); err != nil {
			return nil, err
		}
	}
	for _, run := range runs {
		out = append(out, spendQuery(spendDays, dims, f, "day", &run.from, &run.to))
	}
	oldest, err := s.oldestRecord(ctx)
	if err != nil {
		return nil, err
	}
	for _, sp := range outside(f.From, f.To, runs) {
		if !oldest.IsZero() && (sp.to.IsZero() || oldest.Before(sp.to)) {
			from := sp.from
			if from.Before(oldest) {
				from = oldest
			}
			out = append(out, spendQuery(spendRecords, dims, f, "started_at", timeBound(from), timeBound(sp.to)))
		}
		// Roll-up rows count in the range when their day starts in it.
		out = append(out, spendQuery(spendRollups, dims, f, "day", dayBound(sp.from), dayBound(sp.to)))
	}
	return out, nil
}

// oldestRecord is the start of the oldest record held; zero with none.
// On PostgreSQL it asks the default partition and the day partitions,
// oldest first, until one holds a record: MIN over the whole table would
// be planned over every partition (a year: over 50 ms a call).
func (s *Store) oldestRecord(ctx context.Context) (time.Time, error) {
	if !s.db.PartitionedByDay() {
		return s.minStarted(ctx, "usage_records")
	}
	parts, err := s.db.Partitions(ctx, "usage_records")
	if err != nil {
		return time.Time{}, err
	}
	oldest, err := s.minStarted(ctx, "usage_records_default")
	if err != nil {
		return time.Time{}, err
	}
	for _, p := range parts {
		if !oldest.IsZero() && oldest.Before(p.Day) {
			break // the default partition holds an older record than any day's
		}
		first, err := s.minStarted(ctx, p.Name)
		if err != nil || !first.IsZero() {
			if oldest.IsZero() || first.Before(oldest) {
				oldest = first
			}
			return oldest, err
		}
	}
	return oldest, nil
}

// minStarted is the start of the oldest record in table (usage_records
// or one of its partitions, by their names in sqldb); zero with none.
func (s *Store) minStarted(ctx context.Context, table string) (time.Time, error) {
	var us sql.NullInt64
	if err := s.db.QueryRow(ctx, fmt.Sprintf(`SELECT MIN(started_at) FROM %q`, table)).Scan(&us); err != nil || !us.Valid {
		return time.Time{}, err
	}
	return time.UnixMicro(us.Int64).UTC(), nil
}

// timeBound is t in microseconds, and nil for the zero time (an open end).
func timeBound(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	us := t.UnixMicro()
	return &us
}

// dayBound is the first UTC day (days since the Unix epoch) starting at
// or after t, and nil for the zero time.
func dayBound(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	day := epochDay(t)
	if ledger.Day(t).Before(t) {
		day++
	}
	return &day
}

// spendQuery is f's query of src, with col between lo (inclusive) and hi
// (exclusive) where they are not nil.
func spendQuery(src spendSource, dims []ledger.Dimension, f ledger.SpendFilter, col string, lo, hi *int64) query {
	var cols, groups []string
	for _, d := range dims {
		c := src.columns[d]
		cols = append(cols, c)
		if !strings.HasPrefix(c, "'") {
			groups = append(groups, c) // PostgreSQL refuses to group by a constant
		}
	}
	where, args := []string{"billed = ?"}, []any{true}
	if lo != nil {
		where, args = append(where, col+" >= ?"), append(args, *lo)
	}
	if hi != nil {
		where, args = append(where, col+" < ?"), append(args, *hi)
	}
	for _, c := range [...]struct{ col, want string }{{"billing_account", f.Account}, {"key_id", f.KeyID}, {"tenant", f.Tenant}} {
		if c.want != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.want)
		}
	}
	q := `SELECT ` + strings.Join(append(slices.Clone(cols), src.sums...), ", ") + ` FROM ` + src.table + ` WHERE ` + strings.Join(where, " AND ")
	if len(groups) > 0 {
		q += ` GROUP BY ` + strings.Join(groups, ", ")
	}
	q += ` HAVING COUNT(*) > 0` // without groups, no records is no row, not a row of zeros
	return query{q, args}
}

// spend runs q, grouped by dims, and appends its rows to out.
func (s *Store) spend(ctx context.Context, out []ledger.SpendRow, dims []ledger.Dimension, q query) ([]ledger.SpendRow, error) {
	rows, err := s.db.Query(ctx, q.sql, q.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r    ledger.SpendRow
			day  int64
			dest []any
		)
		for _, d := range dims {
			dest = append(dest, dimensionOf(&r, &day, d))
		}
		if err := rows.Scan(append(dest, &r.Requests, &r.Unmeasured, &r.Tokens, &r.CachedTokens, &r.Price, &r.Cost)...); err != nil {
			return nil, err
		}
		if slices.Contains(dims, ledger.ByDay) {
			r.Day = time.Unix(day*86400, 0).UTC()
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// dimensionOf is where a row of a spend query scans its column of d:
// the field of r, or day (days since the Unix epoch) for ByDay.
func dimensionOf(r *ledger.SpendRow, day *int64, d ledger.Dimension) any {
	switch d {
	case ledger.ByAccount:
		return &r.Account
	case ledger.ByKey:
		return &r.KeyID
	case ledger.ByTenant:
		return &r.Tenant
	case ledger.ByEndUser:
		return &r.EndUser
	case ledger.ByTaskType:
		return &r.TaskType
	case ledger.ByPool:
		return &r.Pool
	case ledger.ByAlias:
		return &r.Alias
	case ledger.ByModel:
		return &r.Model
	}
	return day
}

// mergeSpend adds up the rows of one group: a group may have rows from
// both sources.
func mergeSpend(rows []ledger.SpendRow) []ledger.SpendRow {
	index := make(map[ledger.SpendRow]int, len(rows)) // the row's dimensions → position in out
	out := rows[:0]
	for _, r := range rows {
		g := r
		g.Requests, g.Unmeasured, g.Tokens, g.CachedTokens, g.Price, g.Cost = 0, 0, 0, 0, 0, 0
		i, ok := index[g]
		if !ok {
			index[g] = len(out)
			out = append(out, r)
			continue
		}
		m := &out[i]
		m.Requests, m.Unmeasured = m.Requests+r.Requests, m.Unmeasured+r.Unmeasured
		m.Tokens, m.CachedTokens = m.Tokens+r.Tokens, m.CachedTokens+r.CachedTokens
		m.Price, m.Cost = m.Price.Add(r.Price), m.Cost.Add(r.Cost)
	}
	return out
}
