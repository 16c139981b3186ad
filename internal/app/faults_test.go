package app_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// faultTemplate is the catalog of the fault runs' replicas: org-1's three
// credentials share a cap of 2 (the simulator enforces the same cap and
// counts the peak), key web is billed to acme. %s: the database section,
// the state section, the simulator's URL.
const faultTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: CLUSTER_ADMIN_TOKEN
  wait_timeout: 3s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 10s}
database: %s
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat], breaker: {failures: 5, open: 1s}}
accounts:
  - {id: org-1, quota_scope: account, max_inflight: 2, cooldown: {base: 100ms, max: 500ms}}
` + clusterCredentials + `keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, billing_account: acme}
billing:
  plans:
    - id: standard
      prices:
        - {alias: one, request: "0.01", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: acme, plan: standard, max_inflight: 64}
`

// faultLeaseTTL is the replicas' lease TTL: the slots of a killed replica
// come back after it. Redis stalls are kept shorter: a replica that cannot
// renew its leases for longer than their TTL loses them, and its calls
// still running no longer count against the cap (the limit of a lease).
const faultLeaseTTL = 3 * time.Second

// faultKinds are the faults a run fires, each for a random moment.
var faultKinds = []string{"replica killed -9", "redis restarted empty", "redis stalled", "redis down", "database unreachable", "upstream 429", "upstream 5xx", "upstream cuts streams"}

// faultRun is three `sluice serve` replicas on one Redis and one
// PostgreSQL database (reached through a proxy the run can cut), in front
// of one simulator, and what their callers saw.
type faultRun struct {
	t     *testing.T
	c     *cluster
	bin   string
	redis *testenv.RedisServer
	db    *tcpProxy
	pgURL string // direct, for the checks

	mu       sync.Mutex
	replicas []*replica
	catalogs []string
	dirs     []string
	gen      []int  // replica i's restarts
	down     []bool // replica i is killed and not started again yet
	started  []time.Time

	complete   []string                  // request IDs whose whole answer was read
	charged    []string                  // of those, the 200s
	answers    map[string]map[string]int // fault firing when the request was sent ("none") → answer → count
	active     string                    // the fault firing now, "" for none
	examples   map[string][]string       // a few answers of each kind other than 200: replica, its age
	excused    int                       // no whole answer: the replica was killed meanwhile
	unanswered []string
	fired      map[string]int
}

func newFaultRun(t *testing.T) *faultRun {
	t.Helper()
	r := &faultRun{t: t, bin: sluiceBinary(t), redis: testenv.StartRedis(t), pgURL: testenv.Postgres(t),
		answers: map[string]map[string]int{}, examples: map[string][]string{}, fired: map[string]int{}}
	u, err := url.Parse(r.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	r.db = newTCPProxy(t, u.Host)
	u.Host = r.db.addr

	opts := simulator.Options{Accounts: map[string]simulator.AccountLimits{"org-1": {MaxInflight: 2}}, Keys: map[string]simulator.Behavior{}}
	sim := simulator.New(opts)
	srv := httptest.NewServer(sim)
	r.c = &cluster{t: t, sim: sim, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	t.Cleanup(func() { r.c.client.CloseIdleConnections(); srv.Close() })
	t.Cleanup(sim.Close)
	r.setUpstream(simulator.Behavior{})

	state := fmt.Sprintf("{backend: redis, redis: {url: %q, prefix: \"faults:\"}, lease_ttl: %s}", r.redis.URL(), faultLeaseTTL)
	dir := t.TempDir()
	for i := range 3 {
		spool := filepath.Join(dir, fmt.Sprintf("spool-%d", i))
		db := fmt.Sprintf("{url: %q, spool_dir: %q}", u.String(), spool)
		r.catalogs = append(r.catalogs, fmt.Sprintf(faultTemplate, db, state, srv.URL))
		r.dirs = append(r.dirs, dir)
		r.replicas = append(r.replicas, nil)
		r.gen = append(r.gen, 0)
		r.down = append(r.down, false)
		r.started = append(r.started, time.Time{})
		r.start(i)
	}
	if _, err := r.admin().TopUp(t.Context(), "acme", "prepaid", admin.MoneyChange{Amount: 100000 * billing.Unit, Reason: "prepaid"}); err != nil {
		t.Fatal(err)
	}
	return r
}

// setUpstream gives org-1's keys behaviour b (with its latency and pace).
func (r *faultRun) setUpstream(b simulator.Behavior) {
	b.Latency, b.ChunkDelay = 20*time.Millisecond, 5*time.Millisecond
	r.c.setKeys(b)
}

// start starts replica i (again, on its data: it replays its spool).
func (r *faultRun) start(i int) {
	rep := r.c.start(r.bin, fmt.Sprintf("R%d-%d", i, r.gen[i]), r.dirs[i], r.catalogs[i])
	r.c.waitReady(rep)
	r.mu.Lock()
	r.replicas[i], r.down[i], r.started[i] = rep, false, time.Now()
	r.mu.Unlock()
}

func (r *faultRun) admin() *adminclient.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return adminclient.NewClient("http://"+r.replicas[0].admin, clusterAdminToken)
}

// pick returns a random replica that is up, its index and its generation.
func (r *faultRun) pick() (*replica, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if i := rand.IntN(len(r.replicas)); !r.down[i] {
			return r.replicas[i], i, r.gen[i]
		}
	}
}

// chat sends one chat (a stream when stream is set) and notes what came
// back. An answer not read whole is excused only when its replica was
// killed meanwhile; a caller still waiting past every deadline the
// gateway has (wait, total, plus a margin) is a failure. It reports
// whether the answer was a whole 200.
func (r *faultRun) chat(stream bool) bool {
	rep, i, gen := r.pick()
	r.mu.Lock()
	during := cmp.Or(r.active, "none")
	r.mu.Unlock()
	body := strings.Replace(chatBody, "fast", "one", 1)
	if stream {
		body = strings.Replace(body, `"model"`, `"stream":true,"model"`, 1)
	}
	ctx, cancel := context.WithTimeout(r.t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+rep.addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.c.client.Do(req)
	var answer []byte
	if err == nil {
		answer, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil && r.gen[i] != gen:
		r.excused++
	case err != nil && r.t.Context().Err() != nil: // the test is ending
	case err != nil:
		r.unanswered = append(r.unanswered, fmt.Sprintf("%s (up %v): %v", rep.name, time.Since(r.started[i]).Round(time.Millisecond), err))
	default:
		id := resp.Header.Get("X-Request-Id")
		r.complete = append(r.complete, id)
		if resp.StatusCode == http.StatusOK && (!stream || strings.Contains(string(answer), "data: [DONE]")) {
			r.charged = append(r.charged, id)
			r.count(during, "200")
			return true
		}
		var env struct {
			Error struct{ Code string } `json:"error"`
		}
		if stream && resp.StatusCode == http.StatusOK {
			// A stream that failed after its headers ends with an error
			// event: its code is in the last data line.
			sc := bufio.NewScanner(strings.NewReader(string(answer)))
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					_ = json.Unmarshal([]byte(d), &env)
				}
			}
		} else {
			_ = json.Unmarshal(answer, &env)
		}
		kind := fmt.Sprintf("%d %s", resp.StatusCode, env.Error.Code)
		r.count(during, kind)
		if len(r.examples[kind]) < 3 {
			r.examples[kind] = append(r.examples[kind], fmt.Sprintf("%s (up %v)", rep.name, time.Since(r.started[i]).Round(time.Millisecond)))
		}
	}
	return false
}

// count notes an answer of kind to a request sent while fault fired.
// r.mu is held.
func (r *faultRun) count(fault, kind string) {
	if r.answers[fault] == nil {
		r.answers[fault] = map[string]int{}
	}
	r.answers[fault][kind]++
}

// served is how many requests were answered 200 in all.
func (r *faultRun) served() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, byKind := range r.answers {
		n += byKind["200"]
	}
	return n
}

// fire runs one fault of kind for a random moment, then restores.
func (r *faultRun) fire(kind string) {
	moment := func(min, max time.Duration) { time.Sleep(min + rand.N(max-min)) }
	r.mu.Lock()
	r.fired[kind]++
	r.active = kind
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.active = ""
		r.mu.Unlock()
	}()
	switch kind {
	case "replica killed -9":
		r.mu.Lock()
		i := rand.IntN(len(r.replicas))
		rep := r.replicas[i]
		r.gen[i]++
		r.down[i] = true // one replica at a time: the others stay up
		r.mu.Unlock()
		rep.kill()
		moment(0, 500*time.Millisecond)
		r.start(i)
	case "redis restarted empty":
		r.redis.Kill()
		r.redis.Start()
	case "redis stalled":
		r.redis.Stall()
		moment(100*time.Millisecond, faultLeaseTTL/3)
		r.redis.Resume()
	case "redis down":
		r.redis.Kill()
		moment(500*time.Millisecond, 2*time.Second)
		r.redis.Start()
	case "database unreachable":
		r.db.stop()
		moment(500*time.Millisecond, 3*time.Second)
		r.db.start()
	case "upstream 429":
		r.setUpstream(simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: 200 * time.Millisecond})
		moment(200*time.Millisecond, time.Second)
		r.setUpstream(simulator.Behavior{})
	case "upstream 5xx":
		r.setUpstream(simulator.Behavior{FailStatus: http.StatusBadGateway})
		moment(200*time.Millisecond, time.Second)
		r.setUpstream(simulator.Behavior{})
	case "upstream cuts streams":
		r.setUpstream(simulator.Behavior{CutAfter: 2})
		moment(200*time.Millisecond, time.Second)
		r.setUpstream(simulator.Behavior{})
	}
}

// TestFaultsAtRandom drives three replicas with eight callers while
// faults fire one after another at random moments (each kind at least
// once), then checks what must hold whatever happened: the upstream never
// had more than org-1's cap in flight; every caller was answered or its
// replica was killed under it; every whole answer has exactly one usage
// record, and each 200 one charge; every claim is released or expired;
// and no replica holds more goroutines than after warming up (allowing
// for connection pools). SLUICE_FAULT_RUN=5m runs longer (the default,
// for CI, is 15s).
func TestFaultsAtRandom(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run takes tens of seconds: not with -short")
	}
	length := 15 * time.Second
	if s := os.Getenv("SLUICE_FAULT_RUN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SLUICE_FAULT_RUN=%q: %v", s, err)
		}
		length = d
	}
	r := newFaultRun(t)
	const callers = 8
	work := func(until time.Time) {
		var wg sync.WaitGroup
		for n := range callers {
			wg.Go(func() {
				for k := 0; time.Now().Before(until); k++ {
					if !r.chat((n+k)%2 == 0) {
						time.Sleep(50 * time.Millisecond) // a refused caller backs off a little, as clients do
					}
				}
			})
		}
		wg.Wait()
	}
	// Warm-up: every replica has read acme's top-up and serves; the
	// connection pools fill.
	eventually(t, 10*time.Second, "every replica serving billed requests", func() bool {
		for range 3 * len(r.replicas) {
			if !r.chat(false) {
				return false
			}
		}
		return true
	})
	work(time.Now().Add(2 * time.Second))
	baseline := r.goroutines()

	end := time.Now().Add(length)
	done := make(chan struct{})
	go func() { defer close(done); work(end) }()
	for k := 0; time.Now().Before(end); k++ {
		kind := faultKinds[rand.IntN(len(faultKinds))]
		if k < len(faultKinds) {
			kind = faultKinds[k] // each kind at least once
		}
		r.fire(kind)
		time.Sleep(rand.N(300 * time.Millisecond))
	}
	<-done

	r.mu.Lock()
	t.Logf("faults fired: %v", r.fired)
	for _, fault := range append([]string{"none"}, faultKinds...) {
		t.Logf("answers to requests sent while %-22s %v", fault+":", r.answers[fault])
	}
	t.Logf("no whole answer (its replica killed meanwhile): %d; examples of refusals: %v", r.excused, r.examples)
	unanswered := slices.Clone(r.unanswered)
	r.mu.Unlock()
	if len(unanswered) > 0 {
		t.Errorf("%d callers got no answer from a replica that was not killed: %v", len(unanswered), unanswered)
	}
	if peak := r.c.sim.MaxInFlight("org-1"); peak > 2 {
		t.Errorf("the upstream had %d requests of org-1 in flight at once, over its cap of 2", peak)
	}
	if r.served() == 0 {
		t.Errorf("no request was served: the run proved nothing")
	}
	r.checkBooks()
	r.checkClaimsReturn()
	if after := r.goroutines(); slices.ContainsFunc(after, func(n int) bool { return n > 2*slices.Max(baseline)+50 }) {
		t.Errorf("goroutines per replica %v after the run, %v after warming up: a leak", after, baseline)
	} else {
		t.Logf("goroutines per replica: %v after warming up, %v after the run", baseline, after)
	}
}

// checkBooks waits until every whole answer has its usage record (the
// spools replay what the database missed), then wants one record per
// request and one charge per 200.
func (r *faultRun) checkBooks() {
	t := r.t
	t.Helper()
	db, err := sqldb.Open(t.Context(), r.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := sqlledger.New(db)
	count := map[string]int{}
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		recs, err := store.ListUsage(t.Context(), ledger.UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		clear(count)
		for _, rec := range recs {
			count[rec.RequestID]++
		}
		missing = slices.DeleteFunc(slices.Clone(r.complete), func(id string) bool { return count[id] > 0 })
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d answered requests have no usage record, e.g. %v", len(missing), len(r.complete), missing[:min(5, len(missing))])
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("request %s has %d usage records, want 1", id, n)
		}
	}
	for _, id := range r.charged {
		entries, err := store.Entries(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Kind != ledger.EntryCharge {
			t.Errorf("request %s answered 200: ledger entries %+v, want one charge", id, entries)
		}
	}
	t.Logf("%d whole answers, each with one usage record; %d charged once each", len(r.complete), len(r.charged))
}

// checkClaimsReturn wants org-1's claims back to none on every replica
// within a lease TTL and a little: released by their requests, or expired
// with the replica that held them.
func (r *faultRun) checkClaimsReturn() {
	r.t.Helper()
	eventually(r.t, faultLeaseTTL+5*time.Second, "every claim of org-1 released or expired", func() bool {
		r.mu.Lock()
		reps := slices.Clone(r.replicas)
		r.mu.Unlock()
		for _, rep := range reps {
			if r.c.account(rep).InFlight != 0 {
				return false
			}
		}
		return true
	})
}

// goroutines reads go_goroutines from each replica's metrics, after
// letting its idle connections from callers close.
func (r *faultRun) goroutines() []int {
	r.t.Helper()
	r.c.client.CloseIdleConnections()
	r.mu.Lock()
	reps := slices.Clone(r.replicas)
	r.mu.Unlock()
	var out []int
	for _, rep := range reps {
		_, body, err := r.c.do(r.t.Context(), http.MethodGet, "http://"+rep.admin+"/metrics", clusterAdminToken, "")
		if err != nil {
			r.t.Fatal(err)
		}
		n := -1
		for line := range strings.Lines(body) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go_goroutines "); ok {
				n, err = strconv.Atoi(v)
				if err != nil {
					r.t.Fatal(errors.New("go_goroutines: " + v))
				}
			}
		}
		out = append(out, n)
	}
	return out
}
