package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a redis-server started here may take to
// answer, and a cluster to reach cluster_state:ok.
const startTimeout = 10 * time.Second

// RedisServer is a private redis-server of one test, without persistence,
// that the test may kill and start again on the same address: a Redis
// that goes away and comes back empty.
type RedisServer struct {
	Addr string // host:port

	t    testing.TB
	bin  string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd // nil while killed
}

// StartRedis starts a private standalone redis-server for t, stopped when
// t ends. Without redis-server the test is skipped, except under CI=true.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin := redisServerBinary(t)
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir(), port: ports[0]}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr + "/0" }

// Start starts the server (again, empty) and waits until it answers PING.
// It does nothing while the server runs.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd, err := spawn(s.bin, serverArgs(s.port, s.dir)...)
	if err != nil {
		s.t.Fatalf("start redis-server on %s: %v", s.Addr, err)
	}
	s.cmd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := waitPing(ctx, s.Addr); err != nil {
		s.t.Fatalf("redis-server on %s: %v", s.Addr, err)
	}
}

// Kill stops the server with SIGKILL and waits until it has exited, so its
// clients see connections refused. It does nothing while it is stopped.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// clusterNodes is the number of primaries of the shared test cluster.
const clusterNodes = 3

// The shared cluster of this test process: started by the first test that
// asks for it, reused by every later one, stopped when the process exits.
var sharedCluster struct {
	sync.Mutex
	addrs []string
	err   error // why it could not start; every later caller fails alike
}

// RedisCluster returns the node addresses of a Redis Cluster of three
// primaries (no replicas), each owning a third of the slots. It is started
// from the installed redis-server by the first caller of the test process
// (in about 2.5 s: Redis keeps a new primary unwritable for its first two
// seconds), shared by every later test, and killed when the process exits.
// Tests share it as they share the Redis of Redis(t): with keys under a
// prefix of their own. Without redis-server the test is skipped, except
// under CI=true.
func RedisCluster(t testing.TB) []string {
	t.Helper()
	bin := redisServerBinary(t)
	sharedCluster.Lock()
	defer sharedCluster.Unlock()
	if sharedCluster.addrs == nil && sharedCluster.err == nil {
		sharedCluster.addrs, sharedCluster.err = startCluster(bin)
	}
	if sharedCluster.err != nil {
		t.Fatalf("redis cluster: %v", sharedCluster.err)
	}
	return sharedCluster.addrs
}

// startCluster starts the nodes, gives each a third of the slots, has them
// meet, and waits until every node sees the whole cluster.
func startCluster(bin string) ([]string, error) {
	removeStaleDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("sluice-redis-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * clusterNodes) // a client port and a cluster bus port each
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	addrs := make([]string, clusterNodes)
	clients := make([]*redis.Client, clusterNodes)
	for i := range clusterNodes {
		port, bus := ports[2*i], ports[2*i+1]
		args := append(serverArgs(port, dir),
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)))
		if _, err := spawn(bin, args...); err != nil {
			return nil, err
		}
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		clients[i] = redis.NewClient(&redis.Options{Addr: addrs[i]})
		defer clients[i].Close()
	}
	for i, c := range clients {
		if err := waitPing(ctx, addrs[i]); err != nil {
			return nil, fmt.Errorf("node %s: %w", addrs[i], err)
		}
		first, last := i*16384/clusterNodes, (i+1)*16384/clusterNodes-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			return nil, fmt.Errorf("node %s: add slots: %w", addrs[i], err)
		}
		if i > 0 {
			if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", ports[2*i], ports[2*i+1]).Err(); err != nil {
				return nil, fmt.Errorf("node %s: meet: %w", addrs[i], err)
			}
		}
	}
	for i, c := range clients {
		for !clusterReady(ctx, c) {
			if ctx.Err() != nil {
				info, _ := c.ClusterInfo(context.Background()).Result()
				return nil, fmt.Errorf("node %s did not see the whole cluster within %s:\n%s", addrs[i], startTimeout, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return addrs, nil
}

// clusterReady reports whether node c is in a healthy cluster of every
// node and knows which node serves each slot (what a cluster client asks).
func clusterReady(ctx context.Context, c *redis.Client) bool {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") ||
		!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", clusterNodes)) {
		return false
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil || len(shards) != clusterNodes {
		return false
	}
	for _, s := range shards {
		if len(s.Slots) == 0 || len(s.Nodes) == 0 || s.Nodes[0].Health != "online" {
			return false
		}
	}
	return true
}

// serverArgs are the flags of every redis-server started here: loopback
// only, nothing written to disk but a cluster's node file.
func serverArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", ""}
}

// redisServerBinary finds redis-server, or skips t (fails it under CI).
func redisServerBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found (required because CI=true): %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	return bin
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are chosen, so none is chosen twice
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func waitPing(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no answer to PING: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spawner starts the servers from one OS thread that never exits, so that
// their parent-death signal (SIGKILL) fires when this process exits, and
// only then: Linux sends it when the thread that forked them ends.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// spawn starts bin with its output discarded, killed when this process
// exits (even by a crash or a test timeout).
func spawn(bin string, args ...string) (*exec.Cmd, error) {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r := spawnRequest{cmd: cmd, done: make(chan error)}
	spawner.reqs <- r
	if err := <-r.done; err != nil {
		return nil, err
	}
	return cmd, nil
}

// removeStaleDirs removes the directories of clusters whose test process
// has exited (their nodes died with it).
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-redis-*-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.Split(filepath.Base(d), "-")[2])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}
