// Command sched is the scheduling benchmark: a simulated provider enforces
// hidden per-account concurrency caps equal to the catalog's, and a mixed
// open-loop load of interactive and background callers from several tenants
// bursts at three times the capacity. It runs the load through Sluice
// (waiting for capacity, priority classes) and through a naive hop (a bare
// reverse proxy that passes the upstream's 429s back to clients that retry
// after Retry-After), and reports upstream 429s, throughput as a fraction of
// the theoretical maximum, waits per class and the largest tenant's share.
//
//	go run ./bench/sched            # about 80 s: Sluice, then the naive hop
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// The upstream: three accounts with hidden caps 4, 4 and 2, two keys each,
// answering after service. Capacity is Σcaps/service = 100 requests/s.
var accounts = []struct {
	id   string
	cap  int
	keys []string
}{
	{"org-a", 4, []string{"up-a1", "up-a2"}},
	{"org-b", 4, []string{"up-b1", "up-b2"}},
	{"org-c", 2, []string{"up-c1", "up-c2"}},
}

const service = 100 * time.Millisecond

// catalogCap multiplies the caps the catalog declares (the provider keeps
// the real ones hidden).
var catalogCap = 1

// caller is one stream of load: a key, its class and tenant, and its rate.
type caller struct {
	key, class, tenant string
	rate               float64 // requests per second
}

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long the load runs")
	overload := flag.Float64("overload", 3, "offered load as a multiple of capacity")
	hidden := flag.Bool("hidden", false, "declare caps twice the provider's hidden ones: Sluice must learn them")
	flag.Parse()
	catalogCap = 1
	if *hidden {
		catalogCap = 2
	}
	capacity := 0.0
	for _, a := range accounts {
		capacity += float64(a.cap) / service.Seconds()
	}
	offered := capacity * *overload
	callers := []caller{
		{"sk-sluice-bench-ui", "interactive", "web", offered * 0.2},
		{"sk-sluice-bench-a", "background", "batch-a", offered * 0.8 * 0.6},
		{"sk-sluice-bench-b", "background", "batch-b", offered * 0.8 * 0.2},
		{"sk-sluice-bench-c", "background", "batch-c", offered * 0.8 * 0.2},
	}
	fmt.Printf("capacity %.0f req/s (Σ caps %d, service %v); offered %.0f req/s for %v\n\n",
		capacity, int(capacity*service.Seconds()), service, offered, *duration)
	modes := []string{"sluice", "naive"}
	if *hidden {
		modes = modes[:1]
		fmt.Printf("catalog caps are %d× the provider's hidden caps\n\n", catalogCap)
	}
	for _, mode := range modes {
		r := run(mode, callers, *duration, capacity)
		r.print(mode)
	}
}

// result is what one run measured.
type result struct {
	upstream429 int
	late429     int // in the second half of the load, after Sluice had time to converge
	duration    time.Duration
	served      int
	elapsed     time.Duration
	capacity    float64
	waits       map[string][]time.Duration // by class: request start → upstream call start
	byTenant    map[string]int             // background upstream calls per tenant while the load lasted
	failed      map[string]int             // by class: never served
}

func run(mode string, callers []caller, duration time.Duration, capacity float64) result {
	simOpts := simulator.Options{Accounts: map[string]simulator.AccountLimits{}, Keys: map[string]simulator.Behavior{}, RejectUnknownKeys: true}
	for _, a := range accounts {
		simOpts.Accounts[a.id] = simulator.AccountLimits{MaxInflight: a.cap, RetryAfter: 200 * time.Millisecond}
		for _, k := range a.keys {
			simOpts.Keys[k] = simulator.Behavior{Account: a.id, Latency: service}
		}
	}
	sim := simulator.New(simOpts)
	up := httptest.NewServer(sim)
	defer up.Close()
	defer sim.Close()

	target, closeTarget := startSluice(up.URL, callers)
	if mode == "naive" {
		closeTarget()
		target, closeTarget = startNaive(up.URL)
	}
	defer closeTarget()

	res := result{duration: duration, capacity: capacity, waits: map[string][]time.Duration{}, byTenant: map[string]int{}, failed: map[string]int{}}
	var mu sync.Mutex
	starts := map[string]time.Time{}
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096}, Timeout: 2 * time.Minute}
	begin := time.Now()
	for _, c := range callers {
		wg.Go(func() {
			interval := time.Duration(float64(time.Second) / c.rate)
			next := time.Now()
			for i := 0; time.Since(begin) < duration; i++ {
				next = next.Add(interval)
				time.Sleep(time.Until(next))
				tag := fmt.Sprintf("%s-%d", c.tenant, i)
				mu.Lock()
				starts[tag] = time.Now()
				mu.Unlock()
				wg.Go(func() {
					ok := send(client, mode, target, c, tag)
					mu.Lock()
					defer mu.Unlock()
					if !ok {
						res.failed[c.class]++
						return
					}
					res.served++
				})
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(begin)
	for _, r := range sim.Requests() {
		if r.Status == http.StatusTooManyRequests {
			res.upstream429++
			if d := r.At.Sub(begin); d > duration/2 && d <= duration {
				res.late429++
			}
			continue
		}
		tag, class := tagOf(r.Body), ""
		for _, c := range callers {
			if strings.HasPrefix(tag, c.tenant+"-") {
				class = c.class
			}
		}
		if start, ok := starts[tag]; ok && class != "" {
			res.waits[class] = append(res.waits[class], r.At.Sub(start))
		}
		// Shares are counted while the load lasts: every tenant has a
		// backlog then, so the order of service is what decides them.
		if class == "background" && r.At.Sub(begin) < duration {
			res.byTenant[strings.SplitN(tag, "-", 3)[0]+"-"+strings.SplitN(tag, "-", 3)[1]]++
		}
	}
	return res
}

// send makes one request; the naive client retries a 429 after its
// Retry-After (at least 100ms) until it succeeds or two minutes pass.
func send(client *http.Client, mode, target string, c caller, tag string) bool {
	deadline := time.Now().Add(2 * time.Minute)
	key := c.key
	for {
		if mode == "naive" {
			a := accounts[rand.IntN(len(accounts))] // a naive balancer: any upstream key
			key = a.keys[rand.IntN(len(a.keys))]
		}
		body := `{"model":"bench","messages":[{"role":"user","content":"` + tag + `"}]}`
		req, _ := http.NewRequest(http.MethodPost, target+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return true
		case resp.StatusCode == http.StatusTooManyRequests && mode == "naive" && time.Now().Before(deadline):
			wait, _ := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64)
			time.Sleep(max(time.Duration(wait*float64(time.Second)), 100*time.Millisecond))
		default:
			return false
		}
	}
}

func tagOf(body []byte) string {
	s := string(body)
	i := strings.Index(s, `"content":"`)
	if i < 0 {
		return ""
	}
	s = s[i+len(`"content":"`):]
	return s[:strings.IndexByte(s, '"')]
}

// startSluice runs a gateway whose catalog declares the upstream's caps.
func startSluice(upstream string, callers []caller) (string, func()) {
	dir, _ := os.MkdirTemp("", "sluice-sched-")
	env := map[string]string{"ADMIN": "bench-admin-token"}
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nserver:\n  listen: 127.0.0.1:0\n  admin_listen: 127.0.0.1:0\n  admin_token_env: ADMIN\n  wait_timeout: 60s\n  priorities: {interactive: {wait: 30s}, background: {wait: 60s}}\n")
	fmt.Fprintf(&b, "database: {url: \"sqlite://%s\"}\nendpoints:\n  - {id: up, base_url: %s, protocols: [openai.chat]}\naccounts:\n", filepath.Join(dir, "db"), upstream)
	for _, a := range accounts {
		fmt.Fprintf(&b, "  - {id: %s, max_inflight: %d, cooldown: {base: 200ms, max: 2s}}\n", a.id, a.cap*catalogCap)
	}
	b.WriteString("credentials:\n")
	for _, a := range accounts {
		for _, k := range a.keys {
			env["UP_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))] = k
			fmt.Fprintf(&b, "  - {id: %s, account: %s, secret_env: UP_%s, endpoints: [up]}\n", k, a.id, strings.ToUpper(strings.ReplaceAll(k, "-", "_")))
		}
	}
	b.WriteString("models:\n  - alias: bench\n    deployments: [{model: gpt-4o-mini, endpoints: [up]}]\nkeys:\n")
	for i, c := range callers {
		env["KEY_"+strconv.Itoa(i)] = c.key
		fmt.Fprintf(&b, "  - {id: %s, tenant: %s, priority: %s, secret_env: KEY_%d}\n", c.tenant, c.tenant, c.class, i)
	}
	cfg := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		panic(err)
	}
	gw, err := app.Start(context.Background(), app.Options{
		ConfigPath: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		panic(err)
	}
	return "http://" + gw.Addr(), func() { gw.Close(); os.RemoveAll(dir) }
}

// startNaive is a bare reverse proxy: no waiting, the upstream's 429s go
// back to the client.
func startNaive(upstream string) (string, func()) {
	u, _ := url.Parse(upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 4096}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: rp}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }
}

func (r result) print(mode string) {
	fmt.Printf("== %s\n", mode)
	fmt.Printf("upstream 429s: %d (%.1f/min); in the load's second half %.1f/min\n", r.upstream429,
		float64(r.upstream429)/r.elapsed.Minutes(), float64(r.late429)/(r.duration/2).Minutes())
	fmt.Printf("throughput: %d served in %v = %.1f req/s = %.2f of the theoretical maximum\n",
		r.served, r.elapsed.Round(time.Millisecond), float64(r.served)/r.elapsed.Seconds(), float64(r.served)/r.elapsed.Seconds()/r.capacity)
	for _, class := range []string{"interactive", "background"} {
		w := r.waits[class]
		slices.Sort(w)
		if len(w) == 0 {
			fmt.Printf("%-11s wait: none served (%d failed)\n", class, r.failed[class])
			continue
		}
		fmt.Printf("%-11s wait p50 %v  p99 %v  (%d served, %d failed)\n", class,
			w[len(w)/2].Round(time.Millisecond), w[len(w)*99/100].Round(time.Millisecond), len(w), r.failed[class])
	}
	total := 0
	for _, n := range r.byTenant {
		total += n
	}
	if total > 0 {
		fmt.Printf("background shares while overloaded (fair share 0.33; offered 0.60/0.20/0.20): batch-a %.2f, batch-b %.2f, batch-c %.2f\n",
			float64(r.byTenant["batch-a"])/float64(total), float64(r.byTenant["batch-b"])/float64(total), float64(r.byTenant["batch-c"])/float64(total))
	}
	fmt.Println()
}
