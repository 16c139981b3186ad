package app_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// A Responses caller on a chat alias that offers web_search (as Codex
// always does) is answered, and told in X-Sluice-Dropped-Tools that the
// upstream was not offered it; a request that offers none has no header.
func TestResponsesOnChatDroppedToolsHeader(t *testing.T) {
	h := newResponsesHarness(t)
	const tools = `"tools":[{"type":"web_search","external_web_access":false},{"type":"namespace","name":"multi_agent_v1","tools":[{"type":"function","name":"wait_agent","parameters":{"type":"object","properties":{}}}]}]`
	tests := []struct {
		name, body, want string
	}{
		{"whole", `{"model":"resp-on-chat","input":"hi",` + tools + `}`, "web_search"},
		{"stream", `{"model":"resp-on-chat","input":"hi","stream":true,` + tools + `}`, "web_search"},
		{"no built-in tool", `{"model":"resp-on-chat","input":"hi"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, got := h.post(t.Context(), "/v1/responses", keyWeb, tt.body)
			if status != 200 || !strings.Contains(got, `"output_text"`) {
				t.Fatalf("%s = %d %s, want 200 with text", tt.name, status, got)
			}
			if d := hdr.Get("X-Sluice-Dropped-Tools"); d != tt.want {
				t.Errorf("X-Sluice-Dropped-Tools = %q, want %q", d, tt.want)
			}
		})
	}
}

// An attempt that dropped tools and failed before its answer began takes
// the header back: the next edge, a Responses upstream, was offered them.
func TestDroppedToolsHeaderNotKeptOnFailover(t *testing.T) {
	h := newProtocolHarness(t, "ep-resp", sluice.ProtocolOpenAIResponses, `  - alias: chat-then-resp
    protocol: openai.responses
    deployments:
      - {model: gpt-4o-mini, endpoints: [ep-b], priority: 0}
      - {model: gpt-4o-mini, endpoints: [ep-resp], priority: 1}
`)
	h.simB.SetKey(secretB1, simulator.Behavior{FailStatus: 500})
	status, hdr, got := h.post(t.Context(), "/v1/responses", keyWeb, `{"model":"chat-then-resp","input":"hi","tools":[{"type":"web_search"}]}`)
	if status != 200 || lastRequest(t, h.simA).Path != "/v1/responses" {
		t.Fatalf("chat-then-resp = %d %s, want 200 from the Responses upstream", status, got)
	}
	if d := hdr.Get("X-Sluice-Dropped-Tools"); d != "" {
		t.Errorf("X-Sluice-Dropped-Tools = %q after failover to an upstream offered every tool, want none", d)
	}
}
