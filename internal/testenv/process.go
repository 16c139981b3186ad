package testenv

import (
	"errors"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// process is a server started here.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited
}

// launch starts bin with args and watches for its exit.
func launch(bin string, args ...string) (*process, error) {
	cmd, err := spawn(bin, args...)
	if err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// restartable is a private server of one test that the test may kill and
// start again on the same address (RedisServer, NATSServer).
type restartable struct {
	Addr string // host:port

	t     testing.TB
	what  string                   // the server's program, for messages
	start func() (*process, error) // starts it on port and waits until it answers; nothing is left running on error
	port  int

	mu   sync.Mutex
	proc *process // nil while killed
}

// first starts the server on a free port, trying fresh ports up to
// startAttempts times, and kills it when the test ends.
func (r *restartable) first() {
	r.t.Helper()
	r.t.Cleanup(r.Kill)
	var errs []error
	for range startAttempts {
		ports, err := freePorts(1)
		if err != nil {
			r.t.Fatal(err)
		}
		r.port = ports[0]
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
		if r.proc, err = r.start(); err == nil {
			return
		}
		errs = append(errs, err)
	}
	r.t.Fatalf("%s: %v", r.what, errors.Join(errs...))
}

// Start starts the server again on its address and waits until it
// answers. It does nothing while the server runs.
func (r *restartable) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return
	}
	proc, err := r.start()
	if err != nil {
		r.t.Fatalf("%s: %v", r.what, err)
	}
	r.proc = proc
}

// Kill stops the server with SIGKILL and waits until it has exited, so its
// clients see connections refused. It does nothing while it is stopped.
func (r *restartable) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.kill()
		r.proc = nil
	}
}

// Stall stops the server with SIGSTOP: it keeps its connections and its
// state but answers nothing until Resume. It does nothing while the server
// is killed.
func (r *restartable) Stall() { r.signal(syscall.SIGSTOP) }

// Resume lets a stalled server go on (SIGCONT).
func (r *restartable) Resume() { r.signal(syscall.SIGCONT) }

func (r *restartable) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.cmd.Process.Signal(sig)
	}
}
