package app_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// TestFailoverBeforeTheFirstByte: both credentials of ep-a fail (one
// overloaded, in the upstream protocol's way, one with a 500) before they
// answer, so ep-b serves the request, whole or streamed.
func TestFailoverBeforeTheFirstByte(t *testing.T) {
	eachWire(t, wires, func(t *testing.T, w wire) {
		for _, stream := range []bool{false, true} {
			t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
				h := w.harness(t, catalogTemplate, "{backend: memory}", simulator.Options{})
				h.simA.SetKey(secretA1, simulator.Behavior{FailStatus: w.upstream.overloaded})
				h.simA.SetKey(secretA2, simulator.Behavior{FailStatus: 500})
				resp := h.send(t.Context(), w.caller, keyWeb, "fast", stream, w.caller.body("fast", "hello there", stream), nil)
				if resp == nil {
					t.FailNow()
				}
				defer resp.Body.Close()
				if stream {
					events := readEvents(resp)
					if resp.StatusCode != 200 || len(events) == 0 || !w.caller.streamDone(events[len(events)-1]) {
						t.Errorf("stream = %d %v, want ep-b's whole stream", resp.StatusCode, events)
					}
				} else if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || !strings.Contains(string(b), w.caller.answered) {
					t.Errorf("answer = %d %s, want ep-b's answer although ep-a failed", resp.StatusCode, b)
				}
				if n := h.simB.Count(secretB1); n != 1 {
					t.Errorf("ep-b calls = %d, want 1", n)
				}
				rec := h.usage(t, 1)[0]
				var got []string
				for _, e := range rec.Executions {
					got = append(got, e.CredentialID+":"+string(e.Status))
				}
				if len(got) != 3 || got[2] != "cred-b1:ok" || !strings.HasSuffix(got[0], ":endpoint") || !strings.HasSuffix(got[1], ":endpoint") {
					t.Errorf("executions = %v, want two endpoint failures on ep-a then cred-b1:ok", got)
				}
				w.wantUpstreamCalls(t, h)
			})
		}
	})
}

// readStream returns the data payloads of an SSE response.
func readStream(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var data []string
	for _, ev := range readEvents(resp) {
		data = append(data, ev.data)
	}
	return data
}

// stream starts a streamed chat completion for model.
func (h *harness) stream(ctx context.Context, model string) *http.Response {
	h.t.Helper()
	return h.streamAs(ctx, chatCaller, model)
}

// streamAs starts a streamed request of c's protocol for model.
func (h *harness) streamAs(ctx context.Context, c *callerSide, model string) *http.Response {
	h.t.Helper()
	resp := h.send(ctx, c, keyWeb, model, true, c.body(model, "count to twenty", true), nil)
	if resp == nil {
		h.t.FailNow()
	}
	return resp
}

// TestNoFailoverAfterTheFirstByte: once a stream has begun, an upstream
// that breaks it ends the caller's stream with the caller protocol's error
// event, never its normal end, and no other endpoint is tried.
func TestNoFailoverAfterTheFirstByte(t *testing.T) {
	tests := []struct {
		name string
		give simulator.Behavior
	}{
		{"connection cut", simulator.Behavior{CutAfter: 3}},
		{"stream stalls past the idle timeout", simulator.Behavior{StallAfter: 3}},
		{"upstream error event", simulator.Behavior{ErrorAfter: 3}},
	}
	eachWire(t, wires, func(t *testing.T, w wire) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := w.harness(t, catalogTemplate, "{backend: memory}", simulator.Options{})
				h.simA.SetKey(secretA1, tt.give)
				h.simA.SetKey(secretA2, tt.give)
				resp := h.streamAs(t.Context(), w.caller, "fast")
				defer resp.Body.Close()
				events := readEvents(resp)
				if resp.StatusCode != 200 || len(events) < 2 {
					t.Fatalf("stream = %d with %d events, want 200 and the events sent before the failure", resp.StatusCode, len(events))
				}
				last := events[len(events)-1]
				if code, ok := w.caller.streamFailed(last); !ok || code != string(sluice.CodeUpstreamStreamFailed) {
					t.Errorf("last event = %+v, want %s's error event with code %s", last, w.caller.protocol, sluice.CodeUpstreamStreamFailed)
				}
				for _, ev := range events {
					if w.caller.streamDone(ev) {
						t.Errorf("stream has %+v, the end of a complete stream, although the upstream failed", ev)
					}
				}
				if n := len(h.simB.Requests()); n != 0 {
					t.Errorf("ep-b calls = %d, want 0: a committed stream never fails over", n)
				}
				if n := len(h.simA.Requests()); n != 1 {
					t.Errorf("ep-a calls = %d, want 1", n)
				}
				w.wantUpstreamCalls(t, h)
			})
		}
	})
}

func TestBreakerOpensHalfOpensAndCloses(t *testing.T) {
	eachWire(t, wires, func(t *testing.T, w wire) {
		// Open for 1s, not the template's 300ms: the three requests while
		// open must all fall inside it on a machine slowed by other work.
		const open = time.Second
		h := w.harness(t, strings.Replace(catalogTemplate, "open: 300ms", "open: 1s", 1), "{backend: memory}", simulator.Options{})
		ask := func() (int, string) { return h.ask(t.Context(), w.caller, keyWeb, "fast", "hello there", nil) }
		h.simA.SetKey(secretA1, simulator.Behavior{FailStatus: 500})
		h.simA.SetKey(secretA2, simulator.Behavior{FailStatus: 500})
		// Three consecutive failures on ep-a (failures: 3) open its breaker;
		// every request is still served by ep-b.
		for i := range 2 {
			if status, body := ask(); status != 200 {
				t.Fatalf("request %d = %d %s, want ep-b to serve it", i, status, body)
			}
		}
		seen := len(h.simA.Requests())
		if seen != 3 {
			t.Fatalf("ep-a calls = %d, want 3 before the breaker opens", seen)
		}
		// Open: ep-a is not called.
		for range 3 {
			ask()
		}
		if n := len(h.simA.Requests()); n != seen {
			t.Errorf("ep-a calls while open = %d, want %d", n, seen)
		}
		if _, body := h.adminGet("/metrics"); !strings.Contains(body, `sluice_endpoint_breaker_state{endpoint="ep-a"} 1`) {
			t.Errorf("metrics do not show ep-a's breaker open")
		}
		// After the open period one probe goes to ep-a; it succeeds and closes it.
		h.simA.SetKey(secretA1, simulator.Behavior{})
		h.simA.SetKey(secretA2, simulator.Behavior{})
		time.Sleep(open + 50*time.Millisecond)
		ask()
		if n := len(h.simA.Requests()); n != seen+1 {
			t.Fatalf("ep-a calls after the open period = %d, want exactly one probe (%d)", n, seen+1)
		}
		bCalls := h.simB.Count(secretB1)
		for range 4 {
			ask()
		}
		if n := len(h.simA.Requests()); n != seen+5 || h.simB.Count(secretB1) != bCalls {
			t.Errorf("after a good probe ep-a calls = %d (want %d), ep-b calls = %d (want %d): breaker not closed", n, seen+5, h.simB.Count(secretB1), bCalls)
		}
		w.wantUpstreamCalls(t, h)
	})
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	h := newHarness(t)
	h.failAll(simulator.Behavior{StallAfter: 1})
	ctx, cancel := context.WithCancel(t.Context())
	resp := h.stream(ctx, "only-a")
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("first event: %v", err)
	}
	cancel()
	start := time.Now()
	eventually(t, 2*time.Second, "upstream cancelled", func() bool { return h.simA.Cancelled() == 1 })
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("upstream cancelled %v after the client left, want within 100ms", d)
	}
	rec := h.usage(t, 1)[0]
	if rec.Executions[0].Status != sluice.ExecutionCancelled {
		t.Errorf("execution status = %s, want cancelled", rec.Executions[0].Status)
	}
}

func TestClientDisconnectBeforeHeadersCancelsUpstream(t *testing.T) {
	h := newHarness(t)
	h.failAll(simulator.Behavior{Latency: 10 * time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url("/v1/chat/completions"), strings.NewReader(chatBody))
		req.Header.Set("Authorization", "Bearer "+keyWeb)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	eventually(t, 2*time.Second, "request reached upstream", func() bool { return len(h.simA.Requests()) == 1 })
	cancel()
	start := time.Now()
	eventually(t, 2*time.Second, "upstream cancelled", func() bool { return h.simA.Cancelled() == 1 })
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("upstream cancelled %v after the client left, want within 100ms", d)
	}
	<-done
	if n := len(h.simB.Requests()); n != 0 {
		t.Errorf("ep-b calls = %d, want 0: a caller that left is not failed over", n)
	}
}
