package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The durability proofs of issue #12: a settled request is charged exactly
// once — not lost, not doubled — when the gateway is killed with SIGKILL
// right after its requests completed, and when its database is down for
// ten seconds in the middle of the run. Each runs a real `sluice serve`
// and counts against the simulator's own tally of the requests it
// answered.

// billedCrashTemplate is crashTemplate billed: key web is bound to acme,
// whose 16 requests may run at once; alias one is priced by its tokens and
// per request, and costs the platform by its tokens. %s is the database
// section, then the simulator's URL.
var billedCrashTemplate = strings.Replace(crashTemplate, "KEY_WEB}", "KEY_WEB, billing_account: acme}", 1) + `billing:
  plans:
    - id: standard
      prices:
        - {alias: one, input: "1.00", output: "2.00", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
  costs:
    - {model: m-one, input: "0.50", output: "1.00", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: acme, plan: standard, max_inflight: 16}
`

// prepaid is what acme is topped up with: far more than the runs spend.
const prepaid billing.Micros = 1000 * billing.Unit

// billedRun is one gateway process (and its restarts) on one database in
// front of one simulator, and what its callers were answered.
type billedRun struct {
	t       *testing.T
	c       *cluster
	bin     string
	dir     string
	catalog string
	gw      *replica

	mu       sync.Mutex
	answered []string       // request IDs answered 200
	refused  map[string]int // other answers, by status and code
}

func newBilledRun(t *testing.T, database string) *billedRun {
	t.Helper()
	sim := simulator.New(simulator.Options{Keys: map[string]simulator.Behavior{upstreamKey("k1"): {}}})
	srv := httptest.NewServer(sim)
	r := &billedRun{t: t, bin: sluiceBinary(t), dir: t.TempDir(), refused: map[string]int{},
		c: &cluster{t: t, sim: sim, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}}
	t.Cleanup(func() { r.c.client.CloseIdleConnections(); srv.Close() })
	t.Cleanup(sim.Close)
	r.catalog = fmt.Sprintf(billedCrashTemplate, database, srv.URL)
	r.start("first")
	// The top-up goes through the admin API, idempotently: its retry
	// (here, on purpose) pays nothing more.
	for range 2 {
		if _, err := r.admin().TopUp(t.Context(), "acme", "prepaid", admin.MoneyChange{Amount: prepaid, Reason: "prepaid"}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *billedRun) start(name string) {
	r.gw = r.c.start(r.bin, name, r.dir, r.catalog)
	r.c.waitReady(r.gw)
}

func (r *billedRun) admin() *adminclient.Client {
	return adminclient.NewClient("http://"+r.gw.admin, clusterAdminToken)
}

// chat sends one chat of alias one (a stream when stream is set) and
// notes its answer: the request ID of a 200, else its status and code.
// It reports whether it was answered 200.
func (r *billedRun) chat(stream bool) bool {
	body := strings.Replace(chatBody, "fast", "one", 1)
	if stream {
		body = strings.Replace(body, `"model"`, `"stream":true,"model"`, 1)
	}
	req, _ := http.NewRequestWithContext(r.t.Context(), http.MethodPost, "http://"+r.gw.addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.c.client.Do(req)
	if err != nil {
		r.t.Errorf("chat: %v", err)
		return false
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.t.Errorf("chat %s: reading the answer: %v", resp.Header.Get("X-Request-Id"), err)
	case resp.StatusCode == http.StatusOK:
		r.answered = append(r.answered, resp.Header.Get("X-Request-Id"))
		return true
	default:
		var env struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(answer, &env)
		r.refused[fmt.Sprintf("%d %s", resp.StatusCode, env.Error.Code)]++
	}
	return false
}

// sent is how many chats were answered, 200 or not.
func (r *billedRun) sent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.answered)
	for _, v := range r.refused {
		n += v
	}
	return n
}

// served is the simulator's tally of chat completions, every one of which
// it must have answered whole: a refused request never reaches it.
func (r *billedRun) served() int {
	n := 0
	for _, rec := range r.c.sim.Requests() {
		if rec.Path != "/v1/chat/completions" {
			continue
		}
		if rec.Status != http.StatusOK || rec.Cancelled {
			r.t.Errorf("the simulator answered a chat %d (cancelled: %v)", rec.Status, rec.Cancelled)
		}
		n++
	}
	return n
}

// killAndCheck kills the gateway with SIGKILL at once, starts it again on
// the same data (it replays its spool), and checks the books against the
// simulator's tally: one usage record and one charge — of the record's
// price — per request answered, and acme's balance the top-up less the
// charges, in the store and through the admin API.
func (r *billedRun) killAndCheck(dbURL string) {
	t := r.t
	t.Helper()
	r.gw.kill()
	served := r.served()
	if served != len(r.answered) {
		t.Fatalf("the simulator answered %d requests, callers got %d answers 200", served, len(r.answered))
	}
	db, err := sqldb.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := sqlledger.New(db)
	recs, err := store.ListUsage(t.Context(), ledger.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sent := r.sent()
	t.Logf("at the kill the store had %d of the %d records; the restart replays the rest from the spool", len(recs), sent)
	r.start("restarted")
	for deadline := time.Now().Add(20 * time.Second); len(recs) < sent && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if recs, err = store.ListUsage(t.Context(), ledger.UsageFilter{}); err != nil {
			t.Fatal(err)
		}
	}
	// A refused request has its record too, without a charge.
	if len(recs) != sent {
		t.Fatalf("usage records = %d, want %d: one per request sent", len(recs), sent)
	}
	byID := map[string]sluice.UsageRecord{}
	for _, rec := range recs {
		byID[rec.RequestID] = rec
	}
	var charged billing.Micros
	for _, id := range r.answered {
		rec, ok := byID[id]
		if !ok || rec.Billing == nil || rec.Billing.Unmeasured || rec.Billing.Price <= 0 || rec.Billing.Account != "acme" {
			t.Fatalf("request %s: record %+v; want it stored, priced and charged to acme", id, rec.Billing)
		}
		entries, err := store.Entries(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Kind != ledger.EntryCharge || entries[0].Amount != -billing.Micros(rec.Billing.Price) {
			t.Fatalf("request %s: entries %+v; want one charge of %d", id, entries, rec.Billing.Price)
		}
		charged += billing.Micros(rec.Billing.Price)
	}
	statement, err := store.Statement(t.Context(), "acme", time.Time{}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[ledger.EntryKind]int{}
	for _, e := range statement {
		kinds[e.Kind]++
	}
	if kinds[ledger.EntryCharge] != served || kinds[ledger.EntryTopUp] != 1 || len(statement) != served+1 {
		t.Errorf("acme's entries by kind = %v; want %d charges and one top-up", kinds, served)
	}
	want := prepaid - charged
	a, err := r.admin().BillingAccount(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if a.Balance != want {
		t.Errorf("acme's balance = %s, want %s (top-up %s less %d charges of %s)", a.Balance, want, prepaid, served, charged)
	}
	t.Logf("%d requests answered and charged once each, %s in all; other answers: %v", served, charged, r.refused)
}

// TestKilledGatewayChargesEachRequestOnce: 1,000 requests of a billed key
// on SQLite, half of them streams, 16 at a time, then SIGKILL at once.
func TestKilledGatewayChargesEachRequestOnce(t *testing.T) {
	dir := t.TempDir()
	dbURL := "sqlite://" + filepath.Join(dir, "sluice.db")
	r := newBilledRun(t, fmt.Sprintf("{url: %q}", dbURL))
	r.send(1000, 16)
	if len(r.answered) != 1000 || len(r.refused) != 0 {
		t.Fatalf("%d of 1000 requests answered 200; others: %v", len(r.answered), r.refused)
	}
	r.killAndCheck(dbURL)
}

// TestDatabaseOutageChargesEachRequestOnce: a billed key on PostgreSQL,
// reached through a TCP proxy the test stops for ten seconds while
// requests keep coming. Records are spooled meanwhile; once the balance
// view is stale, billed requests are refused 503 (fail closed) and never
// reach the upstream; when the database is back the gateway replays its
// spool. Once 1,000 requests were answered the gateway is killed with
// SIGKILL, restarted, and every answered request is charged once.
func TestDatabaseOutageChargesEachRequestOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("the database is down for 10s: not with -short")
	}
	direct := testenv.Postgres(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.addr
	r := newBilledRun(t, fmt.Sprintf("{url: %q, spool_dir: %q}", u.String(), filepath.Join(t.TempDir(), "spool")))
	const total = 1000

	r.send(400, 8) // the database up
	proxy.stop()
	// Ten seconds of requests, one every 10ms: answered while the view is
	// fresh, refused once it is stale.
	var wg sync.WaitGroup
	tick := time.NewTicker(10 * time.Millisecond)
	for i := 0; i < 1000; i++ {
		<-tick.C
		wg.Go(func() { r.chat(i%2 == 0) })
	}
	tick.Stop()
	wg.Wait()
	proxy.start()
	r.mu.Lock()
	answered, stale := len(r.answered), r.refused["503 state_unavailable"]
	if stale == 0 || len(r.refused) != 1 {
		t.Errorf("answers other than 200 while the database was down = %v; want 503 state_unavailable once the view was stale, and nothing else", r.refused)
	}
	r.mu.Unlock()
	if answered <= 400 {
		t.Errorf("no request answered while the database was down (before the view went stale)")
	}
	// The gateway replays what it spooled once the database is back.
	db, err := sqldb.Open(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sent := r.sent()
	eventually(t, 15*time.Second, "the spooled records written after the outage", func() bool {
		recs, err := sqlledger.New(db).ListUsage(t.Context(), ledger.UsageFilter{})
		return err == nil && len(recs) == sent
	})
	// Billed requests are admitted again, and the run goes on to 1,000.
	eventually(t, 10*time.Second, "billed requests admitted again", func() bool { return r.chat(false) })
	r.send(total-len(r.answered), 8)
	t.Logf("answered while the database was down: %d; refused: %d", answered-400, stale)
	r.killAndCheck(direct)
}

// send sends n chats, half of them streams, concurrency at a time, each
// until it is answered 200.
func (r *billedRun) send(n, concurrency int) {
	work := make(chan bool)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for stream := range work {
				for !r.chat(stream) && r.t.Context().Err() == nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	for i := range n {
		work <- i%2 == 0
	}
	close(work)
	wg.Wait()
}

// tcpProxy forwards TCP connections to target. stop makes target
// unreachable through it — the listener closed, every connection cut —
// until start opens the same address again.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]bool
	stopped bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{t: t, target: target, addr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) start() {
	p.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was ours a moment ago; another socket may linger
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy listen %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr, p.stopped = ln, ln.Addr().String(), false
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// pipe copies between the caller and a new connection to target until
// either side ends or the proxy stops.
func (p *tcpProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() {
		io.Copy(up, c)
		up.Close()
	}()
	io.Copy(c, up)
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
