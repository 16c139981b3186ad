package events

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/testenv"
)

// publish publishes the events of recs through a publisher of its own.
func publish(t *testing.T, conn Connection, recs []sluice.UsageRecord) {
	t.Helper()
	pub, err := NewPublisher(conn, "USD", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	eventually(t, 10*time.Second, "connected", pub.nc.IsConnected)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := pub.Publish(ctx, recs); err != nil {
		t.Fatalf("Publish = %v", err)
	}
}

func records(from, to int) []sluice.UsageRecord {
	var recs []sluice.UsageRecord
	for i := from; i < to; i++ {
		recs = append(recs, billed(i))
	}
	return recs
}

// drain runs a consumer until it has nothing left, within a bound.
func drain(t *testing.T, conn Connection, dbURL, durable string) {
	t.Helper()
	c, err := NewConsumer(t.Context(), conn, dbURL, durable)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Run(ctx, true); err != nil || ctx.Err() != nil {
		t.Fatalf("Run(drain) = %v (%v)", err, ctx.Err())
	}
}

// tally is what the reporting table holds: rows by kind, and the charges.
type tally struct {
	rows, requests, executions, charges int
	price, cost                         int64
}

func readTally(t *testing.T, db *sql.DB) tally {
	t.Helper()
	var g tally
	err := db.QueryRowContext(t.Context(), `SELECT count(*),
		coalesce(sum(CASE WHEN kind = 'request' THEN 1 ELSE 0 END), 0),
		coalesce(sum(CASE WHEN kind = 'execution' THEN 1 ELSE 0 END), 0),
		coalesce(sum(CASE WHEN kind = 'charge' THEN 1 ELSE 0 END), 0),
		coalesce(sum(price_micros), 0), coalesce(sum(cost_micros), 0) FROM `+Table).
		Scan(&g.rows, &g.requests, &g.executions, &g.charges, &g.price, &g.cost)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func wantTally(n int) tally {
	return tally{rows: 3 * n, requests: n, executions: n, charges: n, price: 100 * int64(n), cost: 40 * int64(n)}
}

// TestConsumeIntoPostgreSQL drains the stream into PostgreSQL, then drains
// it again from the start with a second durable consumer: every event is
// delivered twice, and stored once.
func TestConsumeIntoPostgreSQL(t *testing.T) {
	dbURL := testenv.Postgres(t)
	conn := Connection{Config: testStream(testenv.NATS(t)), Name: "consume-test", Log: discard}
	t.Cleanup(func() { deleteStream(t, conn.Config) })
	publish(t, conn, records(0, 40))

	drain(t, conn, dbURL, "reports-a")
	drain(t, conn, dbURL, "reports-b") // all of it again
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, want := readTally(t, db), wantTally(40); got != want {
		t.Errorf("reporting table = %+v, want %+v: each event once", got, want)
	}
	var payloadKind string
	if err := db.QueryRowContext(t.Context(), `SELECT payload->>'kind' FROM `+Table+` WHERE event_id = 'req-00007:charge'`).Scan(&payloadKind); err != nil || payloadKind != "charge" {
		t.Errorf("payload of req-00007:charge: kind %q, %v; want the event as JSONB", payloadKind, err)
	}
}

// TestConsumeWaitsOutItsDatabaseAndNATS: a message that is not an event
// is set aside; while the table cannot be written the batch is delivered
// again until it can; NATS killed and started again is waited out. Every
// event ends up stored once.
func TestConsumeWaitsOutItsDatabaseAndNATS(t *testing.T) {
	srv := testenv.StartNATS(t)
	conn := Connection{Config: testStream(srv.URL()), Name: "consume-test", Log: discard}
	dbURL := "sqlite://" + filepath.Join(t.TempDir(), "reports.db")
	publish(t, conn, records(0, 20))
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(conn.Config.SubjectPrefix+".request.web", []byte(`{"schema":"someone.else.v9"}`)); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	nc.Close()

	c, err := NewConsumer(t.Context(), conn, dbURL, "reports")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db := c.db.db
	if _, err := db.ExecContext(t.Context(), `ALTER TABLE `+Table+` RENAME TO away`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, false) }()
	time.Sleep(1500 * time.Millisecond) // inserts fail and are delivered again
	if _, err := db.ExecContext(t.Context(), `ALTER TABLE away RENAME TO `+Table); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the first 20 records stored", func() bool { return readTally(t, db) == wantTally(20) })
	// The foreign message was terminated, not left to be delivered again.
	eventually(t, 10*time.Second, "nothing pending or unacknowledged", func() bool {
		info, err := c.cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})

	// Killed, the server may forget the last acknowledgements: those events
	// come again after the ack wait, and the insert absorbs them.
	srv.Kill()
	time.Sleep(500 * time.Millisecond)
	srv.Start()
	publish(t, conn, records(20, 30))
	eventually(t, 20*time.Second, "30 records stored", func() bool { return readTally(t, db) == wantTally(30) })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// deleteStream removes a test's stream from the shared server.
func deleteStream(t *testing.T, cfg *config.EventsNATS) {
	nc, err := nats.Connect(cfg.URL)
	if err != nil {
		t.Errorf("delete stream %s: %v", cfg.Stream, err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Errorf("delete stream %s: %v", cfg.Stream, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, cfg.Stream); err != nil {
		t.Errorf("delete stream %s: %v", cfg.Stream, err)
	}
}
