package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// hardeningTemplate has one account of cap 4 (credential cred-h, secret
// secretA1) behind ep-a, served by model "m"; ep-b is unused.
const hardeningTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 3s, idle: 2s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
  - {id: ep-b, base_url: %s, protocols: [openai.chat]}
accounts:
  - {id: acct, quota_scope: account, max_inflight: 4, cooldown: {base: 300ms, max: 2s}}
credentials:
  - {id: cred-h, account: acct, secret_env: UP_A1, endpoints: [ep-a]}
models:
  - alias: m
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

const hardeningChat = `{"model":"m","messages":[{"role":"user","content":"hello there"}]}`

// hardeningLeaseTTL is the lease_ttl of the tests on Redis here: leases
// lapse only after 30s, so a slot that comes back sooner was released.
const hardeningLeaseTTL = 30 * time.Second

func newHardeningHarness(t *testing.T, state string, b simulator.Behavior) *harness {
	t.Helper()
	b.Account = "acct"
	return newHarnessWith(t, hardeningTemplate, state, simulator.Options{Keys: map[string]simulator.Behavior{secretA1: b}})
}

// accountInFlight is the in-flight count of account acct that the admin
// API reads from the state store.
func (h *harness) accountInFlight() int {
	h.t.Helper()
	code, body := h.adminGet("/admin/accounts")
	var list []admin.AccountState
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		h.t.Fatalf("GET /admin/accounts = %d %s (%v)", code, body, err)
	}
	for _, a := range list {
		if a.ID == "acct" {
			return a.InFlight
		}
	}
	h.t.Fatalf("no account acct in %s", body)
	return 0
}

// callRetryAfter makes one request and returns its status, Retry-After
// header and body.
func callRetryAfter(t *testing.T, method, url, auth, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// freezer is a TCP proxy to Redis that can freeze: bytes stop moving both
// ways, and connections stay open, until it thaws (as CLIENT PAUSE would,
// without freezing the server other tests share).
type freezer struct {
	ln     net.Listener
	mu     sync.Mutex
	thawed *sync.Cond
	frozen bool
	conns  []net.Conn
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln}
	f.thawed = sync.NewCond(&f.mu)
	t.Cleanup(func() {
		f.thaw()
		ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, in, out)
			f.mu.Unlock()
			go f.pump(out, in)
			go f.pump(in, out)
		}
	}()
	return f
}

// pump copies src to dst, holding what it read while frozen.
func (f *freezer) pump(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.mu.Lock()
			for f.frozen {
				f.thawed.Wait()
			}
			f.mu.Unlock()
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) addr() string { return f.ln.Addr().String() }

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

func (f *freezer) thaw() {
	f.mu.Lock()
	f.frozen = false
	f.mu.Unlock()
	f.thawed.Broadcast()
}

// TestFrozenRedisDelaysNoAnswerAndKeepsNoSlot (issue #9, item 7): Redis
// freezes while four calls run. Their answers are not held up by the
// release of their claims, and once Redis is back the four slots return
// within about a second, not when their 30s leases lapse.
func TestFrozenRedisDelaysNoAnswerAndKeepsNoSlot(t *testing.T) {
	proxy, state := redisThroughProxy(t, newFreezer, withLeaseTTL(hardeningLeaseTTL))
	const latency = time.Second
	h := newHardeningHarness(t, state, simulator.Behavior{Latency: latency})

	took := make([]time.Duration, 4)
	statuses := make([]int, 4)
	var wg sync.WaitGroup
	for i := range took {
		wg.Go(func() {
			start := time.Now()
			statuses[i], _, _ = h.post(t.Context(), "/v1/chat/completions", keyWeb, hardeningChat)
			took[i] = time.Since(start)
		})
	}
	eventually(t, 5*time.Second, "four calls upstream", func() bool { return h.simA.InFlight() == 4 })
	proxy.freeze()
	frozen := time.Now()
	wg.Wait()
	for i := range took {
		if statuses[i] != http.StatusOK || took[i] > latency+700*time.Millisecond {
			t.Errorf("call %d with Redis frozen = %d after %v, want 200 after about %v", i, statuses[i], took[i], latency)
		}
	}
	time.Sleep(time.Until(frozen.Add(3 * time.Second))) // past the first release attempts' timeout
	proxy.thaw()
	thawed := time.Now()
	eventually(t, 1500*time.Millisecond, "the slots are back after Redis", func() bool { return h.accountInFlight() == 0 })
	t.Logf("slots back %v after Redis", time.Since(thawed))
}

// TestRedisThatLostItsStateAdmitsNoMoreThanTheCap (issue #9, item 8):
// Redis loses every key while four calls hold the account's four slots.
// Four more calls wait for those to end: the upstream never sees more
// than four at once.
func TestRedisThatLostItsStateAdmitsNoMoreThanTheCap(t *testing.T) {
	url := testenv.Redis(t)
	prefix := testenv.RedisPrefix(t, url)
	h := newHardeningHarness(t, redisState(url, prefix, withLeaseTTL(hardeningLeaseTTL)), simulator.Behavior{Latency: 1500 * time.Millisecond})
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Go(func() { statuses[i], _, _ = h.post(t.Context(), "/v1/chat/completions", keyWeb, hardeningChat) })
		}
	}
	send(0, 4)
	eventually(t, 5*time.Second, "four calls upstream", func() bool { return h.simA.InFlight() == 4 })
	testenv.DeleteRedisKeys(t, url, prefix)
	send(4, 8)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("call %d = %d, want 200", i, s)
		}
	}
	if got := h.simA.MaxInFlight("acct"); got > 4 {
		t.Errorf("the upstream saw %d calls at once after Redis lost its state, want at most the cap, 4", got)
	}
}

// TestUnreachableRedisIsStateUnavailable (issue #9, item 9): with Redis
// gone, a call is refused with 503 state_unavailable and a Retry-After, so
// callers back off instead of retrying at once.
func TestUnreachableRedisIsStateUnavailable(t *testing.T) {
	proxy, state := redisThroughProxy(t, newCuttable, withLeaseTTL(hardeningLeaseTTL))
	h := newHardeningHarness(t, state, simulator.Behavior{})
	proxy.cut()
	code, retry, body := callRetryAfter(t, "POST", h.url("/v1/chat/completions"), "Bearer "+keyWeb, hardeningChat)
	if code != http.StatusServiceUnavailable || retry == "" || !strings.Contains(body, "state_unavailable") {
		t.Errorf("chat without Redis = %d (Retry-After %q) %s, want 503 state_unavailable with a Retry-After", code, retry, body)
	}
}

// TestStreamingProbeOpensTheAccountAtItsFirstByte (issue #9, item 10):
// after a 429 the account's probe is a long stream. Once its first byte is
// out the account serves others at once, while the stream still runs.
func TestStreamingProbeOpensTheAccountAtItsFirstByte(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newHardeningHarness(t, state, simulator.Behavior{FailStatus: http.StatusTooManyRequests, RetryAfter: 400 * time.Millisecond})
		firstByte, probeDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(probeDone)
			stream := strings.Replace(hardeningChat, `"model"`, `"stream":true,"model"`, 1)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url("/v1/chat/completions"), strings.NewReader(stream))
			req.Header.Set("Authorization", "Bearer "+keyWeb)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("probe: %v", err)
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			if line, err := rd.ReadString('\n'); resp.StatusCode != http.StatusOK || err != nil {
				t.Errorf("probe = %d %q (%v), want a 200 stream", resp.StatusCode, line, err)
				return
			}
			close(firstByte)
			_, _ = io.Copy(io.Discard, rd)
		}()
		eventually(t, 5*time.Second, "a 429 upstream", func() bool { return h.upstream429s() > 0 })
		h.simA.SetKey(secretA1, simulator.Behavior{Account: "acct", ChunkDelay: 250 * time.Millisecond}) // 16 words: 4s
		select {
		case <-firstByte:
		case <-time.After(5 * time.Second):
			t.Fatal("the probe's stream did not start")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		allOK(t, h.burst(ctx, 3, "m"))
		select {
		case <-probeDone:
			t.Error("the others were served only once the probe's stream had ended")
		default:
		}
		<-probeDone
	})
}
