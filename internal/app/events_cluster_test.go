package app_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// eventsClusterTemplate is the catalog of the replicas of the events
// acceptance test: one PostgreSQL (%q: its URL), a spool each (%q), one
// Redis (%s: the state section), the simulator (%s), key web billed to
// acme, and the events section (%s).
const eventsClusterTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: CLUSTER_ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: %q, spool_dir: %q}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: org-1, max_inflight: 64}
` + clusterCredentials + `keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, billing_account: acme}
billing:
  plans:
    - id: standard
      prices:
        - {alias: one, input: "1.00", output: "2.00", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
  costs:
    - {model: m-one, input: "0.50", output: "1.00", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: acme, plan: standard, max_inflight: 64}
%s`

// TestEventsAcceptance is issue 27's proof for events: three replicas
// share one PostgreSQL and one Redis and publish to one private NATS;
// 5,000 billed requests run through them while NATS is killed for 10 s and
// started again, and one replica is killed with SIGKILL (its records in
// its spool only) and started again. Then `sluice consume --drain` writes
// the stream into a reporting database: it has exactly one request row per
// request answered 200, its charges equal the ledger's, its executions the
// database's, and the stream holds each event once.
func TestEventsAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 requests through three replicas: skipped with -short")
	}
	const total, workers = 5000, 24
	natsSrv := testenv.StartNATS(t)
	stream := newEventStream(t, natsSrv.URL())
	dbURL, reportURL := testenv.Postgres(t), testenv.Postgres(t)
	redisURL := testenv.Redis(t)
	state := redisState(redisURL, testenv.RedisPrefix(t, redisURL))
	bin := sluiceBinary(t)

	opts := simulator.Options{Accounts: map[string]simulator.AccountLimits{"org-1": {MaxInflight: 64}}, Keys: map[string]simulator.Behavior{}}
	for _, id := range clusterKeys {
		opts.Keys[upstreamKey(id)] = simulator.Behavior{Account: "org-1", Latency: 2 * time.Millisecond}
	}
	c := &cluster{t: t, sim: simulator.New(opts), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}}
	srv := httptest.NewServer(c.sim)
	t.Cleanup(func() { c.client.CloseIdleConnections(); srv.Close() })
	t.Cleanup(c.sim.Close)

	dir := t.TempDir()
	catalogOf := func(name string) string {
		return fmt.Sprintf(eventsClusterTemplate, dbURL, filepath.Join(dir, "spool-"+name), state, srv.URL, stream.section(""))
	}
	names := []string{"A", "B", "C"}
	replicas := make([]*replica, len(names))
	for i, name := range names {
		replicas[i] = c.start(bin, name, dir, catalogOf(name))
		c.waitReady(replicas[i])
	}
	if _, err := adminclient.NewClient("http://"+replicas[0].admin, clusterAdminToken).
		TopUp(t.Context(), "acme", "prepaid", admin.MoneyChange{Amount: 1000 * billing.Unit, Reason: "prepaid"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas { // each reads the balance within a second
		eventually(t, 5*time.Second, "replica "+r.name+" admits acme", func() bool {
			code, _, _ := c.chat(t.Context(), r)
			return code == http.StatusOK
		})
	}

	// The load: workers take requests in turn, round-robin over the
	// replicas; C can be paused (its requests go to A and B) so that it is
	// killed with none in flight.
	var (
		mu       sync.Mutex
		answered = map[string]bool{} // X-Request-Id of every 200
		others   = map[string]int{}  // other outcomes
		cPaused  atomic.Bool
		inflight [3]atomic.Int64
		reps     atomic.Pointer[[]*replica]
	)
	reps.Store(&replicas)
	send := func(i int) {
		rs := *reps.Load()
		k := i % 3
		inflight[k].Add(1)
		if k == 2 && cPaused.Load() {
			inflight[k].Add(-1)
			k = i % 2
			inflight[k].Add(1)
		}
		defer inflight[k].Add(-1)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+rs[k].addr+"/v1/chat/completions",
			strings.NewReader(strings.Replace(chatBody, "fast", "one", 1)))
		req.Header.Set("Authorization", "Bearer "+keyWeb)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.client.Do(req)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			others["error: "+err.Error()]++
			return
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch id := resp.Header.Get("X-Request-Id"); {
		case err == nil && resp.StatusCode == http.StatusOK:
			if answered[id] {
				t.Errorf("request ID %s answered twice", id)
			}
			answered[id] = true
		default:
			others[fmt.Sprintf("%d %v", resp.StatusCode, err)]++
		}
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				send(i)
			}
		})
	}
	// Paced at 250 a second, so that the run lasts about 20 s and NATS's
	// 10 s outage falls in the middle of it.
	const every = 4 * time.Millisecond
	started := time.Now()
	var chaos sync.WaitGroup
	for i := range total {
		time.Sleep(time.Until(started.Add(time.Duration(i) * every)))
		switch i {
		case total / 5:
			chaos.Go(func() {
				natsSrv.Kill()
				t.Logf("NATS killed after %d requests (%s)", i, time.Since(started).Round(time.Millisecond))
				time.Sleep(10 * time.Second)
				natsSrv.Start()
				t.Logf("NATS started again (%s)", time.Since(started).Round(time.Millisecond))
			})
		case total * 3 / 5:
			chaos.Go(func() {
				cPaused.Store(true)
				for inflight[2].Load() > 0 {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(50 * time.Millisecond) // its last records spooled, not all stored or published
				old := (*reps.Load())[2]
				old.kill()
				t.Logf("replica C killed with SIGKILL after %d requests (%s)", i, time.Since(started).Round(time.Millisecond))
				restarted := c.start(bin, "C", dir, catalogOf("C"))
				c.waitReady(restarted)
				next := []*replica{replicas[0], replicas[1], restarted}
				reps.Store(&next)
				cPaused.Store(false)
				t.Logf("replica C started again (%s)", time.Since(started).Round(time.Millisecond))
			})
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	chaos.Wait()
	t.Logf("%d requests in %s: %d answered 200, others %v", total, time.Since(started).Round(time.Millisecond), len(answered), others)
	if len(answered) < total*99/100 {
		t.Fatalf("only %d of %d requests answered 200: %v", len(answered), total, others)
	}

	// Stopped gracefully, each replica flushes its spool to the database
	// and the stream; none is left.
	for _, r := range *reps.Load() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("replica %s did not stop within 30s", r.name)
		}
	}
	for _, name := range names {
		if left, _ := filepath.Glob(filepath.Join(dir, "spool-"+name, "w-*", "*.seg")); len(left) > 0 {
			t.Errorf("replica %s left %v in its spool", name, left)
		}
	}

	cfg := filepath.Join(dir, "consume.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\n"+stream.section(fmt.Sprintf("{url: %q, durable: reports}", reportURL))), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if code := app.Run(ctx, []string{"consume", "--config", cfg, "--drain", "--log-level", "warn"}, io.Discard, &stderr); code != 0 || ctx.Err() != nil {
		t.Fatalf("sluice consume --drain = exit %d (%v)\n%s", code, ctx.Err(), stderr.String())
	}

	report, gateway := openSQL(t, reportURL), openSQL(t, dbURL)
	ok200 := map[string]bool{}
	rows, err := report.QueryContext(t.Context(), `SELECT request_id FROM `+events.Table+` WHERE kind = 'request' AND status = 200`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ok200[id] = true
	}
	rows.Close()
	missing := 0
	for id := range answered {
		if !ok200[id] {
			missing++
		}
	}
	// The warm-up chats (one 200 per replica) have rows too.
	if missing != 0 || len(ok200) != len(answered)+len(names) {
		t.Errorf("request rows with status 200 = %d, answered 200 = %d (+%d warm-up); %d answered requests have no row", len(ok200), len(answered), len(names), missing)
	}
	same := func(what, reportQ, gatewayQ string) {
		t.Helper()
		var got, want [2]int64
		if err := report.QueryRowContext(t.Context(), reportQ).Scan(&got[0], &got[1]); err != nil {
			t.Fatal(err)
		}
		if err := gateway.QueryRowContext(t.Context(), gatewayQ).Scan(&want[0], &want[1]); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: reporting %v, gateway's database %v", what, got, want)
		} else {
			t.Logf("%s: %v in both", what, got)
		}
	}
	same("requests (rows, distinct IDs)",
		`SELECT count(*), count(DISTINCT request_id) FROM `+events.Table+` WHERE kind = 'request'`,
		`SELECT count(*), count(DISTINCT request_id) FROM usage_records`)
	same("billed requests (charge events, records)",
		`SELECT count(*), count(DISTINCT request_id) FROM `+events.Table+` WHERE kind = 'charge'`,
		`SELECT count(*), count(DISTINCT request_id) FROM usage_records WHERE billed`)
	// The ledger's charge entries, as acme's statement lists them: one per
	// billed request with a price.
	db, err := sqldb.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	statement, err := sqlledger.New(db).Statement(t.Context(), "acme", time.Time{}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ledgerCharges, ledgerMicros int64
	for _, e := range statement {
		if e.Kind == ledger.EntryCharge {
			ledgerCharges++
			ledgerMicros -= int64(e.Amount)
		}
	}
	var eventCharges, eventMicros int64
	if err := report.QueryRowContext(t.Context(), `SELECT count(*), coalesce(sum(price_micros), 0) FROM `+events.Table+
		` WHERE kind = 'charge' AND price_micros > 0`).Scan(&eventCharges, &eventMicros); err != nil {
		t.Fatal(err)
	}
	if eventCharges != ledgerCharges || eventMicros != ledgerMicros || ledgerCharges < int64(len(answered)) {
		t.Errorf("charges: events %d (%d micros), ledger %d (%d micros); want equal, at least one per request answered (%d)",
			eventCharges, eventMicros, ledgerCharges, ledgerMicros, len(answered))
	} else {
		t.Logf("charges: %d, %d micros, in the events and the ledger alike", ledgerCharges, ledgerMicros)
	}
	same("executions (rows, requests)",
		`SELECT count(*), count(DISTINCT request_id) FROM `+events.Table+` WHERE kind = 'execution'`,
		`SELECT count(*), count(DISTINCT request_id) FROM executions`)
	var stored int64
	if err := report.QueryRowContext(t.Context(), `SELECT count(*) FROM `+events.Table).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if n := stream.count(); n != uint64(stored) {
		t.Errorf("the stream holds %d messages, the reporting table %d events: some were published twice", n, stored)
	}
}

func openSQL(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
