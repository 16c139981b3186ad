package simulator_test

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

// TestAnswerMisbehaviours checks the behaviours that spoil a successful
// answer: what the client receives with each.
func TestAnswerMisbehaviours(t *testing.T) {
	const key = "sk-sim-ECHO-0123456789"
	tests := []struct {
		name      string
		give      simulator.Behavior
		stream    bool
		wantType  string
		wantCut   bool                   // reading the body fails
		wantCheck func(body string) bool // what the body shows
	}{
		{name: "answer replaced", give: simulator.Behavior{Answer: "<html>proxy error</html>"}, wantType: "text/html",
			wantCheck: func(b string) bool { return b == "<html>proxy error</html>" }},
		{name: "answer replaced, typed", give: simulator.Behavior{Answer: "data: x\n\n", AnswerType: "text/event-stream"}, stream: true, wantType: "text/event-stream",
			wantCheck: func(b string) bool { return b == "data: x\n\n" }},
		{name: "padded", give: simulator.Behavior{Pad: 100 << 10}, wantType: "application/json",
			wantCheck: func(b string) bool {
				var v struct{ Padding string }
				return json.Unmarshal([]byte(b), &v) == nil && len(v.Padding) == 100<<10 && strings.Contains(b, `"usage"`)
			}},
		{name: "cut body", give: simulator.Behavior{Pad: 100 << 10, CutBodyAfter: 50 << 10}, wantType: "application/json", wantCut: true},
		{name: "garbled event", give: simulator.Behavior{GarbleAfter: 1}, stream: true, wantType: "text/event-stream",
			wantCheck: func(b string) bool {
				return strings.Contains(b, "chatcmpl-garbled") && strings.HasSuffix(b, "data: [DONE]\n\n")
			}},
		{name: "echo in the answer", give: simulator.Behavior{EchoAuth: true}, wantType: "application/json",
			wantCheck: func(b string) bool { return strings.Contains(b, "Bearer "+key) }},
		{name: "echo in the stream", give: simulator.Behavior{EchoAuth: true}, stream: true, wantType: "text/event-stream",
			wantCheck: func(b string) bool { return strings.Contains(b, "Bearer "+key) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{key: tt.give}})
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":` + strconv.FormatBool(tt.stream) + `}`
			resp := post(t, srv, key, "/v1/chat/completions", body)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.wantType) || (err != nil) != tt.wantCut {
				t.Fatalf("answer = %d %s, read error %v; want 200 %s, cut %v", resp.StatusCode, resp.Header.Get("Content-Type"), err, tt.wantType, tt.wantCut)
			}
			if tt.wantCheck != nil && !tt.wantCheck(string(b)) {
				t.Errorf("body = %.300s…, not what %s sends", b, tt.name)
			}
		})
	}
}

// TestEchoAuthInAnError checks a FailStatus quotes the Authorization header
// in its message and in a header.
func TestEchoAuthInAnError(t *testing.T) {
	const key = "sk-sim-ECHO-0123456789"
	_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{key: {FailStatus: 400, EchoAuth: true}}})
	resp := post(t, srv, key, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	b := readAll(t, resp)
	if resp.StatusCode != 400 || !strings.Contains(decodeError(t, b).Error.Message, "Bearer "+key) || resp.Header.Get("X-Echo-Authorization") != "Bearer "+key {
		t.Errorf("answer = %d %s (X-Echo-Authorization %q), want a 400 quoting the header", resp.StatusCode, b, resp.Header.Get("X-Echo-Authorization"))
	}
}
