package events

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Table is the reporting table `sluice consume` writes: one row per event,
// keyed by its ID, so that an event delivered twice is stored once.
const Table = "sluice_usage_events"

// columns are Table's columns, in insert order.
var columns = []string{"event_id", "kind", "request_id", "tenant", "key_id", "alias", "occurred_at",
	"status", "total_tokens", "billing_account", "price_micros", "cost_micros", "payload"}

// reportDB is the reporting database and its dialect.
type reportDB struct {
	db       *sql.DB
	postgres bool
}

// openReportDB opens a postgres:// or sqlite:// URL and creates Table if it
// is missing. Errors name the scheme, never the URL: it may hold a password.
func openReportDB(ctx context.Context, url string) (*reportDB, error) {
	scheme, rest, _ := strings.Cut(url, "://")
	var r reportDB
	var err error
	switch scheme {
	case "postgres", "postgresql":
		r.postgres = true
		r.db, err = sql.Open("pgx", url)
	case "sqlite":
		path, _, _ := strings.Cut(rest, "?")
		r.db, err = sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	default:
		return nil, fmt.Errorf("reporting database: unknown scheme %q (want postgres or sqlite)", scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("reporting database: %w", err)
	}
	if err := r.db.PingContext(ctx); err != nil {
		r.db.Close()
		return nil, fmt.Errorf("reporting database: connect: %w", err)
	}
	ts, js := "TEXT", "TEXT"
	if r.postgres {
		ts, js = "TIMESTAMPTZ", "JSONB"
	}
	ddl := []string{
		`CREATE TABLE IF NOT EXISTS ` + Table + ` (
			event_id TEXT PRIMARY KEY,
			kind TEXT NOT NULL,
			request_id TEXT NOT NULL,
			tenant TEXT NOT NULL,
			key_id TEXT NOT NULL,
			alias TEXT NOT NULL,
			occurred_at ` + ts + ` NOT NULL,
			status INTEGER,
			total_tokens BIGINT,
			billing_account TEXT,
			price_micros BIGINT,
			cost_micros BIGINT,
			payload ` + js + ` NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS ` + Table + `_kind_time ON ` + Table + ` (kind, occurred_at)`,
		`CREATE INDEX IF NOT EXISTS ` + Table + `_request ON ` + Table + ` (request_id)`,
	}
	for _, q := range ddl {
		if _, err := r.db.ExecContext(ctx, q); err != nil {
			r.db.Close()
			return nil, fmt.Errorf("reporting database: create %s: %w", Table, err)
		}
	}
	return &r, nil
}

// insert stores evs in one transaction; an event already there is skipped.
func (r *reportDB) insert(ctx context.Context, evs []decoded) error {
	var q strings.Builder
	q.WriteString("INSERT INTO " + Table + " (" + strings.Join(columns, ", ") + ") VALUES ")
	args := make([]any, 0, len(evs)*len(columns))
	for i, d := range evs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteByte('(')
		for j := range columns {
			if j > 0 {
				q.WriteString(", ")
			}
			if r.postgres {
				q.WriteString("$" + strconv.Itoa(i*len(columns)+j+1))
			} else {
				q.WriteByte('?')
			}
		}
		q.WriteByte(')')
		args = append(args, d.row()...)
	}
	q.WriteString(" ON CONFLICT (event_id) DO NOTHING")
	_, err := r.db.ExecContext(ctx, q.String(), args...)
	return err
}

// decoded is an event read from the stream, with its message.
type decoded struct {
	ev      Event
	payload []byte
	msg     jetstream.Msg
}

func (d *decoded) row() []any {
	e := &d.ev
	var status, tokens, price, cost any
	var account any
	switch {
	case e.Request != nil:
		status, tokens = e.Request.Status, e.Request.Usage.TotalTokens
	case e.Execution != nil:
		status, tokens = e.Execution.HTTPStatus, e.Execution.Usage.TotalTokens
	case e.Charge != nil:
		account, price, cost = e.Charge.BillingAccount, e.Charge.PriceMicros, e.Charge.CostMicros
	}
	return []any{e.EventID, e.Kind, e.RequestID, e.Tenant, e.KeyID, e.Alias, e.OccurredAt.UTC(),
		status, tokens, account, price, cost, string(d.payload)}
}

// decode reads one message's event, or says why it is not one this
// consumer can store.
func decode(msg jetstream.Msg) (decoded, error) {
	d := decoded{payload: msg.Data(), msg: msg}
	if err := json.Unmarshal(d.payload, &d.ev); err != nil {
		return d, fmt.Errorf("not an event: %w", err)
	}
	switch {
	case d.ev.Schema != Schema:
		return d, fmt.Errorf("schema %q, want %q", d.ev.Schema, Schema)
	case d.ev.EventID == "" || d.ev.RequestID == "":
		return d, errors.New("no event_id or request_id")
	case !slices.Contains(Kinds, d.ev.Kind):
		return d, fmt.Errorf("unknown kind %q", d.ev.Kind)
	}
	return d, nil
}

// Consumer reads the stream with a durable consumer and writes each event
// into the reporting database, acknowledging it only once committed.
type Consumer struct {
	db      *reportDB
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  jetstream.StreamConfig
	durable string
	log     *slog.Logger
	cons    jetstream.Consumer // nil until made
}

// NewConsumer opens the reporting database (creating its table) and
// connects to NATS; a server that is down is reached when it is back.
func NewConsumer(ctx context.Context, c Connection, dbURL, durable string) (*Consumer, error) {
	db, err := openReportDB(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	nc, err := c.connect()
	if err != nil {
		db.db.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		db.db.Close()
		return nil, fmt.Errorf("events: jetstream: %w", err)
	}
	n := c.Config
	return &Consumer{db: db, nc: nc, js: js, durable: durable, log: c.Log,
		stream: jetstream.StreamConfig{Name: n.Stream, Subjects: []string{n.SubjectPrefix + ".>"},
			Storage: jetstream.FileStorage, Duplicates: n.DuplicateWindow.D()}}, nil
}

// Close closes the connection and the database.
func (c *Consumer) Close() error {
	c.nc.Close()
	return c.db.db.Close()
}

// fetchBatch bounds the events stored in one transaction.
const fetchBatch = 500

// retryWait is how long Run waits after NATS or the database failed.
const retryWait = time.Second

// Run stores events until ctx ends (nil), or, with drain, until the
// consumer has nothing left to deliver and nothing unacknowledged (nil).
// NATS or the database going away is waited out, never an error: what was
// not acknowledged is delivered again.
func (c *Consumer) Run(ctx context.Context, drain bool) error {
	for ctx.Err() == nil {
		n, err := c.step(ctx)
		if err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "events: consume: retrying", slog.Any("err", err))
			sleep(ctx, retryWait)
			continue
		}
		if n == 0 && drain {
			info, err := c.cons.Info(ctx)
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return nil
			}
		}
	}
	return nil
}

// step fetches one batch and stores it, and says how many it fetched.
func (c *Consumer) step(ctx context.Context) (int, error) {
	if c.cons == nil {
		if err := EnsureStream(ctx, c.js, c.stream); err != nil {
			return 0, err
		}
		cons, err := c.js.CreateOrUpdateConsumer(ctx, c.stream.Name, jetstream.ConsumerConfig{
			Durable: c.durable, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: c.stream.Subjects[0],
			AckWait: 30 * time.Second, MaxAckPending: 4 * fetchBatch,
		})
		if err != nil {
			return 0, fmt.Errorf("consumer %s: %w", c.durable, err)
		}
		c.cons = cons
	}
	batch, err := c.cons.Fetch(fetchBatch, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return 0, err
	}
	var evs []decoded
	for msg := range batch.Messages() {
		d, err := decode(msg)
		if err != nil {
			// Delivering it again would fail again: end its delivery for
			// good (plain Term: servers before 2.10.4 ignore a reason).
			c.log.LogAttrs(ctx, slog.LevelError, "events: consume: message dropped", slog.String("subject", msg.Subject()), slog.Any("err", err))
			_ = msg.Term()
			continue
		}
		evs = append(evs, d)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(evs) == 0 {
		return 0, err
	}
	if len(evs) == 0 {
		return 0, nil
	}
	if err := c.db.insert(ctx, evs); err != nil {
		for _, d := range evs {
			_ = d.msg.NakWithDelay(retryWait)
		}
		return 0, fmt.Errorf("reporting database: insert: %w", err)
	}
	for _, d := range evs {
		// An acknowledgement lost here is a redelivery, which the insert
		// absorbs.
		_ = d.msg.Ack()
	}
	return len(evs), nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
