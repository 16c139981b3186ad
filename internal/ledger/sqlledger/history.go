package sqlledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
)

// retainLock is the PostgreSQL advisory lock key held by the transaction
// that removes records: one replica at a time does it, the others find
// it taken and leave the work to it.
const retainLock int64 = 0x736c75696365 + 16 // "sluice" + 16

// retainBatch is how many records one transaction of Retain deletes:
// few enough that the usage writer, waiting for SQLite's one write lock
// meanwhile, never waits long.
const retainBatch = 1000

// rollupKey are the columns a roll-up row groups records by, besides
// their UTC day.
const rollupKey = `tenant, key_id, billing_account, alias, model, pool, task_type, billed`

// rollupSums are the columns of a roll-up row's counts and sums, each
// with what it adds up of the records. Tokens are those of measured usage,
// as reports count them.
var rollupSums = []struct{ column, sum string }{
	{"requests", `COUNT(*)`},
	{"errors", `SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END)`},
	{"unmeasured", `SUM(CASE WHEN unmeasured THEN 1 ELSE 0 END)`},
	{"prompt_tokens", measuredSum("prompt_tokens")},
	{"completion_tokens", measuredSum("completion_tokens")},
	{"cached_tokens", measuredSum("cached_tokens")},
	{"cache_write_tokens", measuredSum("cache_write_tokens")},
	{"total_tokens", measuredSum("total_tokens")},
	{"price_micros", `CAST(SUM(price_micros) AS BIGINT)`},
	{"cost_micros", `CAST(SUM(cost_micros) AS BIGINT)`},
}

func measuredSum(col string) string {
	return `CAST(SUM(CASE WHEN measured THEN ` + col + ` ELSE 0 END) AS BIGINT)`
}

// rollUp is the statement that adds the records of from (a table and
// its WHERE clause) to their days' roll-up rows.
func rollUp(from string) string {
	var cols, sums, adds []string
	for _, s := range rollupSums {
		cols = append(cols, s.column)
		sums = append(sums, s.sum)
		adds = append(adds, s.column+` = usage_rollups.`+s.column+` + excluded.`+s.column)
	}
	const day = `started_at / 86400000000` // days since the Unix epoch
	return `INSERT INTO usage_rollups (day, ` + rollupKey + `, ` + strings.Join(cols, ", ") + `)
		SELECT ` + day + `, ` + rollupKey + `, ` + strings.Join(sums, ", ") + ` FROM ` + from + `
		GROUP BY ` + day + `, ` + rollupKey + `
		ON CONFLICT (day, ` + rollupKey + `) DO UPDATE SET ` + strings.Join(adds, ", ")
}

// keepCharges is the statement that copies the charges of the records of
// from (a table and its WHERE clause) to ledger_charges, where they stay
// after their records are gone.
func keepCharges(from string) string {
	return `INSERT INTO ledger_charges (request_id, account, amount_micros, at)
		SELECT request_id, billing_account, -price_micros, started_at FROM ` + from + ` AND billing_account <> '' AND ` + isCharge + `
		ON CONFLICT DO NOTHING`
}

// Retain removes the usage records started before cutoff, with their
// executions and job usage, and keeps what must outlive them: the days
// before cutoff are rolled up first (see RollUp), each record is added to
// its day's roll-up row by key (usage_rollups) and its charge,
// if it made one, is copied to ledger_charges, in the transaction that
// removes it. Balances (billing_totals) are not touched. It returns how
// many records it removed.
//
// On PostgreSQL the partitions of the days before cutoff's day go whole,
// a day per transaction; what else is older (rows of the default
// partition), and every record on SQLite, is deleted retainBatch at a
// time, oldest first. Only one caller at a time removes records: another
// replica's Retain returns at once, having removed nothing. A Retain that
// fails leaves each day or batch either done or untouched; the next call
// goes on.
func (s *Store) Retain(ctx context.Context, cutoff time.Time) (removed int64, err error) {
	// Every day before cutoff is rolled up before its records go: a
	// removed record stays in the summaries of whole days.
	if err := s.rollUpBefore(ctx, cutoff); err != nil {
		return 0, fmt.Errorf("retain usage: %w", err)
	}
	removed, err = s.dropDays(ctx, cutoff)
	if err == nil {
		var n int64
		n, err = s.deleteBefore(ctx, cutoff)
		removed += n
	}
	if err != nil && !errors.Is(err, sqldb.ErrLocked) {
		return removed, fmt.Errorf("retain usage: %w", err)
	}
	return removed, nil
}

// dropDays drops the partitions of usage_records and executions whose
// day ends by cutoff, and returns how many records it dropped. An
// execution starts with or after its request, so the executions of a
// day's partition belong to records of that day or before: gone, or going
// with it.
func (s *Store) dropDays(ctx context.Context, cutoff time.Time) (int64, error) {
	removed, err := s.db.DropDays(ctx, "usage_records", cutoff, retainLock, func(tx *sqldb.Tx, p sqldb.Partition) (int64, error) {
		// Charges go to the day's partition of ledger_charges, made
		// first (it may not exist for a day before the job ran).
		if err := s.db.AddPartitions(ctx, "ledger_charges", p.Day, p.Day); err != nil {
			return 0, err
		}
		from := fmt.Sprintf(`%q WHERE TRUE`, p.Name)
		// A record of the day written meanwhile (one replayed late) waits,
		// and one being written is waited for: committed between the
		// roll-up and the drop, it would go uncounted. Records of other
		// days go on.
		for _, stmt := range []string{fmt.Sprintf(`LOCK TABLE %q IN SHARE MODE`, p.Name), rollUp(from), keepCharges(from),
			fmt.Sprintf(`DELETE FROM job_usage WHERE request_id IN (SELECT request_id FROM %q)`, p.Name)} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return 0, err
			}
		}
		var n int64
		err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %q`, p.Name)).Scan(&n)
		return n, err
	})
	if err != nil {
		return removed, err
	}
	_, err = s.db.DropDays(ctx, "executions", cutoff, retainLock, func(*sqldb.Tx, sqldb.Partition) (int64, error) { return 0, nil })
	return removed, err
}

// deleteBefore deletes the records started before cutoff, s.retainBatch
// (or retainBatch) at a time, and returns how many.
func (s *Store) deleteBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	batch := cmp.Or(s.retainBatch, retainBatch)
	return s.db.InBatches(ctx, retainLock, batch, func(tx *sqldb.Tx) (int, error) {
		ids, err := tx.Column(ctx, `SELECT request_id FROM usage_records WHERE started_at < ? ORDER BY started_at, request_id LIMIT ?`,
			cutoff.UnixMicro(), batch)
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		// started_at repeats the bound so that PostgreSQL looks only in
		// the partitions before cutoff.
		in := `started_at < ? AND request_id IN ` + sqldb.Placeholders(1, len(ids))
		args := append([]any{cutoff.UnixMicro()}, ids...)
		for _, stmt := range []string{
			rollUp(`usage_records WHERE ` + in),
			keepCharges(`usage_records WHERE ` + in),
			`DELETE FROM executions WHERE request_id IN (SELECT request_id FROM usage_records WHERE ` + in + `)`,
			`DELETE FROM job_usage WHERE request_id IN (SELECT request_id FROM usage_records WHERE ` + in + `)`,
			`DELETE FROM usage_records WHERE ` + in,
		} {
			if _, err := tx.Exec(ctx, stmt, args...); err != nil {
				return 0, err
			}
		}
		return len(ids), nil
	}, s.afterBatch)
}
