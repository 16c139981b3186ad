package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// crashTemplate is one gateway in front of one simulated provider; %s is
// the database section, then the simulator's URL. Its environment is the
// cluster tests' (clusterEnv).
const crashTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: CLUSTER_ADMIN_TOKEN
database: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
credentials:
  - {id: k1, secret_env: K1, endpoints: [ep-a]}
models:
  - alias: one
    deployments: [{model: m-one, endpoints: [ep-a]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// TestKilledGatewayLosesNoUsage completes requests through a real `sluice
// serve`, kills it with SIGKILL at once, and starts it again on the same
// data: the database then holds one usage record for every request the
// simulator answered — none lost, none doubled — on SQLite and PostgreSQL.
func TestKilledGatewayLosesNoUsage(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		dir := t.TempDir()
		url := "sqlite://" + filepath.Join(dir, "sluice.db")
		killAndCount(t, dir, fmt.Sprintf("{url: %q}", url), url)
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := testenv.Postgres(t)
		dir := t.TempDir()
		killAndCount(t, dir, fmt.Sprintf("{url: %q, spool_dir: %q}", url, filepath.Join(dir, "spool")), url)
	})
}

func killAndCount(t *testing.T, dir, database, dbURL string) {
	bin := sluiceBinary(t)
	sim := simulator.New(simulator.Options{Keys: map[string]simulator.Behavior{upstreamKey("k1"): {}}})
	srv := httptest.NewServer(sim)
	c := &cluster{t: t, sim: sim, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	t.Cleanup(func() { c.client.CloseIdleConnections(); srv.Close() })
	t.Cleanup(sim.Close)
	catalog := fmt.Sprintf(crashTemplate, database, srv.URL)

	first := c.start(bin, "first", dir, catalog)
	c.waitReady(first)
	var answered atomic.Int64
	chat := func(stream bool) {
		body := strings.Replace(chatBody, "fast", "one", 1)
		if stream {
			body = strings.Replace(body, `"model"`, `"stream":true,"model"`, 1)
		}
		if code, answer, err := c.do(t.Context(), http.MethodPost, "http://"+first.addr+"/v1/chat/completions", keyWeb, body); err != nil || code != http.StatusOK {
			t.Errorf("chat = %d %s (%v), want 200", code, answer, err)
			return
		}
		answered.Add(1)
	}
	// 200 quick requests, half of them streams, 16 at a time…
	var wg sync.WaitGroup
	work := make(chan bool)
	for range 16 {
		wg.Go(func() {
			for stream := range work {
				chat(stream)
			}
		})
	}
	for i := range 200 {
		work <- i%2 == 0
	}
	close(work)
	wg.Wait()
	// …then 20 at a low rate: each is the only one in its writer's batch.
	for i := range 20 {
		chat(i%2 == 0)
		time.Sleep(20 * time.Millisecond)
	}
	first.kill()

	served := 0
	for _, r := range sim.Requests() {
		if r.Path == "/v1/chat/completions" && r.Status == http.StatusOK && !r.Cancelled {
			served++
		}
	}
	if served != 220 || answered.Load() != 220 {
		t.Fatalf("the simulator served %d requests and callers got %d answers, want 220", served, answered.Load())
	}
	// The restarted gateway replays what the killed one left in its spool.
	c.waitReady(c.start(bin, "second", dir, catalog))
	db, err := sqldb.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := 0
	for deadline := time.Now().Add(5 * time.Second); stored < served && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		recs, err := sqlledger.New(db).ListUsage(t.Context(), ledger.UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		stored = len(recs)
	}
	if stored != served {
		t.Errorf("usage records = %d, want %d: one per request the simulator served", stored, served)
	}
}
