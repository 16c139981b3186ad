package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// defaultNATSURL is the shared NATS server (with JetStream) used when the
// environment names none.
const defaultNATSURL = "nats://127.0.0.1:4222"

// NATS returns the URL of a NATS server with JetStream after checking
// that it says so: SLUICE_TEST_NATS_URL, else nats://127.0.0.1:4222. The
// server is shared: a test must use streams and subjects of its own and
// delete them.
func NATS(t testing.TB) string {
	t.Helper()
	raw := envOr("SLUICE_TEST_NATS_URL", defaultNATSURL)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("SLUICE_TEST_NATS_URL %q: %v", raw, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), dialTimeout)
	defer cancel()
	if _, err := natsInfo(ctx, u.Host); err != nil {
		unreachable(t, "nats", u.Redacted(), err)
	}
	return raw
}

// NATSServer is a private nats-server of one test, with JetStream storing
// to a directory of the test, that the test may kill and start again on
// the same address and directory: a NATS that goes away and comes back
// with the streams it had.
type NATSServer struct {
	restartable
	bin  string
	dir  string
	name string // its server_name, so that a start can tell it answers and not another server
}

// StartNATS starts a private nats-server with JetStream for t, killed when
// t ends. Without nats-server the test is skipped, except under CI=true.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	s := &NATSServer{bin: natsServerBinary(t), dir: t.TempDir(), name: "sluice-test-" + strings.ToLower(rand.Text()[:10])}
	s.restartable = restartable{t: t, what: "nats-server", start: s.start}
	s.first()
	return s
}

// URL is the server's nats:// URL.
func (s *NATSServer) URL() string { return "nats://" + s.Addr }

// start runs nats-server on s's port and directory and waits until it
// answers there as itself; the process is gone on error.
func (s *NATSServer) start() (*process, error) {
	p, err := launch(s.bin, "-js", "-sd", s.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-n", s.name)
	if err != nil {
		return nil, fmt.Errorf("start on %s: %w", s.Addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		info, err := natsInfo(ctx, s.Addr)
		if err == nil {
			if info.ServerName != s.name {
				p.kill()
				return nil, fmt.Errorf("on %s: another server (%s) answers there", s.Addr, info.ServerName)
			}
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("nats-server exited at start on %s (%v)", s.Addr, p.cmd.ProcessState)
		case <-ctx.Done():
			p.kill()
			return nil, fmt.Errorf("on %s: no answer within %s: %w", s.Addr, startTimeout, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// serverInfo is what Sluice's tests read of a server's INFO line.
type serverInfo struct {
	ServerName string `json:"server_name"`
	JetStream  bool   `json:"jetstream"`
}

// natsInfo reads the INFO line a NATS server sends on connect, and fails
// unless JetStream is on.
func natsInfo(ctx context.Context, addr string) (serverInfo, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return serverInfo{}, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return serverInfo{}, err
	}
	payload, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		return serverInfo{}, fmt.Errorf("not a NATS server: %.40q", line)
	}
	var info serverInfo
	if err := json.Unmarshal([]byte(payload), &info); err != nil {
		return serverInfo{}, fmt.Errorf("INFO: %w", err)
	}
	if !info.JetStream {
		return serverInfo{}, errors.New("JetStream is off (start nats-server with -js)")
	}
	return info, nil
}

// natsServerBinary finds nats-server, or skips t (fails it under CI).
func natsServerBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/nats-server"); statErr == nil {
			return "/usr/sbin/nats-server"
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("nats-server not found (required because CI=true): %v", err)
		}
		t.Skipf("nats-server not found: %v", err)
	}
	return bin
}
