package sqldbtest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
)

// Year is a synthetic history of usage for LoadYear, on PostgreSQL: PerDay
// records a day for Days days from Start (a UTC midnight), spread evenly
// over each day's first 86,000 seconds. Record g has the key key-k, with k
// = g × 7919 % Keys (a prime: neighbouring records, and so every day, use
// keys from all over the range), of tenant-(k / (Keys / Tenants)), and is
// billed to the account of the same number, acct-…, unless g %
// UnbilledEvery is 0;
// one in fifty is refused (429 capacity_wait_timeout); aliases fast, slow
// and vision (models gpt-4o-mini, gpt-4o, gpt-4o) take turns, and so do
// 997 end users and three task types.
type Year struct {
	Start         time.Time
	Days          int
	PerDay        int
	Keys, Tenants int
	UnbilledEvery int
	// Executions gives each record one execution, on a partition of
	// executions per day: without, the records have none, which spares
	// a loader the DDL of a year of those partitions.
	Executions bool
}

// LoadYear writes y into db (which must be PostgreSQL) with a partition of
// usage_records per day, by the database itself (generate_series), not row
// by row, and analyzes the tables. DropPartitions removes what it made;
// register it as a cleanup after opening db.
func LoadYear(tb testing.TB, db *sqldb.DB, y Year) {
	tb.Helper()
	ctx := tb.Context()
	last := y.Start.AddDate(0, 0, y.Days-1)
	tables := []string{"usage_records"}
	if y.Executions {
		tables = append(tables, "executions")
	}
	for _, table := range tables {
		if err := db.AddPartitions(ctx, table, y.Start, last); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO usage_records (request_id, key_id, tenant, alias, model, protocol, stream, status, code,
			started_at, latency_us, ttft_us, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, total_tokens, measured,
			billed, billing_account, price_micros, cost_micros, end_user, task_type)
		SELECT 'r' || g, 'key-' || (g * 7919 % ?), 'tenant-' || (g * 7919 % ? / ?), a.alias, a.model, 'openai.chat', FALSE,
			CASE WHEN g % 50 = 0 THEN 429 ELSE 200 END, CASE WHEN g % 50 = 0 THEN 'capacity_wait_timeout' ELSE '' END,
			?::bigint + (g / ?) * 86400000000 + (g % ?) * (86000000000 / ?), 900000, 300000,
			100 + g % 50, 20, g % 40, 0, 120 + g % 50, TRUE,
			g % ? <> 0, CASE WHEN g % ? <> 0 THEN 'acct-' || (g * 7919 % ? / ?) ELSE '' END,
			CASE WHEN g % ? <> 0 THEN 1000 + g % 100 ELSE 0 END, CASE WHEN g % ? <> 0 THEN 300 ELSE 0 END,
			'user-' || (g % 997), a.task
		FROM generate_series(0, ?::bigint - 1) g
		JOIN (VALUES (0, 'fast', 'gpt-4o-mini', 'chat'), (1, 'slow', 'gpt-4o', 'code'), (2, 'vision', 'gpt-4o', 'caption'))
			a(i, alias, model, task) ON a.i = g % 3`,
		y.Keys, y.Keys, y.Keys/y.Tenants,
		y.Start.UnixMicro(), y.PerDay, y.PerDay, y.PerDay,
		y.UnbilledEvery, y.UnbilledEvery, y.Keys, y.Keys/y.Tenants,
		y.UnbilledEvery, y.UnbilledEvery,
		y.Days*y.PerDay); err != nil {
		tb.Fatal(err)
	}
	if y.Executions {
		if _, err := db.Exec(ctx, `INSERT INTO executions (request_id, seq, edge_id, credential_id, account_id, endpoint_id, model,
				status, http_status, error, started_at, first_byte_us, duration_us,
				prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, total_tokens, measured)
			SELECT request_id, 0, 'cred-1/ep-a/' || model, 'cred-1', 'org-1', 'ep-a', model,
				CASE WHEN status = 200 THEN 'ok' ELSE 'rate' END, status, '', started_at + 1000, ttft_us, latency_us - 1000,
				prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, total_tokens, measured
			FROM usage_records`); err != nil {
			tb.Fatal(err)
		}
	}
	for _, table := range tables {
		if _, err := db.Exec(ctx, `ANALYZE `+table); err != nil {
			tb.Fatal(err)
		}
	}
}

// DropPartitions drops the day partitions of the tables LoadYear fills
// (and of ledger_charges, which retention fills), one at a time: dropping
// the test's schema at once would lock every partition and index in one
// transaction, more than PostgreSQL's lock table holds.
func DropPartitions(tb testing.TB, db *sqldb.DB) {
	ctx := context.WithoutCancel(tb.Context())
	for _, table := range []string{"usage_records", "executions", "ledger_charges"} {
		parts, err := db.Partitions(ctx, table)
		if err != nil {
			tb.Error(err)
			return
		}
		for _, p := range parts {
			if _, err := db.Exec(ctx, `DROP TABLE `+p.Name); err != nil {
				tb.Error(err)
				return
			}
		}
	}
}
