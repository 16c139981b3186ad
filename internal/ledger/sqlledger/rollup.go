package sqlledger

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// rollupGrace is how long after a UTC day ends RollUp leaves it alone.
// The usage writer adds a record of a day that is rolled up to its
// roll-up when the record's day is before its own clock's today; a
// replica whose clock is behind the one rolling up, by less than this,
// still does.
const rollupGrace = 10 * time.Minute

// dayMicros is a UTC day in microseconds: started_at / dayMicros is the
// day since the Unix epoch.
const dayMicros = 86400000000

// rolledColumns are what a roll-up reads of each record of usage_records,
// in the order readRolled scans them.
const rolledColumns = `tenant, billing_account, alias, model, pool, task_type, code, billed, unmeasured, measured,
	prompt_tokens, completion_tokens, cached_tokens, total_tokens, price_micros, cost_micros, latency_us, ttft_us, started_at`

// dayColumns are the columns of a usage_days row, in the order dayRollup.write
// writes them.
const dayColumns = `day, tenant, billing_account, alias, model, pool, task_type, code, billed, late, requests, unmeasured,
	prompt_tokens, completion_tokens, cached_tokens, measured_tokens, measured_cached, price_micros, cost_micros, latency, ttft`

// dayParams is how many columns dayColumns names; daysPerInsert bounds the
// rows of one INSERT (21 parameters each, far below either dialect's limit).
const (
	dayParams     = 21
	daysPerInsert = 200
)

// dayGroup is what a usage_days row groups records by.
type dayGroup struct {
	day                                                 int64
	tenant, account, alias, model, pool, taskType, code string
	billed                                              bool
}

// rolledRecord is what a roll-up keeps of one record.
type rolledRecord struct {
	group                                                         dayGroup
	unmeasured, measured                                          bool
	prompt, completion, cached, total, price, cost, latency, ttft int64 // durations in microseconds
}

// rolledOf is what a roll-up keeps of r: the columns the writer stores
// for it.
func rolledOf(r *sluice.UsageRecord) rolledRecord {
	c := r.Billing
	if c == nil {
		c = &noCharge
	}
	u := &r.Usage
	return rolledRecord{
		group: dayGroup{day: epochDay(r.Started), tenant: r.Tenant, account: c.Account, alias: r.Alias, model: ledger.ModelOf(r),
			pool: r.Pool, taskType: r.TaskType, code: string(r.Code), billed: r.Billing != nil},
		unmeasured: c.Unmeasured, measured: u.Measured,
		prompt: u.PromptTokens, completion: u.CompletionTokens, cached: u.CachedTokens, total: u.TotalTokens,
		price: c.Price, cost: c.Cost, latency: r.Latency.Microseconds(), ttft: r.TTFT.Microseconds(),
	}
}

// daySums is what the records of one dayGroup add up to.
type daySums struct {
	requests, unmeasured, prompt, completion, cached, measuredTokens, measuredCached, price, cost int64
	latency, ttft                                                                                 ledger.Histogram
}

// dayRollup adds records up into usage_days rows.
type dayRollup map[dayGroup]*daySums

func (d dayRollup) add(r *rolledRecord) {
	s, ok := d[r.group]
	if !ok {
		s = new(daySums)
		d[r.group] = s
	}
	s.requests++
	if r.unmeasured {
		s.unmeasured++
	}
	s.prompt += r.prompt
	s.completion += r.completion
	s.cached += r.cached
	if r.measured {
		s.measuredTokens += r.total
		s.measuredCached += r.cached
	}
	s.price += r.price
	s.cost += r.cost
	s.latency.Add(time.Duration(r.latency) * time.Microsecond)
	if r.ttft > 0 {
		s.ttft.Add(time.Duration(r.ttft) * time.Microsecond)
	}
}

// write inserts d's rows into usage_days, each marked late.
func (d dayRollup) write(ctx context.Context, tx *sqldb.Tx, late string) error {
	args := make([]any, 0, daysPerInsert*dayParams)
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO usage_days (`+dayColumns+`) VALUES `+sqldb.Placeholders(len(args)/dayParams, dayParams), args...)
		args = args[:0]
		return err
	}
	for g, s := range d {
		args = append(args, g.day, g.tenant, g.account, g.alias, g.model, g.pool, g.taskType, g.code, g.billed, late,
			s.requests, s.unmeasured, s.prompt, s.completion, s.cached, s.measuredTokens, s.measuredCached, s.price, s.cost,
			s.latency.String(), s.ttft.String())
		if len(args) == cap(args) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// RollUp writes the daily roll-up (usage_days) of every UTC day that
// ended rollupGrace or more before now and is not rolled up yet: what its
// records add up to, per tenant, billing account, alias, model, pool,
// task type, error code and whether they were billed, with histograms of
// their latencies. Reports of whole days read the roll-up instead of the
// records from then on (see SummarizeUsage and Spend); a record of a
// rolled-up day written later is added to it by RecordUsage.
//
// Each day is one transaction, which first takes the lock Retain takes
// (another replica's RollUp, or Retain, holding it: RollUp returns nil,
// leaving the work to it) and replaces the day's rows, so a day rolled up
// twice is counted once. A day retention removed records of before it was
// rolled up is left to its records and usage_rollups, as before the
// roll-ups were kept.
func (s *Store) RollUp(ctx context.Context, now time.Time) error {
	if err := s.rollUpBefore(ctx, now.Add(-rollupGrace)); err != nil {
		return fmt.Errorf("roll up usage: %w", err)
	}
	return nil
}

// rollUpBefore rolls up the days that end by end and are not rolled up.
func (s *Store) rollUpBefore(ctx context.Context, end time.Time) error {
	days, err := s.unrolledDays(ctx, epochDay(end))
	if err != nil || len(days) == 0 {
		return err
	}
	next := 0
	_, err = s.db.InBatches(ctx, retainLock, 1, func(tx *sqldb.Tx) (int, error) {
		if next == len(days) {
			return 0, nil
		}
		d := days[next]
		next++
		return 1, s.rollUpDay(ctx, tx, d)
	}, nil)
	if errors.Is(err, sqldb.ErrLocked) {
		return nil
	}
	return err
}

// heldDay is a UTC day that holds records, and on PostgreSQL the table
// that holds them (its partition, or the default partition).
type heldDay struct {
	day   int64
	table string
}

// unrolledDays are the days before day before (days since the Unix
// epoch) that hold records and are not rolled up, oldest first.
func (s *Store) unrolledDays(ctx context.Context, before int64) ([]heldDay, error) {
	rolled := map[int64]bool{}
	rows, err := s.db.Query(ctx, `SELECT day FROM usage_days_rolled WHERE day < ?`, before)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		rolled[d] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	held, err := s.heldDays(ctx, before)
	var out []heldDay
	for _, d := range held {
		if !rolled[d.day] {
			out = append(out, d)
		}
	}
	return out, err
}

// heldDays are the days before day before that hold records, oldest
// first. On PostgreSQL they are the days of the partitions (an empty one
// is rolled up as a day of no records, which it is) and those the default
// partition holds records of; on SQLite they are found on the index of
// started_at, one day at a time.
func (s *Store) heldDays(ctx context.Context, before int64) ([]heldDay, error) {
	var out []heldDay
	if !s.db.PartitionedByDay() {
		for from := int64(minDay); ; {
			var first sql.NullInt64
			if err := s.db.QueryRow(ctx, `SELECT MIN(started_at) FROM usage_records WHERE started_at >= ? AND started_at < ?`,
				from*dayMicros, before*dayMicros).Scan(&first); err != nil || !first.Valid {
				return out, err
			}
			day := floorDiv(first.Int64, dayMicros)
			out = append(out, heldDay{day: day})
			from = day + 1
		}
	}
	parts, err := s.db.Partitions(ctx, "usage_records")
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT DISTINCT floor(started_at::numeric / ?)::bigint FROM usage_records_default WHERE started_at < ?`,
		dayMicros, before*dayMicros)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, heldDay{day: d, table: "usage_records_default"})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, p := range parts {
		if d := epochDay(p.Day); d < before {
			out = append(out, heldDay{day: d, table: p.Name})
		}
	}
	slices.SortFunc(out, func(a, b heldDay) int { return cmp.Compare(a.day, b.day) })
	return out, nil
}

// minDay is the earliest day a range of days starts at: far enough
// before 1970 for any time a record holds, near enough that its start in
// microseconds (and -minDay's) fits in an int64.
const minDay = -(1 << 62) / dayMicros

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// rollUpDay replaces the roll-up of day d with what its records add up
// to, in tx, unless retention removed records of the day already (its
// usage_rollups rows exist): the records left are not all of the day's.
// On PostgreSQL it first locks the table holding the day's records
// against writes: a record of the day being written is waited for, and
// one written after sees the day rolled up (and adds itself to it).
func (s *Store) rollUpDay(ctx context.Context, tx *sqldb.Tx, d heldDay) error {
	var touched int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM usage_rollups WHERE day = ? LIMIT 1) t`, d.day).Scan(&touched); err != nil {
		return err
	}
	if touched > 0 {
		return nil
	}
	if d.table != "" {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`LOCK TABLE %q IN SHARE MODE`, d.table)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM usage_days WHERE day = ?`, d.day); err != nil {
		return err
	}
	roll := dayRollup{}
	if err := readRolled(ctx, tx, roll, `started_at >= ? AND started_at < ?`, d.day*dayMicros, (d.day+1)*dayMicros); err != nil {
		return err
	}
	if err := roll.write(ctx, tx, ""); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO usage_days_rolled (day, rolled_at) VALUES (?, ?)
		ON CONFLICT (day) DO UPDATE SET rolled_at = excluded.rolled_at`, d.day, time.Now().UnixMicro())
	return err
}

// readRolled adds the records where selects to roll.
func readRolled(ctx context.Context, tx *sqldb.Tx, roll dayRollup, where string, args ...any) error {
	rows, err := tx.Query(ctx, `SELECT `+rolledColumns+` FROM usage_records WHERE `+where, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r       rolledRecord
			g       = &r.group
			started int64
		)
		if err := rows.Scan(&g.tenant, &g.account, &g.alias, &g.model, &g.pool, &g.taskType, &g.code, &g.billed, &r.unmeasured, &r.measured,
			&r.prompt, &r.completion, &r.cached, &r.total, &r.price, &r.cost, &r.latency, &r.ttft, &started); err != nil {
			return err
		}
		g.day = floorDiv(started, dayMicros)
		roll.add(&r)
	}
	return rows.Err()
}

// addLate adds the new records of days that are rolled up already to
// their roll-ups, as rows of their own named after the first of them
// (request IDs are unique, so no other write names its rows alike). Only
// records of days before today (by this process's clock) are looked at:
// a day is rolled up once it has ended, by rollupGrace.
func (w *writer) addLate(ctx context.Context, recs []sluice.UsageRecord, inserted []bool) error {
	today := epochDay(time.Now())
	var days []any // nil, and nothing allocated, for a batch of today's records: nearly every one
	for i := range recs {
		if d := epochDay(recs[i].Started); inserted[i] && d < today && !slices.Contains(days, any(d)) {
			days = append(days, d)
		}
	}
	if len(days) == 0 {
		return nil
	}
	rows, err := w.tx.Query(ctx, `SELECT day FROM usage_days_rolled WHERE day IN `+idList(len(days)), days...)
	if err != nil {
		return err
	}
	defer rows.Close()
	rolled := map[int64]bool{}
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			return err
		}
		rolled[d] = true
	}
	if err := rows.Err(); err != nil || len(rolled) == 0 {
		return err
	}
	roll, late := dayRollup{}, ""
	for i := range recs {
		if r := &recs[i]; inserted[i] && rolled[epochDay(r.Started)] {
			rr := rolledOf(r)
			roll.add(&rr)
			if late == "" {
				late = r.RequestID + "@" + strconv.FormatInt(r.Started.UnixMicro(), 10)
			}
		}
	}
	return roll.write(ctx, w.tx, late)
}

// dayRun is a run of consecutive rolled-up days, from through to - 1.
type dayRun struct{ from, to int64 }

// span is a range of time, From <= t < To, a zero end open.
type span struct{ from, to time.Time }

// rolledRuns are the runs of rolled-up days that lie whole within
// [from, to) (zero ends open), oldest first.
func (s *Store) rolledRuns(ctx context.Context, from, to time.Time) ([]dayRun, error) {
	lo, hi := int64(minDay), int64(-minDay)
	if b := dayBound(from); b != nil {
		lo = *b
	}
	if !to.IsZero() {
		hi = epochDay(to)
	}
	rows, err := s.db.Query(ctx, `SELECT day FROM usage_days_rolled WHERE day >= ? AND day < ? ORDER BY day`, lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var runs []dayRun
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		if n := len(runs); n > 0 && runs[n-1].to == d {
			runs[n-1].to++
		} else {
			runs = append(runs, dayRun{d, d + 1})
		}
	}
	return runs, rows.Err()
}

// outside are the spans of [from, to) that runs leave: what is read
// from the records.
func outside(from, to time.Time, runs []dayRun) []span {
	var out []span
	start := from
	for _, r := range runs {
		runFrom, runTo := time.UnixMicro(r.from*dayMicros).UTC(), time.UnixMicro(r.to*dayMicros).UTC()
		if start.IsZero() || start.Before(runFrom) {
			out = append(out, span{start, runFrom})
		}
		start = runTo
	}
	if to.IsZero() || start.Before(to) {
		out = append(out, span{start, to})
	}
	return out
}

// rolledWhere is the WHERE clause of usage_days that selects what f
// selects, between the days of run; f must not select by key or end user,
// which usage_days does not keep.
func rolledWhere(f ledger.UsageFilter, run dayRun) (string, []any) {
	where, args := []string{"day >= ?", "day < ?"}, []any{run.from, run.to}
	for _, c := range []struct{ column, value string }{
		{"tenant", f.Tenant}, {"alias", f.Alias}, {"model", f.Model}, {"task_type", f.TaskType},
	} {
		if c.value != "" {
			where, args = append(where, c.column+" = ?"), append(args, c.value)
		}
	}
	switch f.Code {
	case "":
	case ledger.CodeOK:
		where = append(where, "code = ''")
	default:
		where, args = append(where, "code = ?"), append(args, f.Code)
	}
	return strings.Join(where, " AND "), args
}
