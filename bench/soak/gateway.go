package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// secrets are the run's credentials, fresh each run and never printed: the
// gateway reads them from its environment.
type secrets struct{ admin, upstream1, upstream2, key string }

func newSecrets() secrets {
	return secrets{
		admin:     "soak-admin-" + rand.Text(),
		upstream1: "sk-soak-upstream-1-" + rand.Text(),
		upstream2: "sk-soak-upstream-2-" + rand.Text(),
		key:       "sk-sluice-soak-" + rand.Text(),
	}
}

func (s secrets) env() []string {
	return []string{"SOAK_ADMIN=" + s.admin, "SOAK_UP1=" + s.upstream1, "SOAK_UP2=" + s.upstream2,
		"SOAK_KEY=" + s.key}
}

// catalogYAML is the soak's catalog. Every caller protocol has an alias
// passed through to an upstream of its own protocol and one translated to
// another; one endpoint per upstream protocol, so the translated aliases
// cannot be served by passthrough. Two accounts (one credential each) give
// the affinity alias a choice. With billing on every key must be billed:
// the key pays every request from account "paying", priced by its plan.
// Affinity bindings and ended jobs live 2 minutes, so the state they keep
// reaches its plateau inside the warm-up of a run of 15 minutes or more.
const catalogYAML = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: SOAK_ADMIN
  wait_timeout: 10s
  jobs: {max_age: 5m, poll_interval: 500ms, max_poll_interval: 2s, retention: 2m}
state:
  backend: redis
  redis: {url: %[1]q, prefix: %[2]q}
database: {url: "sqlite://%[3]s"}
endpoints:
  - {id: ep-chat, base_url: %[4]q, protocols: [openai.chat]}
  - {id: ep-resp, base_url: %[4]q, protocols: [openai.responses]}
  - {id: ep-msg, base_url: %[4]q, protocols: [anthropic.messages]}
  - {id: ep-gem, base_url: %[4]q, protocols: [gemini.generate]}
  - {id: ep-video, base_url: %[4]q, protocols: [openai.videos]}
accounts:
  - {id: org-1, max_inflight: 256}
  - {id: org-2, max_inflight: 256}
credentials:
  - {id: c1, account: org-1, secret_env: SOAK_UP1, endpoints: [ep-chat, ep-resp, ep-msg, ep-gem, ep-video]}
  - {id: c2, account: org-2, secret_env: SOAK_UP2, endpoints: [ep-chat, ep-resp, ep-msg, ep-gem, ep-video]}
models:
  - alias: chat
    deployments: [{model: gpt-4o-mini, endpoints: [ep-chat]}]
  - alias: chat-on-claude
    deployments: [{model: claude-sonnet-4-5, endpoints: [ep-msg]}]
  - alias: resp
    protocol: openai.responses
    deployments: [{model: gpt-5.4-mini, endpoints: [ep-resp]}]
  - alias: resp-on-chat
    protocol: openai.responses
    deployments: [{model: gpt-4o-mini, endpoints: [ep-chat]}]
  - alias: claude
    protocol: anthropic.messages
    deployments: [{model: claude-sonnet-4-5, endpoints: [ep-msg]}]
  - alias: claude-on-gem
    protocol: anthropic.messages
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-gem]}]
  - alias: gem
    protocol: gemini.generate
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-gem]}]
  - alias: gem-on-chat
    protocol: gemini.generate
    deployments: [{model: gpt-4o-mini, endpoints: [ep-chat]}]
  - alias: sticky
    strategy: affinity
    affinity: {ttl: 2m, fallback_strategy: least-inflight}
    deployments: [{model: gpt-4o-mini, endpoints: [ep-chat]}]
  - alias: sora
    protocol: openai.videos
    deployments: [{model: sora-2, endpoints: [ep-video]}]
keys:
  - {id: soak, tenant: soak, secret_env: SOAK_KEY, billing_account: paying}
billing:
  currency: USD
  plans:
    - id: standard
      prices:
        - {alias: chat, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: chat-on-claude, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: resp, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: resp-on-chat, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: claude, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: claude-on-gem, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: gem, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: gem-on-chat, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: sticky, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
        - {alias: sora, request: "0.10", effective_from: "2020-01-01T00:00:00Z"}
  costs:
    - {model: gpt-4o-mini, input: "0.15", output: "0.60", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: paying, plan: standard, max_inflight: 1024}
`

// topUp is what the account is paid before the load: far more than a
// 30-minute run spends, so no request is refused for its balance.
const topUp = "1000000.00"

// gateway is one `sluice serve` process.
type gateway struct {
	cmd     *exec.Cmd
	stopped sync.Once
	addr    string // data plane host:port
	admin   string // admin host:port
	log     string // its stderr: the access log and any warnings
	db      string // the SQLite file's absolute path
	prefix  string // of its keys in Redis
}

// banner lines of `sluice serve`: "  data plane  http://ADDR/v1" and
// "  admin       http://ADDR (metrics at /metrics)".
var (
	dataPlaneLine = regexp.MustCompile(`^\s*data plane\s+http://([0-9.:]+)`)
	adminLine     = regexp.MustCompile(`^\s*admin\s+http://([0-9.:]+)`)
)

// startGateway writes the catalog into dir and runs bin on it until it
// prints its addresses (30 s at most: a loaded machine starts slowly).
func startGateway(bin, dir, redisURL, prefix, upstream string, s secrets, logLevel string) (*gateway, error) {
	db, err := filepath.Abs(filepath.Join(dir, "sluice.db"))
	if err != nil {
		return nil, err
	}
	cat := filepath.Join(dir, "catalog.yaml")
	doc := fmt.Sprintf(catalogYAML, redisURL, prefix, db, upstream)
	if err := os.WriteFile(cat, []byte(doc), 0o600); err != nil {
		return nil, err
	}
	g := &gateway{log: filepath.Join(dir, "sluice.log"), db: db, prefix: prefix}
	logf, err := os.Create(g.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	g.cmd = exec.Command(bin, "serve", "--config", cat, "--log-level", logLevel)
	g.cmd.Env = append(os.Environ(), s.env()...)
	g.cmd.Stderr = logf
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := dataPlaneLine.FindStringSubmatch(sc.Text()); m != nil {
				g.addr = m[1]
			}
			if m := adminLine.FindStringSubmatch(sc.Text()); m != nil {
				g.admin = m[1]
			}
			if g.addr != "" && g.admin != "" {
				found <- nil
				_, _ = io.Copy(io.Discard, out) // keep its stdout drained
				return
			}
		}
		found <- fmt.Errorf("sluice serve exited before printing its addresses (see %s)", g.log)
	}()
	select {
	case err := <-found:
		if err != nil {
			g.stop()
			return nil, err
		}
		return g, nil
	case <-time.After(30 * time.Second):
		g.stop()
		return nil, fmt.Errorf("sluice serve printed no addresses in 30s (see %s)", g.log)
	}
}

// stop ends the gateway with SIGTERM, and SIGKILL 15 s later; only the
// first call does.
func (g *gateway) stop() {
	g.stopped.Do(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = g.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = g.cmd.Process.Kill()
			<-done
		}
	})
}

// adminClient reads the admin listener: a sample must not hang on a
// gateway that stopped answering.
var adminClient = &http.Client{Timeout: 10 * time.Second}

// adminDo sends one admin API request and fails on a status other than 200.
func (g *gateway) adminDo(ctx context.Context, s secrets, method, path, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+g.admin+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := adminClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b, err
}

// metrics reads the gateway's Prometheus text from its admin listener and
// returns the samples whose names are asked for, summed over their labels.
func (g *gateway) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body, names...)
}

// parseMetrics sums, per name, the samples of Prometheus text r whose metric
// is one of names ("name" or "name{labels}" followed by a value).
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		series := name
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			series, rest = line[:strings.LastIndexByte(line, '}')+1], line[strings.LastIndexByte(line, '}')+2:]
		}
		if !want[name] && !want[series] {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %q: %w", line, err)
		}
		if want[series] && series != name {
			got[series] += v
		}
		if want[name] {
			got[name] += v
		}
	}
	return got, sc.Err()
}

// process is what /proc tells of the gateway besides its mappings.
type process struct {
	rss        float64 // VmRSS, bytes
	fds        float64 // open descriptors
	files      float64 // of them, those that are not sockets
	dbOpenings float64 // of them, those of the database file: one per SQLite connection
}

// procStatus reads process pid's resident set and open descriptors; db is
// the database file's absolute path.
func procStatus(pid int, db string) (process, error) {
	var p process
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				return p, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			p.rss = kib * 1024
		}
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return p, err
	}
	p.fds = float64(len(entries))
	for _, e := range entries {
		// A descriptor closed since the listing has no link: not counted.
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || strings.HasPrefix(target, "socket:") {
			continue
		}
		p.files++
		if target == db {
			p.dbOpenings++
		}
	}
	return p, nil
}

// privateRedis is a redis-server of the run's own, so that its used_memory
// is the gateway's state alone; nothing is persisted.
type privateRedis struct {
	cmd *exec.Cmd
	url string
}

func startRedis(dir string) (*privateRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found (apt-get install -y redis-server), or give -redis URL")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &privateRedis{cmd: cmd, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	c, err := newRedisClient(r.url)
	if err != nil {
		r.stop()
		return nil, err
	}
	defer c.Close()
	for range 100 {
		if c.Ping(context.Background()).Err() == nil {
			return r, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.stop()
	return nil, fmt.Errorf("redis-server on port %d did not answer PING in 10s", port)
}

func (r *privateRedis) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
}

func newRedisClient(url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opt), nil
}

// redisMemory adds used_memory (bytes), its parts (redisParts) and the
// number of keys of the database the client uses to values.
func redisMemory(ctx context.Context, c *redis.Client, values map[string]float64) error {
	info, err := c.InfoMap(ctx, "memory").Result()
	if err != nil {
		return err
	}
	used, err := strconv.ParseFloat(info["Memory"]["used_memory"], 64)
	if err != nil {
		return fmt.Errorf("used_memory: %w", err)
	}
	values["Redis used_memory"] = used
	if err := redisParts(values, info["Memory"]); err != nil {
		return err
	}
	slow, err := c.SlowLogLen(ctx).Result()
	if err != nil {
		return err
	}
	values[redisSlowlog] = float64(slow)
	n, err := c.DBSize(ctx).Result()
	values["Redis keys"] = float64(n)
	return err
}
