package upstream

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// stuckWriter is a caller that stops reading after the first write: every
// later Write blocks until the write deadline set through
// http.ResponseController passes, as a TCP connection with a full window does.
type stuckWriter struct {
	header   http.Header
	mu       sync.Mutex
	deadline time.Time
	writes   int
}

func (w *stuckWriter) Header() http.Header { return w.header }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) Flush()              {}

func (w *stuckWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	return nil
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	first, deadline := w.writes == 1, w.deadline
	w.mu.Unlock()
	if first {
		return len(p), nil
	}
	if deadline.IsZero() {
		select {} // a caller that never reads and a gateway without a deadline: the test times out
	}
	time.Sleep(time.Until(deadline))
	return 0, os.ErrDeadlineExceeded
}

func TestCallerThatStopsReadingCancelsUpstream(t *testing.T) {
	sim := simulator.New(simulator.Options{Default: simulator.Behavior{ChunkDelay: 10 * time.Millisecond}})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), testProtocols, func(string) BreakerSettings {
		return BreakerSettings{Failures: 5, Open: time.Second}
	}, nil)
	defer c.Close()
	edge := &sluice.Edge{
		Protocol:   sluice.ProtocolOpenAIChat,
		ID:         "k/ep/gpt-4o-mini",
		Credential: &sluice.Credential{ID: "k", Secret: "sk-test"},
		Account:    &sluice.Account{ID: "k"},
		Endpoint:   &sluice.Endpoint{ID: "ep", BaseURL: srv.URL, Timeouts: sluice.Timeouts{Idle: 200 * time.Millisecond}},
		Model:      "gpt-4o-mini",
	}
	body := `{"model":"m","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"go on"}]}`
	req := &sluice.Request{ID: "r1", Protocol: sluice.ProtocolOpenAIChat, Model: "m", Stream: true, Body: []byte(body)}
	w := &stuckWriter{header: http.Header{}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	a := c.Execute(ctx, w, req, edge, time.Now(), Hooks{})
	if a.Err == nil || !a.Committed || !strings.Contains(a.Err.Error(), "write to caller") {
		t.Fatalf("Execute = %+v; want a committed attempt ended by the stuck caller", a)
	}
	if ex := a.Exec; ex.Status != sluice.ExecutionCancelled {
		t.Errorf("execution status = %s, want cancelled", ex.Status)
	}
	deadline := time.Now().Add(2 * time.Second)
	for sim.Cancelled() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the upstream call was not cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// flushRecorder is a caller that records what each flush sent.
type flushRecorder struct {
	header  http.Header
	mu      sync.Mutex
	pending []byte
	flushes []string
}

func (w *flushRecorder) Header() http.Header { return w.header }
func (w *flushRecorder) WriteHeader(int)     {}

func (w *flushRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, p...)
	return len(p), nil
}

func (w *flushRecorder) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes = append(w.flushes, string(w.pending))
	w.pending = w.pending[:0]
}

func (w *flushRecorder) sent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.flushes)
}

// scriptedReader returns one chunk a read; before each read past the
// chunks it has, it waits for more.
type scriptedReader struct {
	chunks chan string
	asked  chan struct{} // a read is waiting for a chunk
}

func (r *scriptedReader) Read(p []byte) (int, error) {
	r.asked <- struct{}{}
	c, ok := <-r.chunks
	if !ok {
		return 0, io.EOF
	}
	return copy(p, c), nil
}

// TestRelayFlushesEventsAsTheyCame checks a passed-through stream's flushes:
// events that came in one read leave in one flush, and the last event at
// hand is flushed before the relay waits for the upstream, also when an
// event dropped for the caller (the usage chunk it did not ask for) came
// after it.
func TestRelayFlushesEventsAsTheyCame(t *testing.T) {
	const (
		first  = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
		finish = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
		usage  = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2}}\n\n"
		done   = "data: [DONE]\n\n"
	)
	up := &scriptedReader{chunks: make(chan string), asked: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	rd := &idleReader{r: up, p: startPhases(cancel, sluice.Timeouts{})}
	w := &flushRecorder{header: http.Header{}}
	req := &sluice.Request{ID: "r", Protocol: sluice.ProtocolOpenAIChat, Model: "m", Stream: true}
	result := make(chan Attempt, 1)
	go func() {
		result <- new(Caller).relay(ctx, ctx, w, req, rd, Attempt{}, time.Now(), Hooks{}, exchange{dialect: OpenAIChat, ending: OpenAIEnding, secret: testSecret})
	}()
	steps := []struct {
		chunk string
		want  []string // every flush so far, once the relay waits for the next chunk
	}{
		{first, []string{first}},
		{finish + usage, []string{first, finish}},
		{done, nil},
	}
	<-up.asked
	for _, s := range steps {
		up.chunks <- s.chunk
		if s.want == nil {
			break
		}
		<-up.asked // the relay has handled the chunk and reads again
		if got := w.sent(); !slices.Equal(got, s.want) {
			t.Fatalf("after %q the caller got the flushes %q, want %q", s.chunk, got, s.want)
		}
	}
	a := <-result
	if a.Err != nil || !a.Exec.Usage.Measured {
		t.Fatalf("relay = %+v, want a success with usage", a)
	}
	if got := strings.Join(w.sent(), ""); got != first+finish+done {
		t.Errorf("the caller got %q, want every event but the usage chunk", got)
	}
}
