package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/simulator"
)

// testEdge is an edge to the simulator at url, with testSecret.
func testEdge(url string) *sluice.Edge {
	return &sluice.Edge{
		Protocol: sluice.ProtocolOpenAIChat,
		ID:       "k/ep/gpt-4o-mini", Credential: &sluice.Credential{ID: "k", Secret: testSecret}, Account: &sluice.Account{ID: "k"},
		Endpoint: &sluice.Endpoint{ID: "ep", BaseURL: url, Timeouts: sluice.Timeouts{FirstByte: 5 * time.Second, Idle: 5 * time.Second}}, Model: "gpt-4o-mini",
	}
}

// executeOn runs one attempt of a chat request on a simulator that behaves
// as b, and returns it with what the caller received.
func executeOn(t *testing.T, b simulator.Behavior, stream bool) (Attempt, *httptest.ResponseRecorder) {
	t.Helper()
	sim := simulator.New(simulator.Options{Default: b})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), testProtocols, func(string) BreakerSettings {
		return BreakerSettings{Failures: 5, Open: time.Second}
	}, nil)
	t.Cleanup(c.Close)
	body := fmt.Sprintf(`{"model":"m","stream":%t,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, stream)
	req := &sluice.Request{ID: "r1", Protocol: sluice.ProtocolOpenAIChat, Model: "m", Stream: stream, Body: []byte(body)}
	w := httptest.NewRecorder()
	return c.Execute(t.Context(), w, req, testEdge(srv.URL), time.Now(), Hooks{}), w
}

// TestAnswersThatAreNotWhatTheRouteSpeaks checks that a 2xx answer that is
// not JSON (or not SSE of JSON chunks) is an endpoint failure: before the
// first byte it can fail over (not committed, nothing written), after it
// the stream ends with the error event.
func TestAnswersThatAreNotWhatTheRouteSpeaks(t *testing.T) {
	const html = "<!DOCTYPE html><html><body>Bad gateway</body></html>"
	tests := []struct {
		name      string
		give      simulator.Behavior
		stream    bool
		committed bool
		want      error // nil: any endpoint failure
	}{
		{name: "HTML page", give: simulator.Behavior{Answer: html}},
		{name: "HTML labelled JSON", give: simulator.Behavior{Answer: html, AnswerType: "application/json"}, want: errNotJSONObject},
		{name: "JSON cut short", give: simulator.Behavior{Answer: `{"id":"c","choices":[`}, want: errNotJSONObject},
		{name: "answer cut before its end", give: simulator.Behavior{CutBodyAfter: 100}},
		{name: "stream as HTML", give: simulator.Behavior{Answer: html}, stream: true},
		{name: "stream whose first event is not JSON", give: simulator.Behavior{Answer: "data: " + html + "\n\n", AnswerType: "text/event-stream"}, stream: true, want: protocol.ErrMalformedEvent},
		{name: "stream with a malformed event", give: simulator.Behavior{GarbleAfter: 2}, stream: true, committed: true, want: protocol.ErrMalformedEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, w := executeOn(t, tt.give, tt.stream)
			if a.Class != ClassEndpoint || a.Committed != tt.committed || (tt.want != nil && !errors.Is(a.Err, tt.want)) {
				t.Fatalf("Execute = class %s, committed %v, err %v; want an endpoint failure, committed %v, %v", a.Class, a.Committed, a.Err, tt.committed, tt.want)
			}
			switch {
			case !tt.committed && w.Body.Len() > 0:
				t.Errorf("the caller got %q from an attempt that can fail over", w.Body)
			case tt.committed:
				events := strings.Split(strings.TrimSpace(w.Body.String()), "\n\n")
				last := events[len(events)-1]
				if !strings.Contains(last, string(sluice.CodeUpstreamStreamFailed)) || strings.Contains(w.Body.String(), "garbled") {
					t.Errorf("stream = %q, want the malformed event dropped and the error event last", w.Body)
				}
			}
		})
	}
}

// TestLongAnswerPassesThrough checks an answer longer than what Sluice
// holds reaches the caller whole, with its usage measured and the secret
// masked, and that one cut after the commit is an endpoint failure.
func TestLongAnswerPassesThrough(t *testing.T) {
	const pad = 3 * maxHeldAnswer
	a, w := executeOn(t, simulator.Behavior{Pad: pad, EchoAuth: true}, false)
	if a.Err != nil || !a.Committed || !a.Exec.Usage.Measured || a.Exec.Usage.CompletionTokens != 8 {
		t.Fatalf("Execute = %+v; want a committed success with its usage", a)
	}
	body := w.Body.Bytes()
	if !json.Valid(body) || len(body) < pad || w.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("caller got %d bytes (Content-Length %s), valid JSON %v; want the whole answer", len(body), w.Header().Get("Content-Length"), json.Valid(body))
	}
	if bytes.Contains(body, []byte(testSecret)) || !bytes.Contains(body, []byte("Bearer "+stars(len(testSecret)))) {
		t.Errorf("the echoed secret was not masked")
	}

	a, _ = executeOn(t, simulator.Behavior{Pad: pad, CutBodyAfter: 2 * maxHeldAnswer}, false)
	if a.Class != ClassEndpoint || !a.Committed || !errors.Is(a.Err, errAnswerCut) || a.Exec.Status != sluice.ExecutionEndpoint {
		t.Errorf("cut answer: Execute = class %s, committed %v, err %v; want a committed endpoint failure", a.Class, a.Committed, a.Err)
	}
}

// choppyReader returns at most n bytes a read, so a secret straddles reads.
type choppyReader struct {
	r io.Reader
	n int
}

func (c choppyReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// TestPassOnMasksASecretSplitByReads feeds a long answer a few bytes a read
// with the secret past the held part, at every offset of a read.
func TestPassOnMasksASecretSplitByReads(t *testing.T) {
	for chop := 5; chop <= 11; chop++ {
		var answer bytes.Buffer
		answer.WriteString(`{"pad":"` + strings.Repeat("x", maxHeldAnswer) + `",`)
		for range chop {
			answer.WriteString(`"c":"` + testSecret + `",`) // each at another offset of a read
		}
		answer.WriteString(`"usage":{"prompt_tokens":2}}`)
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: -1}
		ctx, cancel := context.WithCancelCause(t.Context())
		rd := &idleReader{r: choppyReader{bytes.NewReader(answer.Bytes()), chop}, p: startPhases(cancel, sluice.Timeouts{})}
		held, whole, err := readHeld(rd, -1)
		if err != nil || whole {
			t.Fatalf("readHeld = %d bytes, whole %v, %v; want the held part of a longer answer", len(held), whole, err)
		}
		w := httptest.NewRecorder()
		a := new(Caller).passOn(ctx, ctx, w, resp, rd, held, Attempt{}, time.Now(), Hooks{}, exchange{dialect: OpenAIChat, ending: OpenAIEnding, secret: testSecret})
		if a.Err != nil || a.Exec.Usage.PromptTokens != 2 || w.Body.Len() != answer.Len() {
			t.Fatalf("passOn = %+v with %d bytes, want usage and all %d bytes", a, w.Body.Len(), answer.Len())
		}
		if n := bytes.Count(w.Body.Bytes(), []byte(stars(len(testSecret)))); n != chop || bytes.Contains(w.Body.Bytes(), []byte(testSecret)) {
			t.Errorf("read %d bytes at a time: %d of %d secrets masked", chop, n, chop)
		}
	}
}

// TestEndingComesBeforeTheLastBytes checks hooks.ending runs while the
// answer's last bytes are still held, for a held and a passed-on answer.
func TestEndingComesBeforeTheLastBytes(t *testing.T) {
	for _, pad := range []int{0, 2 * maxHeldAnswer} {
		sim := simulator.New(simulator.Options{Default: simulator.Behavior{Pad: pad}})
		srv := httptest.NewServer(sim)
		c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), testProtocols, func(string) BreakerSettings { return BreakerSettings{Failures: 5, Open: time.Second} }, nil)
		body := `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
		w := httptest.NewRecorder()
		var sentAtEnding int
		var usage sluice.Usage
		a := c.Execute(t.Context(), w, &sluice.Request{ID: "r", Protocol: sluice.ProtocolOpenAIChat, Model: "m", Body: []byte(body)}, testEdge(srv.URL), time.Now(),
			Hooks{Ending: func(a Attempt) { sentAtEnding, usage = w.Body.Len(), a.Exec.Usage }})
		sim.Close()
		srv.Close()
		c.Close()
		if a.Err != nil || sentAtEnding >= w.Body.Len() || !usage.Measured {
			t.Errorf("pad %d: Ending saw %d of %d bytes sent, usage %+v; want it before the last bytes, with the usage", pad, sentAtEnding, w.Body.Len(), usage)
		}
	}
}
