package sqldb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// dayColumns are the tables PostgreSQL partitions by UTC day (migration
// 17), each with the column of microseconds it is partitioned on. Every
// such table has a partition per day, named table_YYYYMMDD, and a default
// partition, table_default, for rows of a day that has none: an insert
// never fails for want of a partition.
var dayColumns = map[string]string{
	"usage_records":  "started_at",
	"executions":     "started_at",
	"ledger_charges": "at",
	"audit_log":      "at",
}

// DaysAhead is how many days after today PartitionDays creates partitions
// for: a week of ticks of the job that calls it may fail before rows start
// going to the default partition.
const DaysAhead = 7

// partitionLock is the PostgreSQL advisory lock key that serialises the
// creation of partitions between replicas.
const partitionLock int64 = migrationLock + 1

// ddlLockTimeout bounds how long a partition's DDL waits for its table's
// lock. Dropping a partition locks the partitioned table exclusively: a
// DROP waiting behind a long report would hold every insert queued behind
// it, so it gives up instead (its transaction rolls back, whole) and the
// next run of the job tries again.
const ddlLockTimeout = `SET LOCAL lock_timeout = '2s'`

// Partition is one day partition of a table.
type Partition struct {
	Table string    // the partitioned table
	Name  string    // the partition's own table
	Day   time.Time // the UTC day whose rows it holds
}

// PartitionedByDay reports whether the tables of dayColumns are
// partitioned: on PostgreSQL. SQLite has no partitions, and its history is
// removed by deleting rows.
func (db *DB) PartitionedByDay() bool { return db.d == &postgresDialect }

// PartitionDays creates, for every partitioned table, the partitions that
// do not exist yet of the UTC days from now's through DaysAhead days
// later, and of every day the default partition holds rows of (moving
// them in): the rows migration 17 copied there, and those written for a
// day without a partition since. It does nothing on SQLite.
func (db *DB) PartitionDays(ctx context.Context, now time.Time) error {
	if !db.PartitionedByDay() {
		return nil
	}
	today := utcDay(now)
	for _, table := range slices.Sorted(maps.Keys(dayColumns)) {
		days, err := db.defaultDays(ctx, table)
		if err != nil {
			return err
		}
		for i := range DaysAhead + 1 {
			days = append(days, today.AddDate(0, 0, i))
		}
		for _, day := range days {
			if err := db.AddPartitions(ctx, table, day, day); err != nil {
				return err
			}
		}
	}
	return nil
}

// defaultDays are the UTC days the default partition of table holds rows of.
func (db *DB) defaultDays(ctx context.Context, table string) ([]time.Time, error) {
	// Floored, in numeric: a time before 1970 (a zero time.Time) is in
	// the day before the one integer division would truncate it to.
	rows, err := db.Query(ctx, fmt.Sprintf(`SELECT DISTINCT floor(%s::numeric / 86400000000)::bigint FROM %q`, dayColumns[table], table+"_default"))
	if err != nil {
		return nil, fmt.Errorf("days of %s_default: %w", table, err)
	}
	defer rows.Close()
	var days []time.Time
	for rows.Next() {
		var day int64
		if err := rows.Scan(&day); err != nil {
			return nil, fmt.Errorf("days of %s_default: %w", table, err)
		}
		days = append(days, time.Unix(day*86400, 0).UTC())
	}
	return days, rows.Err()
}

// AddPartitions creates the partitions of table for the UTC days from
// through to that do not exist yet, each in a transaction of its own,
// moving into it any rows of its day that the default partition holds
// (PostgreSQL refuses a partition for rows the default has). It does
// nothing on SQLite.
func (db *DB) AddPartitions(ctx context.Context, table string, from, to time.Time) error {
	col, ok := dayColumns[table]
	if !ok {
		return fmt.Errorf("partitions: %s is not partitioned by day", table)
	}
	if !db.PartitionedByDay() {
		return nil
	}
	for day := utcDay(from); !day.After(to); day = day.AddDate(0, 0, 1) {
		if err := db.addPartition(ctx, table, col, day); err != nil {
			return fmt.Errorf("partition %s of %s: %w", day.Format(time.DateOnly), table, err)
		}
	}
	return nil
}

// addPartition creates the day's partition of table unless it exists:
// made apart, its rows moved out of the default partition, then attached.
func (db *DB) addPartition(ctx context.Context, table, col string, day time.Time) error {
	name := partitionName(table, day)
	lo := day.UnixMicro()
	hi := day.AddDate(0, 0, 1).UnixMicro()
	return db.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+AdvisoryKey+`)`, partitionLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ddlLockTimeout); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass(?) IS NOT NULL`, name).Scan(&exists); err != nil || exists {
			return err
		}
		// Names are made here of a table of dayColumns and digits, never
		// of input; quoted all the same.
		for _, stmt := range []string{
			fmt.Sprintf(`CREATE TABLE %q (LIKE %q INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`, name, table),
			// Inserts wait (for the few milliseconds of this transaction)
			// and the ones running finish first: an insert that routed a
			// row of the day to the default partition before the new one is
			// attached would fail (a data error, which the usage writer
			// would take for a bad record), or make the attach fail. Once
			// this commits, the inserts waiting route by the new partitions.
			fmt.Sprintf(`LOCK TABLE %q IN SHARE ROW EXCLUSIVE MODE`, table),
			fmt.Sprintf(`WITH moved AS (DELETE FROM %q WHERE %s >= %d AND %s < %d RETURNING *) INSERT INTO %q SELECT * FROM moved`,
				table+"_default", col, lo, col, hi, name),
			fmt.Sprintf(`ALTER TABLE %q ATTACH PARTITION %q FOR VALUES FROM (%d) TO (%d)`, table, name, lo, hi),
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}

// Partitions returns the day partitions of table, oldest first (not its
// default partition); none on SQLite.
func (r runner) Partitions(ctx context.Context, table string) ([]Partition, error) {
	if _, ok := dayColumns[table]; !ok {
		return nil, fmt.Errorf("partitions: %s is not partitioned by day", table)
	}
	if r.d != &postgresDialect {
		return nil, nil
	}
	rows, err := r.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass(?)`, table)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", table, err)
	}
	defer rows.Close()
	var out []Partition
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", table, err)
		}
		day, err := time.Parse("20060102", strings.TrimPrefix(name, table+"_"))
		if err != nil {
			continue // the default partition
		}
		out = append(out, Partition{Table: table, Name: name, Day: day})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", table, err)
	}
	slices.SortFunc(out, func(a, b Partition) int { return a.Day.Compare(b.Day) })
	return out, nil
}

// DropPartition drops p, its rows with it, when tx commits.
func (tx *Tx) DropPartition(ctx context.Context, p Partition) error {
	if p.Name != partitionName(p.Table, p.Day) {
		return fmt.Errorf("drop partition: %q is not the partition of %s for %s", p.Name, p.Table, p.Day.Format(time.DateOnly))
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`DROP TABLE %q`, p.Name)); err != nil {
		return fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	return nil
}

// partitionName is the name of table's partition for day: the name
// migration 17 gave the partitions it made.
func partitionName(table string, day time.Time) string {
	return table + "_" + day.UTC().Format("20060102")
}

// utcDay is the start of t's UTC day.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// ErrLocked is what DropDays and InBatches return when another
// transaction (another replica) holds their lock: it is doing the work.
var ErrLocked = errors.New("another transaction holds the lock")

// AdvisoryKey is the PostgreSQL advisory lock of the key its parameter
// names, in the schema the connection uses: advisory locks are the whole
// database's, and Sluice's tables are one schema's, so two deployments (or
// two tests) in their own schemas of one database must not wait for each
// other's migrations, partitions or retention.
const AdvisoryKey = `hashtextextended(current_schema() || '/' || CAST(CAST(? AS BIGINT) AS TEXT), 0)`

// DropDays drops the partitions of table whose UTC day ends by cutoff,
// oldest first, each in a transaction of its own that first takes the
// advisory lock key (without waiting: ErrLocked when another holds it)
// and runs keep, which copies what must outlive the partition's rows and
// says how many they are. It returns the sum of what keep said in the
// transactions that committed. It does nothing on SQLite.
func (db *DB) DropDays(ctx context.Context, table string, cutoff time.Time, key int64, keep func(*Tx, Partition) (int64, error)) (int64, error) {
	parts, err := db.Partitions(ctx, table)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, p := range parts {
		if p.Day.AddDate(0, 0, 1).After(cutoff) {
			break
		}
		var n int64
		err := db.InTx(ctx, func(tx *Tx) error {
			if err := tx.lock(ctx, key); err != nil {
				return err
			}
			var err error
			if n, err = keep(tx, p); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, ddlLockTimeout); err != nil {
				return err
			}
			return tx.DropPartition(ctx, p)
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// InBatches runs step in transactions of their own, each of which first
// takes the advisory lock key as DropDays does, until step reports that
// it did less than a whole batch of size rows; after, if not nil, runs
// once each has committed. It returns the sum of the rows step did in the
// transactions that committed. A batch per transaction lets other writers
// in between: on SQLite a transaction holds the database's one write lock.
func (db *DB) InBatches(ctx context.Context, key int64, size int, step func(*Tx) (rows int, err error), after func()) (int64, error) {
	var total int64
	for {
		var n int
		err := db.InTx(ctx, func(tx *Tx) error {
			if err := tx.lock(ctx, key); err != nil {
				return err
			}
			var err error
			n, err = step(tx)
			return err
		})
		if err != nil {
			return total, err
		}
		total += int64(n)
		if after != nil {
			after()
		}
		if n < size {
			return total, nil
		}
	}
}

// lock takes the advisory lock key for the rest of tx, or returns
// ErrLocked when another transaction holds it. On SQLite it does nothing:
// tx holds the database's write lock already.
func (tx *Tx) lock(ctx context.Context, key int64) error {
	if tx.d != &postgresDialect {
		return nil
	}
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(`+AdvisoryKey+`)`, key).Scan(&got); err != nil {
		return err
	}
	if !got {
		return ErrLocked
	}
	return nil
}
