package app_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The cluster tests run two real `sluice serve` processes that share one
// Redis, in front of one in-process simulated provider whose hidden
// per-account caps equal the catalog's.

// clusterTemplate is the catalog of both replicas; they differ only in
// their database (%s: the SQLite path; then the state section, see
// redisState, then the simulator's URL).
const clusterTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: CLUSTER_ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: org-1, quota_scope: account, max_inflight: 2, cooldown: {base: 300ms, max: 2s}}
` + clusterCredentials + `keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// clusterCredentials are the cluster tests' three credentials on account
// org-1 and endpoint ep-a, and the alias one they serve (model m-one).
const clusterCredentials = `credentials:
  - {id: k1, account: org-1, secret_env: K1, endpoints: [ep-a]}
  - {id: k2, account: org-1, secret_env: K2, endpoints: [ep-a]}
  - {id: k3, account: org-1, secret_env: K3, endpoints: [ep-a]}
models:
  - alias: one
    deployments: [{model: m-one, endpoints: [ep-a]}]
`

const clusterAdminToken = "cluster-admin-token-for-tests-5e1d"

// clusterKeys are org-1's credentials.
var clusterKeys = []string{"k1", "k2", "k3"}

// clusterEnv is what the replicas find in their environment, besides ours.
func clusterEnv() []string {
	env := []string{"KEY_WEB=" + keyWeb, "CLUSTER_ADMIN_TOKEN=" + clusterAdminToken}
	for _, id := range clusterKeys {
		env = append(env, strings.ToUpper(id)+"="+upstreamKey(id))
	}
	return env
}

// sluiceBin is the gateway binary, built once per test run.
var sluiceBin struct {
	once sync.Once
	path string
	err  error
}

// sluiceBinary builds ./cmd/sluice on first use. A failed build skips the
// test, except under CI=true where it fails it.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	sluiceBin.once.Do(func() { sluiceBin.path, sluiceBin.err = buildSluice() })
	if sluiceBin.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build cmd/sluice: %v", sluiceBin.err)
		}
		t.Skipf("skipping: cannot build cmd/sluice for the cluster tests: %v", sluiceBin.err)
	}
	return sluiceBin.path
}

// buildSluice builds the binary into a directory of the temporary
// directory named after the module root, so repeated runs reuse (and
// replace) one file instead of leaving one per run. It builds into a
// temporary name and renames: a concurrent run never execs a half-written
// file.
func buildSluice() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not in a module")
	}
	root := filepath.Dir(gomod)
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sluice-cluster-test-%x", sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "sluice-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	build := exec.CommandContext(ctx, "go", "build", "-o", tmp.Name(), "./cmd/sluice")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("go build ./cmd/sluice: %w\n%s", err, out)
	}
	bin := filepath.Join(dir, "sluice")
	if err := os.Rename(tmp.Name(), bin); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return bin, nil
}

// replica is one running `sluice serve` process.
type replica struct {
	name   string
	cmd    *exec.Cmd
	addr   string // data plane
	admin  string // admin API
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{} // closed once the process is reaped
	once   sync.Once
}

// kill ends the process with SIGKILL and waits until it is reaped.
// Idempotent.
func (r *replica) kill() {
	r.once.Do(func() {
		r.cmd.Process.Kill() // fails only when it has exited already
		<-r.exited
	})
}

// cluster is two replicas sharing Redis, in front of one simulator.
type cluster struct {
	t      *testing.T
	sim    *simulator.Simulator
	A, B   *replica
	client *http.Client
	// logLevel is the replicas' --log-level; "" is warn.
	logLevel string
}

// newCluster starts the simulator (org-1's keys answering after latency)
// and the two replicas sharing the test Redis, and waits until both
// answer.
func newCluster(t *testing.T, latency time.Duration) *cluster {
	t.Helper()
	redisURL := testenv.Redis(t)
	return newClusterWith(t, latency, redisState(redisURL, testenv.RedisPrefix(t, redisURL)))
}

// newClusterOnRedisCluster is newCluster with the replicas sharing
// testenv's three-primary Redis Cluster.
func newClusterOnRedisCluster(t *testing.T, latency time.Duration) *cluster {
	t.Helper()
	addrs := testenv.RedisCluster(t)
	url := "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	return newClusterWith(t, latency, redisState(url, testenv.RedisClusterPrefix(t, addrs), withRedisFields("cluster: true")))
}

// newClusterWith starts the simulator and the two replicas with state as
// their catalog's state section, and waits until both answer.
func newClusterWith(t *testing.T, latency time.Duration, state string) *cluster {
	t.Helper()
	bin := sluiceBinary(t)

	opts := simulator.Options{
		Accounts: map[string]simulator.AccountLimits{"org-1": {MaxInflight: 2}},
		Keys:     map[string]simulator.Behavior{},
	}
	for _, id := range clusterKeys {
		opts.Keys[upstreamKey(id)] = simulator.Behavior{Account: "org-1", Latency: latency}
	}
	c := &cluster{t: t, sim: simulator.New(opts), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	srv := httptest.NewServer(c.sim)
	// Cleanups run last-registered first: the replicas die before the
	// simulator closes, and the simulator closes before its server.
	t.Cleanup(func() { c.client.CloseIdleConnections(); srv.Close() })
	t.Cleanup(c.sim.Close)

	dir := t.TempDir()
	c.A = c.start(bin, "A", dir, fmt.Sprintf(clusterTemplate, filepath.Join(dir, "a.db"), state, srv.URL))
	c.B = c.start(bin, "B", dir, fmt.Sprintf(clusterTemplate, filepath.Join(dir, "b.db"), state, srv.URL))
	for _, r := range []*replica{c.A, c.B} {
		c.waitReady(r)
	}
	return c
}

var (
	bannerData  = regexp.MustCompile(`(?m)^\s*data plane\s+http://(\S+)/v1\s*$`)
	bannerAdmin = regexp.MustCompile(`(?m)^\s*admin\s+http://(\S+) \(metrics at /metrics\)\s*$`)
)

// start runs one replica and parses its addresses from the banner.
func (c *cluster) start(bin, name, dir, catalog string) *replica {
	t := c.t
	t.Helper()
	cfg := filepath.Join(dir, "catalog-"+name+".yaml")
	if err := os.WriteFile(cfg, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(bin, "serve", "--config", cfg, "--log-level", cmp.Or(c.logLevel, "warn"))
	r.cmd.Env = append(os.Environ(), clusterEnv()...)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start replica %s: %v", name, err)
	}
	go func() {
		r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("replica %s stderr:\n%s", name, cmp.Or(r.stderr.String(), "(empty)"))
		} else if s := r.stderr.String(); strings.Contains(s, `"level":"ERROR"`) {
			t.Logf("replica %s logged errors:\n%s", name, s)
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		out := r.stdout.String()
		d, a := bannerData.FindStringSubmatch(out), bannerAdmin.FindStringSubmatch(out)
		if d != nil && a != nil {
			r.addr, r.admin = d[1], a[1]
			return r
		}
		select {
		case <-r.exited:
			t.Fatalf("replica %s exited before its banner (%v)\nstdout:\n%s\nstderr:\n%s", name, r.cmd.ProcessState, out, r.stderr.String())
		case <-deadline:
			t.Fatalf("replica %s printed no banner within 30s\nstdout:\n%s\nstderr:\n%s", name, out, r.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitReady waits until both of r's listeners answer.
func (c *cluster) waitReady(r *replica) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, err := c.do(c.t.Context(), http.MethodGet, "http://"+r.admin+"/admin/accounts", clusterAdminToken, "")
		if err == nil && code == http.StatusOK {
			code, _, err = c.do(c.t.Context(), http.MethodGet, "http://"+r.addr+"/v1/models", keyWeb, "")
			if err == nil && code == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("replica %s not answering within 10s (last: %d, %v)\nstderr:\n%s", r.name, code, err, r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends one request and reads the whole answer.
func (c *cluster) do(ctx context.Context, method, url, token, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// chat sends one chat completion for alias "one" (org-1) through r. Safe
// from any goroutine: it reports instead of failing.
func (c *cluster) chat(ctx context.Context, r *replica) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return c.do(ctx, http.MethodPost, "http://"+r.addr+"/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "one", 1))
}

// mustChat is chat from the test goroutine, wanting a 200.
func (c *cluster) mustChat(r *replica) {
	c.t.Helper()
	if code, body, err := c.chat(c.t.Context(), r); code != http.StatusOK || err != nil {
		c.t.Fatalf("chat through %s = %d %s (%v), want 200", r.name, code, body, err)
	}
}

// adminPost posts to r's admin API and wants a 200.
func (c *cluster) adminPost(r *replica, path string) {
	c.t.Helper()
	code, body, err := c.do(c.t.Context(), http.MethodPost, "http://"+r.admin+path, clusterAdminToken, "")
	if err != nil || code != http.StatusOK {
		c.t.Fatalf("POST %s on %s = %d %s (%v), want 200", path, r.name, code, body, err)
	}
}

// adminJSON decodes a GET of r's admin API into v.
func (c *cluster) adminJSON(r *replica, path string, v any) {
	c.t.Helper()
	code, body, err := c.do(c.t.Context(), http.MethodGet, "http://"+r.admin+path, clusterAdminToken, "")
	if err != nil || code != http.StatusOK {
		c.t.Fatalf("GET %s on %s = %d %s (%v)", path, r.name, code, body, err)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		c.t.Fatalf("GET %s on %s: %v in %s", path, r.name, err, body)
	}
}

// account is org-1 as r's admin API shows it.
func (c *cluster) account(r *replica) admin.AccountState {
	c.t.Helper()
	var list []admin.AccountState
	c.adminJSON(r, "/admin/accounts", &list)
	for _, a := range list {
		if a.ID == "org-1" {
			return a
		}
	}
	c.t.Fatalf("replica %s lists no org-1 in %+v", r.name, list)
	return admin.AccountState{}
}

func (c *cluster) credential(r *replica, id string) admin.CredentialState {
	c.t.Helper()
	var list []admin.CredentialState
	c.adminJSON(r, "/admin/credentials", &list)
	for _, cr := range list {
		if cr.ID == id {
			return cr
		}
	}
	c.t.Fatalf("replica %s lists no credential %s in %+v", r.name, id, list)
	return admin.CredentialState{}
}

// setKeys gives org-1's three keys behaviour b from now on.
func (c *cluster) setKeys(b simulator.Behavior) {
	b.Account = "org-1"
	for _, id := range clusterKeys {
		c.sim.SetKey(upstreamKey(id), b)
	}
}

// upstream429s counts the rate limits the simulator answered.
func (c *cluster) upstream429s() int {
	n := 0
	for _, r := range c.sim.Requests() {
		if r.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}
