// Command killburst measures what a crash costs the usage records: it
// runs a sluice binary (--sluice) on a catalog of its own in front of an
// upstream in this process, sends a burst of streamed chat completions
// from --callers callers, kills the gateway with SIGKILL --kill-after into
// the burst, starts it again on the same database (which replays its
// spool) and stops it with SIGTERM. Every call the upstream answered in
// full should then have a usage record.
//
// --upstream sim is the simulated provider (short streams; the callers
// read as fast as they can). --upstream long streams 3.3 MB at once to
// callers that read a line a millisecond: the upstream finishes long
// before its caller does.
//
// It prints one line for scripts:
//
//	answered=4112 records=4103 missing=9
//
// For example, a binary of each commit in turn:
//
//	go build -o /tmp/sluice ./cmd/sluice && go run ./bench/killburst --sluice /tmp/sluice
package main

import (
	"bufio"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sluicehq/sluice/internal/simulator"
)

func main() {
	bin := flag.String("sluice", "", "the sluice binary to run (required)")
	dir := flag.String("dir", "", "where the catalog, database and spool go (default: a new temporary directory)")
	kind := flag.String("upstream", "sim", "sim (the simulated provider) or long (3.3 MB streams to slow callers)")
	callers := flag.Int("callers", 128, "callers streaming at once")
	killAfter := flag.Duration("kill-after", 3*time.Second, "how long into the burst the gateway is killed")
	listen := flag.String("listen", "127.0.0.1:18931", "the gateway's address (its admin API listens on the next port)")
	flag.Parse()
	if *bin == "" {
		log.Fatal("killburst: --sluice is required")
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "killburst")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}

	var full atomic.Int64 // calls the long upstream wrote in full
	var sim *simulator.Simulator
	var up http.Handler
	slowCallers := false
	switch *kind {
	case "sim":
		sim = simulator.New(simulator.Options{Default: simulator.Behavior{ChunkDelay: 2 * time.Millisecond}})
		up = sim
	case "long":
		up, slowCallers = longStreams(&full), true
	default:
		log.Fatalf("killburst: --upstream %q: want sim or long", *kind)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = http.Serve(ln, up) }()

	g := gateway{bin: *bin, dir: *dir, listen: *listen}
	if err := g.writeCatalog(ln.Addr().String()); err != nil {
		log.Fatal(err)
	}
	cmd := g.start()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range *callers {
		wg.Go(func() { stream(g.listen, stop, slowCallers) })
	}
	time.Sleep(*killAfter)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	close(stop)
	wg.Wait()

	answered := full.Load()
	if sim != nil {
		for _, r := range sim.Requests() {
			if r.Status == http.StatusOK && !r.Cancelled {
				answered++
			}
		}
	}
	cmd = g.start() // replays the spool
	time.Sleep(3 * time.Second)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	records, err := g.records()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("answered=%d records=%d missing=%d\n", answered, records, answered-records)
}

// gateway is the sluice binary under test and where it keeps its state.
type gateway struct{ bin, dir, listen string }

const (
	upstreamSecret = "sk-upstream-0123456789abcdef"
	callerKey      = "sk-sluice-killburst-0123456789abcdef"
)

func (g gateway) writeCatalog(upstream string) error {
	host, port, err := net.SplitHostPort(g.listen)
	if err != nil {
		return err
	}
	var p int
	fmt.Sscan(port, &p)
	cat := fmt.Sprintf(`version: 1
server: {listen: %q, admin_listen: "%s:%d", admin_token_env: ADMIN}
database: {url: "sqlite://%s/sluice.db"}
endpoints: [{id: up, base_url: "http://%s", protocols: [openai.chat]}]
credentials: [{id: c1, secret_env: UP, endpoints: [up], max_inflight: 1000000}]
models: [{alias: fast, deployments: [{model: gpt-4o-mini, endpoints: [up]}]}]
keys: [{id: k, tenant: t, secret_env: KEY}]
`, g.listen, host, p+1, g.dir, upstream)
	return os.WriteFile(filepath.Join(g.dir, "catalog.yaml"), []byte(cat), 0o600)
}

// start runs the gateway and waits until it listens.
func (g gateway) start() *exec.Cmd {
	cmd := exec.Command(g.bin, "serve", "--config", filepath.Join(g.dir, "catalog.yaml"))
	cmd.Env = append(os.Environ(), "ADMIN=killburst-admin-0123456789", "UP="+upstreamSecret, "KEY="+callerKey)
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	for range 200 {
		if c, err := net.Dial("tcp", g.listen); err == nil {
			c.Close()
			return cmd
		}
		time.Sleep(50 * time.Millisecond)
	}
	log.Fatal("killburst: the gateway did not start")
	return nil
}

// records counts the usage records of answered calls in the database.
func (g gateway) records() (int64, error) {
	db, err := sql.Open("sqlite", filepath.Join(g.dir, "sluice.db"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRow(`SELECT count(*) FROM usage_records WHERE status = 200`).Scan(&n)
	return n, err
}

// stream sends streamed chats one after another until stop, reading each
// answer to its end (a line a millisecond when slow).
func stream(addr string, stop <-chan struct{}, slow bool) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"fast","stream":true,"messages":[{"role":"user","content":"Tell me a story"}]}`))
		req.Header.Set("Authorization", "Bearer "+callerKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // the gateway is down
			continue
		}
		r := bufio.NewReader(resp.Body)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				break
			}
			if slow {
				time.Sleep(time.Millisecond)
			}
		}
		resp.Body.Close()
	}
}

// longStreams is an upstream that writes a 3.3 MB chat stream at once and
// counts in full the streams all of whose writes succeeded.
func longStreams(full *atomic.Int64) http.Handler {
	const event = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"%s"}}]}` + "\n\n"
	chunk := fmt.Sprintf(event, strings.Repeat("x", 1100))
	end := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3000,"total_tokens":3005}}` + "\n\n" +
		"data: [DONE]\n\n"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range 3000 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		if _, err := io.WriteString(w, end); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		full.Add(1)
	})
}
