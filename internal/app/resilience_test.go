package app_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

func TestFailoverBeforeTheFirstByte(t *testing.T) {
	h := newHarness(t)
	h.simA.SetKey(secretA1, simulator.Behavior{FailStatus: 502})
	h.simA.SetKey(secretA2, simulator.Behavior{FailStatus: 500})
	resp, err := h.sdk(keyWeb).Chat.Completions.New(t.Context(), chatParams("fast"))
	if err != nil {
		t.Fatalf("request failed although ep-b was healthy: %v", err)
	}
	if resp.Choices[0].Message.Content == "" || h.simB.Count(secretB1) != 1 {
		t.Errorf("answer %+v, ep-b calls %d; want ep-b to serve it", resp.Choices, h.simB.Count(secretB1))
	}
	rec := h.usage(t, 1)[0]
	var got []string
	for _, e := range rec.Executions {
		got = append(got, e.CredentialID+":"+string(e.Status))
	}
	if len(got) != 3 || got[2] != "cred-b1:ok" || !strings.HasSuffix(got[0], ":endpoint") || !strings.HasSuffix(got[1], ":endpoint") {
		t.Errorf("executions = %v, want two endpoint failures on ep-a then cred-b1:ok", got)
	}
}

// readStream returns the data payloads of an SSE response.
func readStream(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	return data
}

func (h *harness) stream(ctx context.Context, model string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url("/v1/chat/completions"),
		strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"count to twenty"}]}`))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func TestNoFailoverAfterTheFirstByte(t *testing.T) {
	tests := []struct {
		name string
		give simulator.Behavior
	}{
		{"connection cut", simulator.Behavior{CutAfter: 3}},
		{"stream stalls past the idle timeout", simulator.Behavior{StallAfter: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.simA.SetKey(secretA1, tt.give)
			h.simA.SetKey(secretA2, tt.give)
			resp := h.stream(t.Context(), "fast")
			defer resp.Body.Close()
			data := readStream(t, resp)
			if resp.StatusCode != 200 || len(data) < 2 {
				t.Fatalf("stream = %d with %d events, want 200 and the events sent before the failure", resp.StatusCode, len(data))
			}
			last := data[len(data)-1]
			if !strings.Contains(last, `"error"`) || !strings.Contains(last, string(sluice.CodeUpstreamStreamFailed)) {
				t.Errorf("last event = %s, want an error event", last)
			}
			for _, d := range data {
				if d == "[DONE]" {
					t.Errorf("stream has [DONE] although the upstream failed")
				}
			}
			if n := len(h.simB.Requests()); n != 0 {
				t.Errorf("ep-b calls = %d, want 0: a committed stream never fails over", n)
			}
			if n := len(h.simA.Requests()); n != 1 {
				t.Errorf("ep-a calls = %d, want 1", n)
			}
		})
	}
}

func TestBreakerOpensHalfOpensAndCloses(t *testing.T) {
	h := newHarness(t)
	h.simA.SetKey(secretA1, simulator.Behavior{FailStatus: 500})
	h.simA.SetKey(secretA2, simulator.Behavior{FailStatus: 500})
	// Three consecutive failures on ep-a (failures: 3) open its breaker;
	// every request is still served by ep-b.
	for i := range 2 {
		if status, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); status != 200 {
			t.Fatalf("request %d = %d %s, want ep-b to serve it", i, status, body)
		}
	}
	seen := len(h.simA.Requests())
	if seen != 3 {
		t.Fatalf("ep-a calls = %d, want 3 before the breaker opens", seen)
	}
	// Open: ep-a is not called.
	for range 3 {
		h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
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
	time.Sleep(350 * time.Millisecond)
	h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
	if n := len(h.simA.Requests()); n != seen+1 {
		t.Fatalf("ep-a calls after the open period = %d, want exactly one probe (%d)", n, seen+1)
	}
	bCalls := h.simB.Count(secretB1)
	for range 4 {
		h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
	}
	if n := len(h.simA.Requests()); n != seen+5 || h.simB.Count(secretB1) != bCalls {
		t.Errorf("after a good probe ep-a calls = %d (want %d), ep-b calls = %d (want %d): breaker not closed", n, seen+5, h.simB.Count(secretB1), bCalls)
	}
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
