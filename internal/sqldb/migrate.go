package sqldb

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// migration is one step of the schema. Its statements run in the migration
// transaction. Three type names stand for what differs between dialects:
// {{bytes}} is a byte string, {{ordered_text}} is text that sorts byte by
// byte whatever the database's collation, as Go's strings do, and {{id}}
// is an integer primary key the database assigns when none is given. Times
// are BIGINT microseconds since the Unix epoch (UTC), durations BIGINT
// microseconds (columns ending in _us).
type migration struct {
	version int64
	name    string
	stmts   []string
	// postgres runs after stmts on PostgreSQL only: what SQLite has no
	// form of (declarative partitioning).
	postgres []string
}

// migrations are applied in order. A released migration is never edited: a
// change to the schema is a new migration at the end.
var migrations = []migration{{
	version: 1,
	name:    "keys, catalog documents, usage records, executions",
	stmts: []string{
		`CREATE TABLE keys (
			id         {{ordered_text}} NOT NULL PRIMARY KEY,
			name       TEXT NOT NULL,
			tenant     TEXT NOT NULL,
			hash       TEXT NOT NULL UNIQUE,
			prefix     TEXT NOT NULL,
			status     TEXT NOT NULL,
			models     TEXT NOT NULL, -- JSON array of aliases; [] = all
			priority   TEXT NOT NULL,
			expires_at BIGINT,        -- NULL = never
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL,
			static     BOOLEAN NOT NULL
		)`,
		`CREATE INDEX keys_created ON keys (created_at, id)`,
		`CREATE TABLE catalog_documents (
			version    BIGINT NOT NULL PRIMARY KEY,
			doc        {{bytes}} NOT NULL,
			created_at BIGINT NOT NULL
		)`,
		`CREATE TABLE usage_records (
			request_id        {{ordered_text}} NOT NULL PRIMARY KEY,
			key_id            TEXT NOT NULL,
			tenant            TEXT NOT NULL,
			alias             TEXT NOT NULL,
			protocol          TEXT NOT NULL,
			stream            BOOLEAN NOT NULL,
			status            INTEGER NOT NULL,
			code              TEXT NOT NULL,
			started_at        BIGINT NOT NULL,
			latency_us        BIGINT NOT NULL,
			ttft_us           BIGINT NOT NULL,
			prompt_tokens     BIGINT NOT NULL,
			completion_tokens BIGINT NOT NULL,
			cached_tokens     BIGINT NOT NULL,
			reasoning_tokens  BIGINT NOT NULL,
			total_tokens      BIGINT NOT NULL,
			measured          BOOLEAN NOT NULL
		)`,
		`CREATE INDEX usage_records_started ON usage_records (started_at, request_id)`,
		`CREATE TABLE executions (
			request_id        {{ordered_text}} NOT NULL REFERENCES usage_records (request_id) ON DELETE CASCADE,
			seq               INTEGER NOT NULL, -- 0-based attempt number within the request
			edge_id           TEXT NOT NULL,
			credential_id     TEXT NOT NULL,
			account_id        TEXT NOT NULL,
			endpoint_id       TEXT NOT NULL,
			model             TEXT NOT NULL,
			status            TEXT NOT NULL,
			http_status       INTEGER NOT NULL,
			error             TEXT NOT NULL,
			started_at        BIGINT NOT NULL,
			first_byte_us     BIGINT NOT NULL,
			duration_us       BIGINT NOT NULL,
			prompt_tokens     BIGINT NOT NULL,
			completion_tokens BIGINT NOT NULL,
			cached_tokens     BIGINT NOT NULL,
			reasoning_tokens  BIGINT NOT NULL,
			total_tokens      BIGINT NOT NULL,
			measured          BOOLEAN NOT NULL,
			PRIMARY KEY (request_id, seq)
		)`,
	},
}, {
	version: 2,
	name:    "usage of async jobs",
	stmts: []string{
		// Apart from usage_records, so that the hot path's insert of a
		// request's record does not grow for what only jobs have.
		`CREATE TABLE job_usage (
			request_id   {{ordered_text}} NOT NULL PRIMARY KEY REFERENCES usage_records (request_id) ON DELETE CASCADE,
			state        TEXT NOT NULL,
			submitted_at BIGINT NOT NULL,
			running_at   BIGINT NOT NULL, -- 0: never seen running
			ended_at     BIGINT NOT NULL,
			seconds      DOUBLE PRECISION NOT NULL
		)`,
	},
}, {
	version: 3,
	name:    "job bindings",
	stmts: []string{
		// The single-node home of store.Jobs: jobs outlive a restart.
		`CREATE TABLE job_bindings (
			id         {{ordered_text}} NOT NULL PRIMARY KEY,
			record     TEXT NOT NULL,    -- JSON store.Job
			ended      BOOLEAN NOT NULL,
			next_poll  BIGINT NOT NULL,  -- unix ms
			expires_at BIGINT NOT NULL   -- unix ms; 0 = never
		)`,
		`CREATE INDEX job_bindings_due ON job_bindings (ended, next_poll)`,
	},
}, {
	version: 4,
	name:    "expected accounts and fallback reason of executions",
	stmts: []string{
		// Columns of executions, not a table of their own: the usage
		// writer's multi-row INSERT stays one statement per batch. SQLite
		// adds one column per ALTER TABLE.
		`ALTER TABLE executions ADD COLUMN expected TEXT NOT NULL DEFAULT ''`, // account IDs joined by ","; '' = any account
		`ALTER TABLE executions ADD COLUMN fallback TEXT NOT NULL DEFAULT ''`, // why it ran outside expected; '' = it did not
	},
}, {
	version: 5,
	name:    "labels and settings of keys",
	stmts: []string{
		// Everything a key carries besides its scopes and life cycle, so a
		// key made through the admin API has what a catalog key has.
		`ALTER TABLE keys ADD COLUMN labels TEXT NOT NULL DEFAULT '{}'`,   // JSON object of string → string
		`ALTER TABLE keys ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'`, // JSON: policy, limits, user_limits, task, tasks, paths, service_tiers, on_limit
	},
}, {
	version: 6,
	name:    "audit log of admin writes",
	stmts: []string{
		// Append-only: nothing updates or deletes these rows.
		`CREATE TABLE audit_log (
			id           BIGINT NOT NULL PRIMARY KEY, -- grows with every entry
			at           BIGINT NOT NULL,
			token_id     TEXT NOT NULL, -- the admin token's ID, never its secret
			remote       TEXT NOT NULL,
			method       TEXT NOT NULL,
			path         TEXT NOT NULL,
			action       TEXT NOT NULL,
			targets      TEXT NOT NULL, -- JSON array of IDs
			status       INTEGER NOT NULL,
			error        TEXT NOT NULL,
			before_state TEXT,          -- JSON object: target ID → state; NULL = none
			after_state  TEXT
		)`,
		`CREATE INDEX audit_log_at ON audit_log (at)`,
		// One row per target, so "what happened to key X" is an index lookup.
		`CREATE TABLE audit_targets (
			entry_id BIGINT NOT NULL REFERENCES audit_log (id),
			target   {{ordered_text}} NOT NULL,
			PRIMARY KEY (target, entry_id)
		)`,
	},
}, {
	version: 7,
	name:    "billing: accounts, prices, ledger entries, money on usage records",
	stmts: []string{
		// What a usage record says about who and how, and what it was
		// charged: columns of usage_records, so the usage writer's multi-row
		// INSERT stays one statement per batch.
		`ALTER TABLE usage_records ADD COLUMN end_user TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN task_type TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN pool TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN priority TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN model TEXT NOT NULL DEFAULT ''`,        // the last execution's upstream model, for reports by model
		`ALTER TABLE usage_records ADD COLUMN billed BOOLEAN NOT NULL DEFAULT FALSE`, // the record carries a charge (the columns below)
		`ALTER TABLE usage_records ADD COLUMN billing_account TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN price_plan TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN price_version TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN cost_version TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_records ADD COLUMN price_micros BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE usage_records ADD COLUMN cost_micros BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE usage_records ADD COLUMN unmeasured BOOLEAN NOT NULL DEFAULT FALSE`,
		`CREATE TABLE billing_accounts (
			id                  {{ordered_text}} NOT NULL PRIMARY KEY,
			plan                TEXT NOT NULL,
			max_inflight        INTEGER NOT NULL,
			on_limit            TEXT NOT NULL,
			reserve             BOOLEAN NOT NULL,
			allowance_micros    BIGINT NOT NULL,
			cycle               TEXT NOT NULL,
			budget_day_micros   BIGINT NOT NULL,
			budget_month_micros BIGINT NOT NULL,
			updated_at          BIGINT NOT NULL
		)`,
		// Price versions made through the admin API; the catalog's are not
		// stored. plan and alias are '' for a cost, model '' for a price.
		`CREATE TABLE prices (
			kind                TEXT NOT NULL, -- price | cost
			plan                {{ordered_text}} NOT NULL,
			alias               {{ordered_text}} NOT NULL,
			model               {{ordered_text}} NOT NULL,
			effective_from      BIGINT NOT NULL,
			input_micros        BIGINT NOT NULL, -- per million tokens, as the next four
			output_micros       BIGINT NOT NULL,
			cache_read_micros   BIGINT NOT NULL,
			cache_write_micros  BIGINT NOT NULL,
			reasoning_micros    BIGINT NOT NULL,
			request_micros      BIGINT NOT NULL,
			video_second_micros BIGINT NOT NULL,
			video_item_micros   BIGINT NOT NULL,
			PRIMARY KEY (kind, plan, alias, model, effective_from)
		)`,
		// Append-only: a balance is the sum of its account's entries.
		`CREATE TABLE ledger_entries (
			request_id    {{ordered_text}} NOT NULL,
			kind          {{ordered_text}} NOT NULL, -- charge | topup | refund | adjustment
			account       {{ordered_text}} NOT NULL,
			amount_micros BIGINT NOT NULL,           -- signed: charges negative
			reason        TEXT NOT NULL,
			admin         TEXT NOT NULL,             -- the admin token's ID; '' for charges
			at            BIGINT NOT NULL,
			PRIMARY KEY (request_id, kind)           -- idempotent: a replayed settlement charges once
		)`,
		`CREATE INDEX ledger_entries_statement ON ledger_entries (account, at, request_id, kind)`,
		// Running totals kept in the same transaction as the entries and
		// records they sum, so that admission reads its whole state with one
		// small query instead of summing the ledger: per account its balance
		// (scope 'balance', day 0, amount = the sum of its entries), and per
		// account, key, tenant, pool and task type what its billed records
		// cost per UTC day (day = days since the Unix epoch, amount = price).
		`CREATE TABLE billing_totals (
			day           BIGINT NOT NULL,
			scope         {{ordered_text}} NOT NULL, -- balance | account | key | tenant | pool | task
			id            {{ordered_text}} NOT NULL,
			amount_micros BIGINT NOT NULL,
			cost_micros   BIGINT NOT NULL,
			PRIMARY KEY (day, scope, id)
		)`,
	},
}, {
	version: 8,
	name:    "tokens of oauth credentials",
	stmts: []string{
		// One row per oauth credential, shared by every replica: a refresh
		// locks its row, so a rotating refresh token is spent once. Tokens
		// are sealed (AES-GCM under server.secret_key), never plaintext.
		`CREATE TABLE oauth_tokens (
			credential_id {{ordered_text}} NOT NULL PRIMARY KEY,
			seed_hash     TEXT NOT NULL,      -- HMAC of the refresh token the operator's file held when it seeded the row
			refresh_token {{bytes}} NOT NULL, -- sealed; the current one (a refresh may rotate it)
			access_token  {{bytes}},          -- sealed; NULL = none yet
			issued_at     BIGINT NOT NULL,    -- when the access token was issued; 0 = none
			expires_at    BIGINT NOT NULL,    -- when it expires; 0 = none
			failure       TEXT NOT NULL,      -- why the last refresh failed, '' when it did not; never a token
			locked_at     BIGINT NOT NULL     -- when a replica last locked the row to refresh it
		)`,
	},
}, {
	version: 9,
	name:    "cache-write tokens and session-affinity placement on usage",
	stmts: []string{
		// Prompt tokens written to the upstream's prompt cache, beside the
		// cached (read) ones, on records and executions alike.
		`ALTER TABLE usage_records ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE executions ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0`,
		// hit | new | moved; '' = the request had no placement. The cache
		// report's hit rate is computed from it, over every replica.
		`ALTER TABLE usage_records ADD COLUMN affinity TEXT NOT NULL DEFAULT ''`,
	},
}, {
	version: 10,
	name:    "owner of the credential of executions (BYOK)",
	stmts: []string{
		// The tenant, and end user, whose own key the execution ran on;
		// '' = a platform credential.
		`ALTER TABLE executions ADD COLUMN owner_tenant TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE executions ADD COLUMN owner_user TEXT NOT NULL DEFAULT ''`,
	},
}, {
	version: 11,
	name:    "entitlements of end users to quota profiles, and the profile of usage records",
	stmts: []string{
		// One entitlement per end user of a tenant; valid_from and
		// valid_until are microseconds, 0 = open.
		`CREATE TABLE entitlements (
			tenant      {{ordered_text}} NOT NULL,
			end_user    {{ordered_text}} NOT NULL,
			profile     TEXT NOT NULL,
			pool        TEXT NOT NULL,      -- overrides the profile's pool; '' = the profile's
			valid_from  BIGINT NOT NULL,
			valid_until BIGINT NOT NULL,
			updated_at  BIGINT NOT NULL,
			PRIMARY KEY (tenant, end_user)
		)`,
		// One row whose version every write of entitlements raises in its
		// transaction: what each replica polls (cheaply, several times a
		// second) to learn that it must read them again.
		`CREATE TABLE entitlements_version (
			id      INTEGER NOT NULL PRIMARY KEY,
			version BIGINT NOT NULL
		)`,
		`INSERT INTO entitlements_version (id, version) VALUES (1, 0)`,
		// The quota profile the request ran under; '' = none.
		`ALTER TABLE usage_records ADD COLUMN profile TEXT NOT NULL DEFAULT ''`,
	},
}, {
	version: 12,
	name:    "charges are their usage records",
	stmts: []string{
		// A billed record is its request's charge entry: the ledger lists
		// it from here, and a settled request writes one row, not two (the
		// charge rows cost the request path as much as the rest of
		// billing). This index is what a statement reads charges by; its
		// condition is the one sqlledger's queries repeat.
		`CREATE INDEX usage_records_charges ON usage_records (billing_account, started_at, request_id)
			WHERE billed AND price_micros > 0 AND NOT unmeasured`,
		// The charge entries written before, each a copy of its record's
		// charge (they were written only with their records).
		`DELETE FROM ledger_entries WHERE kind = 'charge' AND EXISTS (SELECT 1 FROM usage_records r
			WHERE r.request_id = ledger_entries.request_id AND r.billing_account = ledger_entries.account
			AND r.billed AND r.price_micros > 0 AND NOT r.unmeasured)`,
	},
}, {
	version: 13,
	name:    "price versions by id",
	stmts: []string{
		// A billed record named its price and cost versions in full
		// ("standard/fast@2025-01-01T00:00:00Z"), the same few strings on
		// every row: the largest part of what billing added to a record,
		// and of the database's work to write it. A record now holds their
		// ids in this table (0 = none), which the writer fills as it meets
		// new versions.
		`CREATE TABLE price_versions (
			id      {{id}},
			version TEXT NOT NULL UNIQUE
		)`,
		`ALTER TABLE usage_records ADD COLUMN price_version_id BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE usage_records ADD COLUMN cost_version_id BIGINT NOT NULL DEFAULT 0`,
		`INSERT INTO price_versions (version)
			SELECT price_version FROM usage_records WHERE price_version <> ''
			UNION SELECT cost_version FROM usage_records WHERE cost_version <> ''`,
		`UPDATE usage_records SET price_version_id = (SELECT id FROM price_versions v WHERE v.version = usage_records.price_version)
			WHERE price_version <> ''`,
		`UPDATE usage_records SET cost_version_id = (SELECT id FROM price_versions v WHERE v.version = usage_records.cost_version)
			WHERE cost_version <> ''`,
		`ALTER TABLE usage_records DROP COLUMN price_version`,
		`ALTER TABLE usage_records DROP COLUMN cost_version`,
		// A statement needs the account and the time from its index: the
		// request ID (ties of one microsecond) is sorted from the rows,
		// and each index entry is smaller.
		`DROP INDEX usage_records_charges`,
		`CREATE INDEX usage_records_charges ON usage_records (billing_account, started_at)
			WHERE billed AND price_micros > 0 AND NOT unmeasured`,
	},
}, {
	version: 14,
	name:    "one entry per idempotency key, and the overdraft of billing accounts",
	stmts: []string{
		// A top-up and an adjustment are both named by the admin API's
		// Idempotency-Key: one key is one change, so a request_id names
		// at most one entry of the two kinds. An adjustment stored before
		// under the name of a top-up (the same key reused) keeps its
		// amount, under the name request_id:adjustment.
		`UPDATE ledger_entries SET request_id = request_id || ':adjustment' WHERE kind = 'adjustment'
			AND request_id IN (SELECT request_id FROM ledger_entries WHERE kind = 'topup')`,
		`CREATE UNIQUE INDEX ledger_entries_keyed ON ledger_entries (request_id) WHERE kind IN ('topup', 'adjustment')`,
		// How far below 0 an account's requests may take its balance,
		// their worst cases held while they run: every account now holds
		// them, so the reservation switch is gone.
		`ALTER TABLE billing_accounts ADD COLUMN overdraft_micros BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE billing_accounts DROP COLUMN reserve`,
		// Sums that passed the end of int64 before they were held there:
		// SQLite made them floats, which no read can scan into an integer,
		// and every billing read failed. Each becomes the end it passed
		// (PostgreSQL refused such sums, so it has none).
		`UPDATE billing_totals SET amount_micros = CASE WHEN amount_micros > 0 THEN 9223372036854775807 ELSE (-9223372036854775807 - 1) END
			WHERE amount_micros >= 9223372036854775807 OR amount_micros <= (-9223372036854775807 - 1)`,
		`UPDATE billing_totals SET cost_micros = CASE WHEN cost_micros > 0 THEN 9223372036854775807 ELSE (-9223372036854775807 - 1) END
			WHERE cost_micros >= 9223372036854775807 OR cost_micros <= (-9223372036854775807 - 1)`,
	},
}, {
	version: 15,
	name:    "catalog versions with their author and diff, and replica heartbeats",
	stmts: []string{
		// Who saved each catalog version, which earlier one it restores,
		// and its diff from the previous version (versions saved before
		// have none: '' and zero counts).
		`ALTER TABLE catalog_documents ADD COLUMN saved_by TEXT NOT NULL DEFAULT ''`,     // the admin token's ID, never its secret
		`ALTER TABLE catalog_documents ADD COLUMN rollback_of BIGINT NOT NULL DEFAULT 0`, // 0 = a new document
		`ALTER TABLE catalog_documents ADD COLUMN size BIGINT NOT NULL DEFAULT 0`,        // bytes of doc
		`ALTER TABLE catalog_documents ADD COLUMN lines_added BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE catalog_documents ADD COLUMN lines_removed BIGINT NOT NULL DEFAULT 0`,
		// The unified diff from the previous version: bytes, as the
		// documents are, which PostgreSQL's TEXT could not all hold.
		`ALTER TABLE catalog_documents ADD COLUMN diff {{bytes}} NOT NULL DEFAULT ''`,
		`UPDATE catalog_documents SET size = LENGTH(doc)`,
		// One row per gateway process, written about once a second; the
		// admin API lists those seen lately, and any replica deletes the
		// rows long unseen.
		`CREATE TABLE catalog_replicas (
			id            {{ordered_text}} NOT NULL PRIMARY KEY,
			source        TEXT NOT NULL,
			version       BIGINT NOT NULL, -- the stored catalog version it serves; 0 = not a stored one
			since         BIGINT NOT NULL, -- when it began serving it
			last_error    TEXT NOT NULL,   -- '' = none
			last_error_at BIGINT NOT NULL, -- 0 = none
			seen_at       BIGINT NOT NULL
		)`,
		`CREATE INDEX catalog_replicas_seen ON catalog_replicas (seen_at)`,
	},
}, {
	version: 16,
	name:    "suspended billing accounts and tenants",
	stmts: []string{
		// A billing account or tenant is suspended while its row exists;
		// every replica reads the table with its keys, each second.
		`CREATE TABLE suspensions (
			kind     {{ordered_text}} NOT NULL, -- billing_account | tenant
			id       {{ordered_text}} NOT NULL,
			reason   TEXT NOT NULL,
			since    BIGINT NOT NULL,
			by_token TEXT NOT NULL, -- the admin token's ID
			PRIMARY KEY (kind, id)
		)`,
	},
}, {
	version: 17,
	name:    "history by day: charges kept apart from records, daily roll-ups, partitions on PostgreSQL",
	stmts: []string{
		// The charges of records that retention removed: a charge entry
		// is kept as long as its billing account, its record only as long
		// as database.retention.usage. Rows are moved here from
		// usage_records in the transaction that removes their records, so
		// a charge is in exactly one of the two tables.
		`CREATE TABLE ledger_charges (
			request_id    {{ordered_text}} NOT NULL,
			account       {{ordered_text}} NOT NULL,
			amount_micros BIGINT NOT NULL, -- negative, as the entry's
			at            BIGINT NOT NULL, -- the record's started_at
			PRIMARY KEY (request_id, at)
		)`,
		`CREATE INDEX ledger_charges_statement ON ledger_charges (account, at)`,
		// What the records of one UTC day added up to, per key, tenant,
		// billing account, alias, model, pool, task type and whether they
		// were billed: written as retention removes the records, so a
		// record is counted in exactly one of usage_records and this
		// table. Tokens are those of measured usage, as reports count them.
		`CREATE TABLE usage_rollups (
			day                BIGINT NOT NULL, -- days since the Unix epoch
			tenant             {{ordered_text}} NOT NULL,
			key_id             {{ordered_text}} NOT NULL,
			billing_account    {{ordered_text}} NOT NULL,
			alias              {{ordered_text}} NOT NULL,
			model              {{ordered_text}} NOT NULL,
			pool               {{ordered_text}} NOT NULL,
			task_type          {{ordered_text}} NOT NULL,
			billed             BOOLEAN NOT NULL,
			requests           BIGINT NOT NULL,
			errors             BIGINT NOT NULL, -- status >= 400
			unmeasured         BIGINT NOT NULL, -- charges refused for want of measured usage
			prompt_tokens      BIGINT NOT NULL,
			completion_tokens  BIGINT NOT NULL,
			cached_tokens      BIGINT NOT NULL,
			cache_write_tokens BIGINT NOT NULL,
			total_tokens       BIGINT NOT NULL,
			price_micros       BIGINT NOT NULL,
			cost_micros        BIGINT NOT NULL,
			PRIMARY KEY (day, tenant, key_id, billing_account, alias, model, pool, task_type, billed)
		)`,
		`CREATE INDEX usage_rollups_tenant ON usage_rollups (tenant, day)`,
		`CREATE INDEX usage_rollups_account ON usage_rollups (billing_account, day)`,
		// Retention removes an audit entry's targets by its ID.
		`CREATE INDEX audit_targets_entry ON audit_targets (entry_id)`,
		// The last audit entry ID handed out. An entry took MAX(id) + 1,
		// and a concurrent append that took the same one failed on the
		// primary key; partitioned, the key must hold the time too, and no
		// longer refuses a second entry of one ID. Taking the ID from this
		// row locks it until the entry commits.
		`CREATE TABLE audit_next (
			one BOOLEAN NOT NULL PRIMARY KEY, -- the one row: TRUE
			id  BIGINT NOT NULL
		)`,
		`INSERT INTO audit_next (one, id) SELECT TRUE, COALESCE(MAX(id), 0) FROM audit_log`,
	},
	postgres: []string{
		// Each table is rebuilt partitioned by UTC day on its time column
		// (microseconds), its rows copied to its default partition, the old
		// table dropped; keys and indexes are added once the rows are in.
		// The day partitions are made after, one per transaction, by
		// PartitionDays, which moves the default partition's rows into
		// them: made here, in the one transaction of the migration, a
		// database of years would hold a lock per partition and index at
		// once, past max_locks_per_transaction. A key of a partitioned
		// table must hold its partition column, so a foreign key can no
		// longer name a request or an audit entry alone: those are
		// dropped, and retention removes the dependent rows itself.
		`CREATE FUNCTION pg_temp.partition_by_day(tbl text, col text) RETURNS void LANGUAGE plpgsql AS $$
		DECLARE
			old text := tbl || '_unpartitioned';
		BEGIN
			EXECUTE format('ALTER TABLE %I RENAME TO %I', tbl, old);
			EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (%I)', tbl, old, col);
			EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', tbl || '_default', tbl);
			EXECUTE format('INSERT INTO %I SELECT * FROM %I', tbl, old);
			EXECUTE format('DROP TABLE %I', old);
		END $$`,
		`ALTER TABLE job_usage DROP CONSTRAINT job_usage_request_id_fkey`,
		`ALTER TABLE audit_targets DROP CONSTRAINT audit_targets_entry_id_fkey`,
		`SELECT pg_temp.partition_by_day('executions', 'started_at')`, // first: its foreign key names usage_records
		`SELECT pg_temp.partition_by_day('usage_records', 'started_at')`,
		`SELECT pg_temp.partition_by_day('ledger_charges', 'at')`,
		`SELECT pg_temp.partition_by_day('audit_log', 'at')`,
		// A record written twice is the same record: the settlement that
		// made it fixed its start, which the spool keeps to the
		// nanosecond, so (request_id, started_at) still stores it once.
		`ALTER TABLE usage_records ADD PRIMARY KEY (request_id, started_at)`,
		`CREATE INDEX usage_records_started ON usage_records (started_at, request_id)`,
		`CREATE INDEX usage_records_charges ON usage_records (billing_account, started_at)
			WHERE billed AND price_micros > 0 AND NOT unmeasured`,
		`ALTER TABLE executions ADD PRIMARY KEY (request_id, seq, started_at)`,
		`ALTER TABLE ledger_charges ADD PRIMARY KEY (request_id, at)`,
		`CREATE INDEX ledger_charges_statement ON ledger_charges (account, at)`,
		`ALTER TABLE audit_log ADD PRIMARY KEY (id, at)`,
		`CREATE INDEX audit_log_at ON audit_log (at)`,
		`DROP FUNCTION pg_temp.partition_by_day`,
	},
}, {
	version: 18,
	name:    "executions by account and start",
	stmts: []string{
		// The upstream picture of an account (GET /admin/accounts/{id})
		// reads its executions of the last minutes and hours: without
		// this, every execution ever written. It costs the usage writer
		// one more index entry per execution inserted.
		`CREATE INDEX executions_account_started ON executions (account_id, started_at)`,
	},
}, {
	version: 19,
	name:    "usage records by key and start, on PostgreSQL",
	postgres: []string{
		// GET /admin/usage?key= (a key's page of the console) reads a key's
		// records of a window: without this, every record of the window
		// (30 days of a million records a year: over 20 ms, more under
		// load). It costs the usage writer one more index entry per
		// record; SQLite, a single node's store of far fewer records,
		// does without it, and its writer without the cost.
		`CREATE INDEX usage_records_key_started ON usage_records (key_id, started_at)`,
	},
}, {
	version: 20,
	name:    "the response cache's hits on usage records",
	stmts: []string{
		// A request answered from the response cache: no execution, no
		// upstream tokens, billed as its cache's charge says.
		`ALTER TABLE usage_records ADD COLUMN cache_hit BOOLEAN NOT NULL DEFAULT FALSE`,
	},
}, {
	version: 21,
	name:    "daily roll-ups of every record of a closed day, for the console's summaries and spend reports",
	stmts: []string{
		// What the records of one closed UTC day add up to, held or
		// removed since, per tenant, billing account, alias, model, pool,
		// task type, error code and whether they were billed: a report of
		// whole days reads these rows instead of the records. The history
		// job writes a day's rows (late = '') and its row of
		// usage_days_rolled in one transaction; a record written after
		// that adds rows of its own, late naming the write that added
		// them. Latencies are histograms (ledger.Histogram's text).
		`CREATE TABLE usage_days (
			day                   BIGINT NOT NULL, -- days since the Unix epoch
			tenant                {{ordered_text}} NOT NULL,
			billing_account       {{ordered_text}} NOT NULL,
			alias                 {{ordered_text}} NOT NULL,
			model                 {{ordered_text}} NOT NULL,
			pool                  {{ordered_text}} NOT NULL,
			task_type             {{ordered_text}} NOT NULL,
			code                  {{ordered_text}} NOT NULL, -- '' = none
			billed                BOOLEAN NOT NULL,
			late                  {{ordered_text}} NOT NULL, -- '' = the roll-up's
			requests              BIGINT NOT NULL,
			unmeasured            BIGINT NOT NULL,
			prompt_tokens         BIGINT NOT NULL, -- of every record, as the usage summary counts
			completion_tokens     BIGINT NOT NULL,
			cached_tokens         BIGINT NOT NULL,
			measured_tokens       BIGINT NOT NULL, -- total tokens of measured usage, as spend reports count
			measured_cached       BIGINT NOT NULL,
			price_micros          BIGINT NOT NULL,
			cost_micros           BIGINT NOT NULL,
			latency               TEXT NOT NULL,
			ttft                  TEXT NOT NULL, -- of the records that had a first token
			PRIMARY KEY (day, tenant, billing_account, alias, model, pool, task_type, code, billed, late)
		)`,
		// The days whose records usage_days holds, each from when.
		`CREATE TABLE usage_days_rolled (
			day       BIGINT NOT NULL PRIMARY KEY,
			rolled_at BIGINT NOT NULL
		)`,
	},
}}

// migrationLock is the PostgreSQL advisory lock key that serialises
// migrations between processes opening the same database.
const migrationLock int64 = 0x736c75696365 // "sluice"

// migrate applies the pending migrations up to version in one
// transaction, under the dialect's lock: concurrent openers wait, then find
// nothing left to do.
func (db *DB) migrate(ctx context.Context, version int64) error {
	return db.InTx(ctx, func(tx *Tx) error {
		if db.d.lock != "" {
			if _, err := tx.Exec(ctx, db.d.lock, migrationLock); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    BIGINT NOT NULL PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at BIGINT NOT NULL
		)`); err != nil {
			return err
		}
		var current int64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return err
		}
		if latest := migrations[len(migrations)-1].version; current > latest {
			return fmt.Errorf("schema version %d is newer than this build's %d", current, latest)
		}
		for _, m := range migrations {
			if m.version <= current || m.version > version {
				continue
			}
			stmts := m.stmts
			if db.d == &postgresDialect {
				stmts = append(slices.Clip(stmts), m.postgres...)
			}
			for _, stmt := range stmts {
				if _, err := tx.Exec(ctx, db.d.types.Replace(stmt)); err != nil {
					return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
			}
		}
		return nil
	})
}
