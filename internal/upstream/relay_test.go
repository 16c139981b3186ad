package upstream

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
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
