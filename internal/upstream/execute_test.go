package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// TestPhaseTimeouts checks each phase timeout against a simulated upstream:
// the one that runs out ends the attempt, with its own cause, and a steady
// stream is not cut by an idle timeout shorter than the whole stream.
func TestPhaseTimeouts(t *testing.T) {
	const short, long = 60 * time.Millisecond, 5 * time.Second
	tests := []struct {
		name     string
		behavior simulator.Behavior
		timeouts sluice.Timeouts
		stream   bool
		tokens   int
		want     error // nil: the attempt succeeds
		// committed: the answer had begun reaching the caller
		committed bool
	}{
		{name: "first byte", tokens: 4, behavior: simulator.Behavior{Latency: long}, timeouts: sluice.Timeouts{FirstByte: short, Total: long}, want: errFirstByteTimeout},
		{name: "total before the first byte", tokens: 4, behavior: simulator.Behavior{Latency: long}, timeouts: sluice.Timeouts{FirstByte: long, Total: short}, want: errTotalTimeout},
		{name: "total alone", tokens: 4, behavior: simulator.Behavior{Latency: long}, timeouts: sluice.Timeouts{Total: short}, want: errTotalTimeout},
		{name: "idle", behavior: simulator.Behavior{StallAfter: 2}, timeouts: sluice.Timeouts{FirstByte: long, Idle: short, Total: long},
			stream: true, tokens: 8, want: errIdleTimeout, committed: true},
		{name: "total while streaming", behavior: simulator.Behavior{ChunkDelay: short / 4}, timeouts: sluice.Timeouts{FirstByte: long, Idle: long, Total: 3 * short},
			stream: true, tokens: 100, want: errTotalTimeout, committed: true},
		{name: "steady stream outlasts the idle timeout", behavior: simulator.Behavior{ChunkDelay: short / 4}, timeouts: sluice.Timeouts{FirstByte: long, Idle: short, Total: long},
			stream: true, tokens: 16, committed: true},
		{name: "answer within every timeout", tokens: 4, behavior: simulator.Behavior{Latency: short / 4}, timeouts: sluice.Timeouts{FirstByte: short, Idle: short, Total: short}, committed: true},
		{name: "no timeouts", timeouts: sluice.Timeouts{}, stream: true, tokens: 4, committed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := simulator.New(simulator.Options{Default: tt.behavior})
			srv := httptest.NewServer(sim)
			t.Cleanup(func() { sim.Close(); srv.Close() })
			c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), testProtocols, func(string) BreakerSettings {
				return BreakerSettings{Failures: 5, Open: time.Second}
			}, nil)
			t.Cleanup(c.Close)
			edge := &sluice.Edge{
				Protocol:   sluice.ProtocolOpenAIChat,
				ID:         "k/ep/gpt-4o-mini",
				Credential: &sluice.Credential{ID: "k", Secret: "sk-test"},
				Account:    &sluice.Account{ID: "k"},
				Endpoint:   &sluice.Endpoint{ID: "ep", BaseURL: srv.URL, Timeouts: tt.timeouts},
				Model:      "gpt-4o-mini",
			}
			body := fmt.Sprintf(`{"model":"m","stream":%t,"max_tokens":%d,"messages":[{"role":"user","content":"go on"}]}`, tt.stream, tt.tokens)
			req := &sluice.Request{ID: "r1", Protocol: sluice.ProtocolOpenAIChat, Model: "m", Stream: tt.stream, Body: []byte(body)}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			a := c.Execute(ctx, httptest.NewRecorder(), req, edge, start, Hooks{})
			if took := time.Since(start); tt.want != nil && took > time.Second {
				t.Errorf("the attempt took %v, want it cut by the timeout", took)
			}
			if !errors.Is(a.Err, tt.want) || a.Committed != tt.committed {
				t.Fatalf("Execute: err = %v, committed = %v; want %v, %v", a.Err, a.Committed, tt.want, tt.committed)
			}
			if tt.want == nil {
				return
			}
			var se *sluice.Error
			if a.Class != ClassEndpoint || !errors.As(a.Failure(), &se) || se.Code != sluice.CodeUpstreamTimeout {
				t.Errorf("class %s, failure %v; want an endpoint failure reported as %s", a.Class, a.Failure(), sluice.CodeUpstreamTimeout)
			}
		})
	}
}

// TestSharedHeaderValuesStayUnchanged checks the header value slices that
// every request and stream share are never written to: a call through the
// transport and the caller's response writer leaves them as they were.
func TestSharedHeaderValuesStayUnchanged(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), testProtocols, func(string) BreakerSettings {
		return BreakerSettings{Failures: 5, Open: time.Second}
	}, nil)
	t.Cleanup(c.Close)
	edge := &sluice.Edge{
		Protocol: sluice.ProtocolOpenAIChat,
		ID:       "k/ep/gpt-4o-mini", Credential: &sluice.Credential{ID: "k", Secret: "sk-test"}, Account: &sluice.Account{ID: "k"},
		Endpoint: &sluice.Endpoint{ID: "ep", BaseURL: srv.URL}, Model: "gpt-4o-mini",
	}
	shared := map[string][]string{"application/json": jsonContentType, "sluice": userAgent, "text/event-stream": eventStream, "no-cache": noCache, "no": noBuffering}
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"m","stream":%t,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, stream)
		w := httptest.NewRecorder()
		a := c.Execute(t.Context(), w, &sluice.Request{ID: "r", Protocol: sluice.ProtocolOpenAIChat, Model: "m", Stream: stream, Body: []byte(body)}, edge, time.Now(), Hooks{})
		if a.Err != nil {
			t.Fatalf("Execute(stream %v) = %v", stream, a.Err)
		}
		w.Header().Add("Content-Type", "appended by a later writer")
	}
	for want, got := range shared {
		if len(got) != 1 || cap(got) != 1 || got[0] != want {
			t.Errorf("shared header value = %q (cap %d), want [%q]", got, cap(got), want)
		}
	}
}
