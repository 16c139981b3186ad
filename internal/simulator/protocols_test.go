package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

// protocol is one way to ask the simulator for an answer.
type protocol struct {
	name   string
	path   string
	header func(h http.Header, key string)
	body   func(stream bool) string
	end    string // what a complete stream ends with
}

var protocols = []protocol{
	{"chat", "/v1/chat/completions",
		func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
		func(stream bool) string {
			return `{"model":"m","stream":` + boolJSON(stream) + `,"messages":[{"role":"user","content":"hi"}]}`
		},
		"data: [DONE]\n\n"},
	{"messages", "/v1/messages",
		func(h http.Header, key string) { h.Set("X-Api-Key", key); h.Set("Anthropic-Version", "2023-06-01") },
		func(stream bool) string {
			return `{"model":"m","max_tokens":100,"stream":` + boolJSON(stream) + `,"messages":[{"role":"user","content":"hi"}]}`
		},
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	{"responses", "/v1/responses",
		func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
		func(stream bool) string { return `{"model":"m","stream":` + boolJSON(stream) + `,"input":"hi"}` },
		"}\n\n"},
}

func boolJSON(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestMisbehavioursOnEveryProtocol checks the behaviours that spoil an
// answer do so on Messages and Responses as on chat.
func TestMisbehavioursOnEveryProtocol(t *testing.T) {
	const key = "sk-sim-ECHO-0123456789"
	tests := []struct {
		name      string
		give      simulator.Behavior
		stream    bool
		wantCut   bool                   // reading the body fails
		wantCheck func(body string) bool // what the body shows
	}{
		{name: "answer replaced", give: simulator.Behavior{Answer: "<html>proxy error</html>"},
			wantCheck: func(b string) bool { return b == "<html>proxy error</html>" }},
		{name: "padded", give: simulator.Behavior{Pad: 100 << 10},
			wantCheck: func(b string) bool {
				var v struct{ Padding string }
				return json.Unmarshal([]byte(b), &v) == nil && len(v.Padding) == 100<<10 && strings.Contains(b, `"usage"`)
			}},
		{name: "cut body", give: simulator.Behavior{Pad: 100 << 10, CutBodyAfter: 50 << 10}, wantCut: true},
		{name: "echo in the answer", give: simulator.Behavior{EchoAuth: true},
			wantCheck: func(b string) bool { return strings.Contains(b, key) }},
		{name: "echo in the stream", give: simulator.Behavior{EchoAuth: true}, stream: true,
			wantCheck: func(b string) bool { return strings.Contains(b, key) }},
		{name: "garbled event", give: simulator.Behavior{GarbleAfter: 1}, stream: true,
			wantCheck: func(b string) bool { return strings.Contains(b, `":"`+"\n\n") }},
		{name: "cut stream", give: simulator.Behavior{CutAfter: 2}, stream: true, wantCut: true},
	}
	for _, p := range protocols {
		for _, tt := range tests {
			t.Run(p.name+"/"+tt.name, func(t *testing.T) {
				_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{key: tt.give}})
				req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+p.path, strings.NewReader(p.body(tt.stream)))
				p.header(req.Header, key)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || (err != nil) != tt.wantCut {
					t.Fatalf("answer = %d, read error %v; want 200, cut %v", resp.StatusCode, err, tt.wantCut)
				}
				if tt.wantCheck != nil && !tt.wantCheck(string(b)) {
					t.Errorf("body = %.300s…, not what %s sends", b, tt.name)
				}
				if tt.stream && !tt.wantCut && !strings.HasSuffix(string(b), p.end) {
					t.Errorf("stream ends %q, want %q", b[max(len(b)-80, 0):], p.end)
				}
			})
		}
	}
}
