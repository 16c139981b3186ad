package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// shutdownTemplate is the catalog of the shutdown tests: %s is the SQLite
// path, then the shutdown grace, then the simulator's URL. Alias "one"
// streams through k1; alias "slow" answers through k2.
const shutdownTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: CLUSTER_ADMIN_TOKEN
  shutdown_grace: %s
  timeouts: {connect: 2s, first_byte: 20s, idle: 5s, total: 60s}
database: {url: "sqlite://%s"}
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
credentials:
  - {id: k1, secret_env: K1, endpoints: [ep-a], models: [m-one], max_inflight: 64}
  - {id: k2, secret_env: K2, endpoints: [ep-a], models: [m-slow], max_inflight: 64}
models:
  - alias: one
    deployments: [{model: m-one, endpoints: [ep-a]}]
  - alias: slow
    deployments: [{model: m-slow, endpoints: [ep-a]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// shutdownGateway is a `sluice serve` process for the shutdown tests.
type shutdownGateway struct {
	*replica
	c      *cluster
	dbPath string
}

// startShutdownGateway starts sluice with the given shutdown grace in front
// of a simulator whose k1 streams with chunkDelay between events and whose
// k2 answers after slowLatency.
func startShutdownGateway(t *testing.T, grace string, chunkDelay, slowLatency time.Duration) *shutdownGateway {
	t.Helper()
	bin := sluiceBinary(t)
	sim := simulator.New(simulator.Options{Keys: map[string]simulator.Behavior{
		upstreamKey("k1"): {ChunkDelay: chunkDelay},
		upstreamKey("k2"): {Latency: slowLatency},
	}})
	srv := httptest.NewServer(sim)
	c := &cluster{t: t, sim: sim, client: &http.Client{}, logLevel: "info"}
	t.Cleanup(func() { c.client.CloseIdleConnections(); srv.Close() })
	t.Cleanup(sim.Close)
	dir := t.TempDir()
	db := filepath.Join(dir, "sluice.db")
	g := &shutdownGateway{c: c, dbPath: db}
	g.replica = c.start(bin, "gw", dir, fmt.Sprintf(shutdownTemplate, grace, db, srv.URL))
	c.waitReady(g.replica)
	return g
}

// streamResult is what one caller of a stream saw.
type streamResult struct {
	requestID string
	status    int
	events    []string // data of each event, in order
	afterTerm int      // events received after SIGTERM was sent
	err       error
}

// streams starts n streams of alias "one", returns once each has received
// its first event, and delivers each one's result when it ends. terminated
// is closed by the test when it has sent SIGTERM.
func (g *shutdownGateway) streams(n int, terminated <-chan struct{}) <-chan streamResult {
	g.c.t.Helper()
	results := make(chan streamResult, n)
	var started sync.WaitGroup
	for range n {
		started.Add(1)
		go func() {
			results <- g.stream(terminated, started.Done)
		}()
	}
	started.Wait()
	return results
}

// stream sends one streamed chat and reads it to its end; first is called
// once the first event (or a failure) has arrived.
func (g *shutdownGateway) stream(terminated <-chan struct{}, first func()) (res streamResult) {
	once := sync.OnceFunc(first)
	defer once()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body := `{"model":"one","stream":true,"messages":[{"role":"user","content":"hello there"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.c.client.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	res.status, res.requestID = resp.StatusCode, resp.Header.Get("X-Request-Id")
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		res.events = append(res.events, data)
		select {
		case <-terminated:
			res.afterTerm++
		default:
		}
		once()
	}
	res.err = lines.Err()
	return res
}

// post sends one non-stream chat for alias and returns its status, request
// ID and body.
func (g *shutdownGateway) post(alias string) (status int, requestID, body string, err error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+alias+`","messages":[{"role":"user","content":"hello there"}]}`))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.c.client.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Request-Id"), string(b), err
}

// terminate sends SIGTERM and waits for the process to exit; it returns
// the exit code.
func (g *shutdownGateway) terminate(t *testing.T) int {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-g.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice did not exit within 60s of SIGTERM\nstderr:\n%s", g.stderr.String())
	}
	return g.cmd.ProcessState.ExitCode()
}

// usage reads every usage record the process left in its database, by
// request ID.
func (g *shutdownGateway) usage(t *testing.T) map[string]sluice.UsageRecord {
	t.Helper()
	db, err := sqldb.Open(t.Context(), "sqlite://"+g.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recs, err := sqlledger.New(db).ListUsage(t.Context(), ledger.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byID := make(map[string]sluice.UsageRecord, len(recs))
	for _, r := range recs {
		byID[r.RequestID] = r
	}
	return byID
}

// checkSettled checks that the request has its usage record (with the
// status the caller saw) and its access-log line.
func (g *shutdownGateway) checkSettled(t *testing.T, recs map[string]sluice.UsageRecord, requestID string, status int) {
	t.Helper()
	rec, ok := recs[requestID]
	switch {
	case requestID == "":
		t.Error("a request has no X-Request-Id")
	case !ok:
		t.Errorf("request %s has no usage record", requestID)
	case rec.Status != status:
		t.Errorf("request %s usage record status = %d, want %d", requestID, rec.Status, status)
	}
	if !strings.Contains(g.stderr.String(), `"msg":"request","request_id":"`+requestID+`"`) {
		t.Errorf("request %s has no access-log line", requestID)
	}
}

// At SIGTERM, streams longer than server.shutdown_grace run on for the
// grace, then end with an error event saying the gateway is shutting down;
// a non-stream request still waiting for its upstream is answered 503; each
// is settled (usage record, access-log line) and the process exits 0.
func TestShutdownEndsStreamsLongerThanTheGrace(t *testing.T) {
	const n = 4
	// A stream of ~20 events 400ms apart lasts ~8s; the grace is 2s.
	g := startShutdownGateway(t, "2s", 400*time.Millisecond, 30*time.Second)
	terminated := make(chan struct{})
	results := g.streams(n, terminated)
	type answer struct {
		status          int
		requestID, body string
		err             error
	}
	slow := make(chan answer, 1)
	go func() {
		var a answer
		a.status, a.requestID, a.body, a.err = g.post("slow")
		slow <- a
	}()
	eventually(t, 5*time.Second, "the slow request reaches the upstream", func() bool {
		for _, r := range g.c.sim.Requests() {
			if r.Model == "m-slow" {
				return true
			}
		}
		return false
	})

	close(terminated)
	if code := g.terminate(t); code != 0 {
		t.Errorf("exit code = %d, want 0\nstderr:\n%s", code, g.stderr.String())
	}
	recs := g.usage(t)
	for range n {
		r := <-results
		if r.err != nil || r.status != http.StatusOK || len(r.events) == 0 {
			t.Errorf("stream %s = %d, %d events, %v; want 200 and events", r.requestID, r.status, len(r.events), r.err)
			continue
		}
		if r.afterTerm < 2 {
			t.Errorf("stream %s got %d events after SIGTERM, want it to go on for the grace", r.requestID, r.afterTerm)
		}
		last := r.events[len(r.events)-1]
		if !strings.Contains(last, `"code":"server_busy"`) || !strings.Contains(last, "the gateway is shutting down") {
			t.Errorf("stream %s ended with %s, want the shutdown error event", r.requestID, last)
		}
		g.checkSettled(t, recs, r.requestID, http.StatusOK)
		if ex := recs[r.requestID].Executions; len(ex) != 1 || ex[0].Status != sluice.ExecutionCancelled {
			t.Errorf("stream %s executions = %+v, want one cancelled", r.requestID, ex)
		}
	}
	a := <-slow
	if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "the gateway is shutting down") {
		t.Errorf("non-stream request cut by the shutdown = %d %s (%v), want 503 saying the gateway is shutting down", a.status, a.body, a.err)
	}
	g.checkSettled(t, recs, a.requestID, http.StatusServiceUnavailable)
}

// Streams shorter than the grace end normally after SIGTERM.
func TestShutdownLetsShortStreamsFinish(t *testing.T) {
	const n = 3
	// A stream of ~20 events 100ms apart lasts ~2s; the grace is 30s.
	g := startShutdownGateway(t, "30s", 100*time.Millisecond, 0)
	terminated := make(chan struct{})
	results := g.streams(n, terminated)
	close(terminated)
	if code := g.terminate(t); code != 0 {
		t.Errorf("exit code = %d, want 0\nstderr:\n%s", code, g.stderr.String())
	}
	recs := g.usage(t)
	for range n {
		r := <-results
		if r.err != nil || r.status != http.StatusOK || len(r.events) == 0 {
			t.Errorf("stream %s = %d, %d events, %v; want 200 and events", r.requestID, r.status, len(r.events), r.err)
			continue
		}
		if last := r.events[len(r.events)-1]; last != "[DONE]" {
			t.Errorf("stream %s ended with %s, want [DONE]", r.requestID, last)
		}
		g.checkSettled(t, recs, r.requestID, http.StatusOK)
		if rec := recs[r.requestID]; !rec.Usage.Measured {
			t.Errorf("stream %s usage = %+v, want it measured", r.requestID, rec.Usage)
		}
	}
}

// startCatalogGateway starts a gateway in this process on the harness's
// catalog with its database section replaced by database and its state
// section by state, with env added to the test environment.
func startCatalogGateway(t *testing.T, database, state string, env map[string]string) *app.Gateway {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	doc := fmt.Sprintf(catalogTemplate, "unused", state, srv.URL, srv.URL)
	doc = strings.Replace(doc, `database: {url: "sqlite://unused"}`, "database: "+database, 1)
	cfg := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	all := maps.Clone(testEnv)
	maps.Copy(all, env)
	gw, err := app.Start(t.Context(), app.Options{
		ConfigPath: cfg,
		Log:        slog.New(slog.DiscardHandler),
		LookupEnv:  func(k string) (string, bool) { v, ok := all[k]; return v, ok },
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return gw
}

// checkCatalogGateway checks that gw serves a chat and that its catalog, as
// the admin API shows it, holds none of secrets.
func checkCatalogGateway(t *testing.T, gw *app.Gateway, secrets ...string) {
	t.Helper()
	h := &harness{t: t, gw: gw}
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != http.StatusOK {
		t.Fatalf("chat = %d %s, want 200", code, body)
	}
	code, doc := h.adminGet("/admin/catalog")
	if code != http.StatusOK {
		t.Fatalf("GET /admin/catalog = %d %s", code, doc)
	}
	for _, s := range secrets {
		if strings.Contains(doc, s) {
			t.Errorf("GET /admin/catalog shows %q:\n%s", s, doc)
		}
	}
}

// A gateway whose database URL comes from the environment opens that
// database, and its catalog does not show the URL.
func TestDatabaseURLFromEnvironment(t *testing.T) {
	db := filepath.Join(t.TempDir(), "from-env.db")
	gw := startCatalogGateway(t, "{url_env: SLUICE_TEST_DATABASE_URL}", "{backend: memory}",
		map[string]string{"SLUICE_TEST_DATABASE_URL": "sqlite://" + db})
	checkCatalogGateway(t, gw, db)
	h := &harness{t: t, dbPath: db}
	if recs := h.usage(t, 1); len(recs) != 1 {
		t.Errorf("usage records in the database named by SLUICE_TEST_DATABASE_URL = %d, want 1", len(recs))
	}
}

// GET /admin/catalog shows no database or Redis password, whether the URLs
// are written in the catalog, named by a variable or read from a file.
func TestAdminCatalogShowsNoURLPassword(t *testing.T) {
	pg, pgPassword := withPassword(t, testenv.Postgres(t), "postgres", "pg-PASSWORD-5c2e9a")
	rd, redisPassword := withPassword(t, testenv.Redis(t), "default", "redis-PASSWORD-8d4f1b")
	prefix := testenv.RedisPrefix(t, rd)
	redisFile := filepath.Join(t.TempDir(), "redis-url")
	if err := os.WriteFile(redisFile, []byte(rd+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		database, redis string
	}{
		// The usage spool goes to the test's own directory, not data/spool in the package.
		{"url", fmt.Sprintf("{url: %q, spool_dir: %q}", pg, t.TempDir()), fmt.Sprintf("url: %q", rd)},
		{"url_env and url_file", fmt.Sprintf("{url_env: SLUICE_TEST_DATABASE_URL, spool_dir: %q}", t.TempDir()), "url_file: " + redisFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := fmt.Sprintf("{backend: redis, redis: {%s, prefix: %q}}", tt.redis, prefix)
			gw := startCatalogGateway(t, tt.database, state, map[string]string{"SLUICE_TEST_DATABASE_URL": pg})
			checkCatalogGateway(t, gw, pgPassword, redisPassword)
		})
	}
}

// withPassword returns raw with a password in its user info (password,
// as user, unless raw has one already) and that password.
func withPassword(t *testing.T, raw, user, password string) (string, string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := u.User.Password(); ok {
		return raw, p
	}
	if u.User != nil {
		user = u.User.Username()
	}
	u.User = url.UserPassword(user, password)
	return u.String(), password
}
