package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// The affinity benchmark (issue #13): 200 conversations of 10 turns each,
// interleaved (as many in flight as the four accounts have slots), over
// four accounts with caps that the simulator enforces as well (a request
// past a cap is a 429), whose prompt caches it models. Each turn resends
// the conversation so far, so every turn after the first can read the
// previous turn's whole prompt from the cache of the account that served
// it: that is the achievable cached share.
//
//	go test -run '^$' -bench Affinity -benchtime 1x ./bench/
const (
	affConversations = 200
	affTurns         = 10
	affAccounts      = 4
	affCap           = 4                     // per account
	affLatency       = 40 * time.Millisecond // per upstream answer
	affWait          = 300 * time.Millisecond
)

const affinityCatalog = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: BENCH_ADMIN_TOKEN
  wait_timeout: 30s
database: {url: "sqlite://%[1]s"}
endpoints:
  - {id: sim, base_url: %[2]s, protocols: [openai.chat]}
accounts:
%[3]scredentials:
%[4]smodels:
  - alias: chat
    strategy: %[5]s
    deployments:
      - {model: gpt-4o-mini, endpoints: [sim]}
keys:
  - {id: bench, tenant: bench, secret_env: BENCH_KEY}
`

// affinityRig is a gateway over one simulator with four accounts.
type affinityRig struct {
	sim      *simulator.Simulator
	gw       *app.Gateway
	cfg, db  string
	upstream string
	strategy string
	client   *http.Client
}

func affinityKey(i int) string { return fmt.Sprintf("sk-bench-acct%d-SECRET", i) }

func newAffinityRig(tb testing.TB, strategy string) *affinityRig {
	tb.Helper()
	accounts := map[string]simulator.AccountLimits{}
	keys := map[string]simulator.Behavior{}
	env := map[string]string{"BENCH_KEY": benchKey, "BENCH_ADMIN_TOKEN": "bench-admin-token"}
	for i := range affAccounts {
		accounts[fmt.Sprint("acct-", i)] = simulator.AccountLimits{MaxInflight: affCap}
		keys[affinityKey(i)] = simulator.Behavior{Account: fmt.Sprint("acct-", i), Latency: affLatency}
		env[fmt.Sprint("ACCT_KEY_", i)] = affinityKey(i)
	}
	r := &affinityRig{
		sim:      simulator.New(simulator.Options{PromptCache: 10 * time.Minute, Accounts: accounts, Keys: keys}),
		strategy: strategy,
	}
	srv := httptest.NewServer(r.sim)
	tb.Cleanup(srv.Close)
	tb.Cleanup(r.sim.Close)
	r.upstream = srv.URL
	dir := tb.TempDir()
	r.cfg, r.db = filepath.Join(dir, "catalog.yaml"), filepath.Join(dir, "sluice.db")
	r.writeCatalog(tb, affCap)
	var err error
	r.gw, err = app.Start(context.Background(), app.Options{
		ConfigPath: r.cfg, ReloadEvery: 50 * time.Millisecond,
		Log:       slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		tb.Fatalf("app.Start: %v", err)
	}
	tb.Cleanup(func() { r.gw.Close() })
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
	r.client = &http.Client{Transport: tr, Timeout: time.Minute}
	tb.Cleanup(tr.CloseIdleConnections)
	return r
}

// writeCatalog writes the rig's catalog with account acct-0's cap at cap0.
func (r *affinityRig) writeCatalog(tb testing.TB, cap0 int) {
	var accounts, creds strings.Builder
	for i := range affAccounts {
		c := affCap
		if i == 0 {
			c = cap0
		}
		fmt.Fprintf(&accounts, "  - {id: acct-%d, max_inflight: %d}\n", i, c)
		fmt.Fprintf(&creds, "  - {id: k%d, account: acct-%d, secret_env: ACCT_KEY_%d, endpoints: [sim]}\n", i, i, i)
	}
	strategy := r.strategy
	if strategy == "affinity" {
		strategy += fmt.Sprintf("\n    affinity: {ttl: 1h, wait: {standard: %s}}", affWait)
	}
	doc := fmt.Sprintf(affinityCatalog, r.db, r.upstream, accounts.String(), creds.String(), strategy)
	if err := os.WriteFile(r.cfg, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// affinityRun is what one run measured.
type affinityRun struct {
	prompt, cached, achievable int64
	elapsed                    time.Duration
	maxWait                    time.Duration // the longest a request took beyond the upstream's latency
	failed                     int
}

// turnBody is turn t of conversation c: its whole history so far.
func turnBody(c, t int) string {
	msgs := []map[string]string{{"role": "system", "content": fmt.Sprintf("You are assistant number %d of a travel agency. Answer in plain prose.", c)}}
	for i := 0; i <= t; i++ {
		if i > 0 {
			msgs = append(msgs, map[string]string{"role": "assistant", "content": fmt.Sprintf("Here is my answer to question %d of conversation %d.", i-1, c)})
		}
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("Question %d of conversation %d: what should we see next?", i, c)})
	}
	b, _ := json.Marshal(map[string]any{"model": "chat", "max_tokens": 20, "messages": msgs})
	return string(b)
}

// run plays the workload; halve, when set, is called once half the turns
// have been answered.
func (r *affinityRig) run(tb testing.TB, halve func()) affinityRun {
	var out affinityRun
	var mu sync.Mutex
	slots := make(chan struct{}, affAccounts*affCap)
	var answered atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for c := range affConversations {
		wg.Go(func() {
			prev := int64(0)
			for t := range affTurns {
				slots <- struct{}{}
				began := time.Now()
				prompt, cached, err := r.ask(turnBody(c, t))
				took := time.Since(began)
				<-slots
				mu.Lock()
				if err != nil {
					out.failed++
					tb.Errorf("conversation %d turn %d: %v", c, t, err)
				}
				out.prompt += prompt
				out.cached += cached
				if t > 0 {
					out.achievable += prev
				}
				out.maxWait = max(out.maxWait, took-affLatency)
				mu.Unlock()
				prev = prompt
				if answered.Add(1) == affConversations*affTurns/2 && halve != nil {
					once.Do(halve)
				}
			}
		})
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	return out
}

// ask sends one turn and returns its prompt and cached tokens.
func (r *affinityRig) ask(body string) (prompt, cached int64, err error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.gw.Addr()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var ans struct {
		Usage struct {
			Prompt  int64 `json:"prompt_tokens"`
			Details struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return 0, 0, err
	}
	return ans.Usage.Prompt, ans.Usage.Details.Cached, nil
}

// upstream429s counts the 429s the simulated accounts answered.
func (r *affinityRig) upstream429s() int {
	n := 0
	for _, rec := range r.sim.Requests() {
		if rec.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

// placements reads the gateway's affinity placements by outcome.
func (r *affinityRig) placements(tb testing.TB) map[string]float64 {
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.gw.AdminAddr()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		var outcome string
		var v float64
		if _, err := fmt.Sscanf(strings.Replace(line, `sluice_affinity_placements_total{alias="chat",outcome="`, "", 1), "%s %g", &outcome, &v); err == nil && strings.HasPrefix(line, "sluice_affinity_placements_total") {
			out[strings.TrimSuffix(outcome, `"}`)] = v
		}
	}
	return out
}

func BenchmarkAffinity(b *testing.B) {
	var rr affinityRun
	for _, tc := range []struct {
		name, strategy string
		halve          bool
	}{
		{"round-robin", "round-robin", false},
		{"affinity", "affinity", false},
		{"affinity-cap-halved", "affinity", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				r := newAffinityRig(b, tc.strategy)
				var halve func()
				if tc.halve {
					halve = func() { // the gateway's cap first (a reload), then the provider's
						r.writeCatalog(b, affCap/2)
						time.Sleep(200 * time.Millisecond)
						r.sim.SetKey(affinityKey(0), simulator.Behavior{Account: "acct-0", Latency: affLatency, MaxInflight: affCap / 2})
					}
				}
				got := r.run(b, halve)
				share, ofAchievable := float64(got.cached)/float64(got.prompt), float64(got.cached)/float64(got.achievable)
				throughput := float64(affConversations*affTurns) / got.elapsed.Seconds()
				b.ReportMetric(share, "cached-share")
				b.ReportMetric(ofAchievable, "of-achievable")
				b.ReportMetric(throughput, "turns/s")
				b.ReportMetric(float64(r.upstream429s()), "upstream-429s")
				b.ReportMetric(float64(got.maxWait.Milliseconds()), "max-wait-ms")
				switch {
				case tc.strategy == "round-robin":
					rr = got
				default:
					p := r.placements(b)
					hitRate := p["hit"] / (p["hit"] + p["moved"])
					b.ReportMetric(hitRate, "hit-rate")
					want := 0.9
					if tc.halve {
						want = 0.8
					}
					if ofAchievable < want || hitRate < want {
						b.Errorf("cached %.3f of the achievable, hit rate %.3f: want at least %.2f", ofAchievable, hitRate, want)
					}
					if rr.elapsed > 0 && !tc.halve && throughput < 0.95*float64(affConversations*affTurns)/rr.elapsed.Seconds() {
						b.Errorf("throughput %.1f turns/s, under 0.95× round-robin's", throughput)
					}
					if rr.elapsed > 0 && got.maxWait > rr.maxWait+affWait+100*time.Millisecond {
						b.Errorf("a request waited %v, round-robin's longest %v: affinity added more than its %v budget", got.maxWait, rr.maxWait, affWait)
					}
				}
				if n := r.upstream429s(); n > 0 && !tc.halve {
					b.Errorf("%d upstream 429s, want 0", n)
				}
			}
		})
	}
}
