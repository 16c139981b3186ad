package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestMaxOutputTokensOnEveryChatProtocol: an alias's max_output_tokens
// bounds what a Messages request asks in max_tokens and a Responses
// request in max_output_tokens, as it does chat's: more is a 400 in the
// caller's envelope naming its field, no upstream call; as much passes.
func TestMaxOutputTokensOnEveryChatProtocol(t *testing.T) {
	t.Run("Messages", func(t *testing.T) {
		h := newProtocolHarness(t, "ep-claude", sluice.ProtocolAnthropic, `  - alias: capped
    protocol: anthropic.messages
    max_output_tokens: 100
    deployments: [{model: claude-sonnet-4-6, endpoints: [ep-claude]}]
`)
		code, _, body := postAnthropic(t, h, "/v1/messages", keyWeb, `{"model":"capped","max_tokens":101,"messages":[{"role":"user","content":"hi"}]}`)
		if code != http.StatusBadRequest || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "max_tokens must be at most 100") {
			t.Errorf("max_tokens 101 = %d %s, want Anthropic's 400 naming max_tokens", code, body)
		}
		if n := len(h.simA.Requests()); n != 0 {
			t.Errorf("the upstream got %d requests, want none", n)
		}
		if code, _, body := postAnthropic(t, h, "/v1/messages", keyWeb, `{"model":"capped","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`); code != http.StatusOK {
			t.Errorf("max_tokens 100 = %d %s, want 200", code, body)
		}
	})
	t.Run("Responses", func(t *testing.T) {
		h := newProtocolHarness(t, "ep-resp", sluice.ProtocolOpenAIResponses, `  - alias: capped
    protocol: openai.responses
    max_output_tokens: 100
    deployments: [{model: gpt-4o-mini, endpoints: [ep-resp]}]
`)
		code, _, body := h.post(t.Context(), "/v1/responses", keyWeb, `{"model":"capped","input":"hi","max_output_tokens":101}`)
		if code != http.StatusBadRequest || !strings.Contains(body, "max_output_tokens must be at most 100") {
			t.Errorf("max_output_tokens 101 = %d %s, want a 400 naming max_output_tokens", code, body)
		}
		if n := len(h.simA.Requests()); n != 0 {
			t.Errorf("the upstream got %d requests, want none", n)
		}
		if code, _, body := h.post(t.Context(), "/v1/responses", keyWeb, `{"model":"capped","input":"hi","max_output_tokens":100}`); code != http.StatusOK {
			t.Errorf("max_output_tokens 100 = %d %s, want 200", code, body)
		}
	})
}
