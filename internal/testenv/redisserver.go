package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	restartable
	bin string
	dir string
}

// startAttempts is how many times a server or cluster is started on fresh
// ports before a test fails: a port chosen free can still be taken by
// another process before redis-server binds it.
const startAttempts = 3

// StartRedis starts a private standalone redis-server for t, stopped when
// t ends. Without redis-server the test is skipped, except under CI=true.
// Its Start starts it again, empty.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	s := &RedisServer{bin: redisServerBinary(t), dir: t.TempDir()}
	s.restartable = restartable{t: t, what: "redis-server", start: func() (*process, error) { return startServer(s.bin, s.port, s.dir) }}
	s.first()
	return s
}

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr + "/0" }

// startServer starts redis-server on port with extra flags and waits until
// it answers on that port — it, not another server that took the port
// first: a server that cannot bind exits, and one answering with another
// process ID is somebody else's. Either way the process is gone on error.
func startServer(bin string, port int, dir string, extra ...string) (*process, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := launch(bin, append(serverArgs(port, dir), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("start on %s: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.waitReady(ctx, addr); err != nil {
		p.kill()
		return nil, fmt.Errorf("on %s: %w", addr, err)
	}
	return p, nil
}

// waitReady waits until the process answers PING on addr.
func (p *process) waitReady(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for {
		info, err := c.InfoMap(ctx, "server").Result()
		if err == nil {
			pid := info["Server"]["process_id"]
			if pid != strconv.Itoa(p.cmd.Process.Pid) {
				return fmt.Errorf("another server (process %s) answers there", pid)
			}
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("redis-server exited at start (%v)", p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("no answer within %s: %w", startTimeout, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
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
// prefix of their own (RedisClusterPrefix). Without redis-server the test is skipped, except
// under CI=true.
func RedisCluster(t testing.TB) []string {
	t.Helper()
	bin := redisServerBinary(t)
	sharedCluster.Lock()
	defer sharedCluster.Unlock()
	if sharedCluster.addrs == nil && sharedCluster.err == nil {
		var errs []error
		for range startAttempts {
			addrs, err := startCluster(bin)
			if err == nil {
				sharedCluster.addrs = addrs
				break
			}
			errs = append(errs, err)
		}
		if sharedCluster.addrs == nil {
			sharedCluster.err = errors.Join(errs...)
		}
	}
	if sharedCluster.err != nil {
		t.Fatalf("redis cluster: %v", sharedCluster.err)
	}
	return sharedCluster.addrs
}

// clusterTimeout bounds how long the nodes of a started cluster may take
// to see each other; longer than a server's start, since they learn of
// each other by gossip once a second, slower on a loaded machine.
const clusterTimeout = 20 * time.Second

// startCluster starts the nodes, gives each a third of the slots, has them
// meet, and waits until every node sees the whole cluster. On error it
// kills the nodes it started.
func startCluster(bin string) (addrs []string, err error) {
	removeStaleDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("sluice-redis-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * clusterNodes) // a client port and a cluster bus port each
	if err != nil {
		return nil, err
	}
	var procs []*process
	defer func() {
		if err != nil {
			for _, p := range procs {
				p.kill()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	addrs = make([]string, clusterNodes)
	clients := make([]*redis.Client, clusterNodes)
	for i := range clusterNodes {
		port, bus := ports[2*i], ports[2*i+1]
		p, err := startServer(bin, port, dir,
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)))
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		procs = append(procs, p)
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		clients[i] = redis.NewClient(&redis.Options{Addr: addrs[i]})
		defer clients[i].Close()
		first, last := i*16384/clusterNodes, (i+1)*16384/clusterNodes-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			return nil, fmt.Errorf("node %s: add slots: %w", addrs[i], err)
		}
		if i > 0 {
			if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", port, bus).Err(); err != nil {
				return nil, fmt.Errorf("node %s: meet: %w", addrs[i], err)
			}
		}
	}
	for i, c := range clients {
		for !clusterReady(ctx, c) {
			if ctx.Err() != nil {
				info, _ := c.ClusterInfo(context.Background()).Result()
				nodes, _ := c.ClusterNodes(context.Background()).Result()
				return nil, fmt.Errorf("node %s did not see the whole cluster within %s:\n%s\n%s", addrs[i], clusterTimeout, info, nodes)
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

// freePorts returns n distinct loopback ports that were free a moment ago,
// chosen below the kernel's ephemeral range where it leaves room: a port
// there is taken only by a listener that asks for it by number, never by
// another process's outgoing connection or listen on port 0 — which, with
// the many connections of parallel test processes, took a chosen port
// before redis-server bound it often enough to fail CI.
func freePorts(n int) ([]int, error) {
	low := fixedPortsFloor
	high := ephemeralFloor()
	ports := make([]int, 0, n)
	for len(ports) < n {
		port := 0 // the kernel's choice, where no room is left below its range
		if high-low > 1000 {
			port = low + rand.IntN(high-low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			if port != 0 {
				continue // taken; try another
			}
			return nil, err
		}
		defer l.Close() // held until all are chosen, so none is chosen twice
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// fixedPortsFloor is the lowest port freePorts chooses, above the ports of
// well-known services.
const fixedPortsFloor = 20000

// ephemeralFloor is the first port of the kernel's ephemeral range (0 when
// it cannot be read: no room, so freePorts asks the kernel).
func ephemeralFloor() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low int
	if _, err := fmt.Sscan(string(b), &low); err != nil {
		return 0
	}
	return low
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
