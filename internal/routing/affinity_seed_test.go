package routing

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice"
)

func seedOf(p sluice.Protocol, header http.Header, body string) string {
	return Seed("t", &sluice.Request{Protocol: p, Model: "fast", Header: header, Body: []byte(body)})
}

func TestSeedStableOverTurns(t *testing.T) {
	tests := []struct {
		name        string
		p           sluice.Protocol
		first, next string // a conversation's first turn and a later one
	}{
		{"chat", sluice.ProtocolOpenAIChat,
			`{"model":"fast","messages":[{"role":"system","content":"be terse"},{"role":"user","content":"hi"}]}`,
			`{"model":"fast","messages":[{"role":"system","content":"be terse"},{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"more"}]}`},
		// Claude Code moves cache_control to the last user block every turn.
		{"anthropic", sluice.ProtocolAnthropic,
			`{"model":"fast","system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"fast","system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"yo"},{"role":"user","content":[{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}]}]}`},
		{"responses", sluice.ProtocolOpenAIResponses,
			`{"model":"fast","instructions":"sys","input":"hi"}`,
			`{"model":"fast","instructions":"sys","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c","output":"x"},{"role":"user","content":"more"}]}`},
		{"gemini", sluice.ProtocolGemini,
			`{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			`{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"yo"}]},{"role":"user","parts":[{"text":"more"}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := seedOf(tt.p, nil, tt.first), seedOf(tt.p, nil, tt.next)
			if a == "" || a != b {
				t.Errorf("seeds of two turns = %q and %q, want one non-empty seed", a, b)
			}
		})
	}
}

func TestSeedOrderAndNamespace(t *testing.T) {
	body := `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`
	content := seedOf(sluice.ProtocolOpenAIChat, nil, body)
	other := seedOf(sluice.ProtocolOpenAIChat, nil, `{"model":"fast","messages":[{"role":"user","content":"bye"}]}`)
	if content == other {
		t.Errorf("two conversations share a content seed")
	}
	h := http.Header{"X-Session-Id": {"s1"}}
	if got, want := seedOf(sluice.ProtocolOpenAIChat, h, body), SessionSeed("t", "fast", "s1"); got != want {
		t.Errorf("a session header's seed = %q, want SessionSeed's %q", got, want)
	}
	// The session names the conversation, whatever its content.
	if seedOf(sluice.ProtocolOpenAIChat, h, body) != seedOf(sluice.ProtocolOpenAIChat, h, `{"model":"fast","messages":[{"role":"user","content":"bye"}]}`) {
		t.Errorf("one session, two seeds")
	}
	for name, got := range map[string]string{
		"Claude Code header":    seedOf(sluice.ProtocolAnthropic, http.Header{"X-Claude-Code-Session-Id": {"s1"}}, body),
		"Codex header":          seedOf(sluice.ProtocolOpenAIResponses, http.Header{"Session-Id": {"s1"}}, body),
		"chat prompt_cache_key": seedOf(sluice.ProtocolOpenAIChat, nil, `{"model":"fast","prompt_cache_key":"s1","messages":[]}`),
		"metadata.user_id":      seedOf(sluice.ProtocolAnthropic, nil, `{"model":"fast","metadata":{"user_id":"s1"},"messages":[{"role":"user","content":"hi"}]}`),
	} {
		if got != SessionSeed("t", "fast", "s1") {
			t.Errorf("%s: seed %q, want the session's", name, got)
		}
	}
	if Seed("u", &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "fast", Header: h, Body: []byte(body)}) == SessionSeed("t", "fast", "s1") ||
		Seed("t", &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "slow", Header: h, Body: []byte(body)}) == SessionSeed("t", "fast", "s1") {
		t.Errorf("seeds are not namespaced by tenant and alias")
	}
	conv := http.Header{"X-Sluice-Conversation": {"c1"}}
	alice := Seed("t", &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "fast", User: "alice", Header: conv, Body: []byte(body)})
	bob := Seed("t", &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "fast", User: "bob", Header: conv, Body: []byte(body)})
	if alice == bob || alice == content {
		t.Errorf("a declared conversation is not the end user's")
	}
	if got := seedOf(sluice.ProtocolOpenAIChat, nil, `{"model":"fast","messages":[{"role":"assistant","content":"x"}]}`); got != "" {
		t.Errorf("seed of a request without a user turn = %q, want none", got)
	}
	if got := seedOf(sluice.ProtocolOpenAIEmbeddings, h, `{"model":"fast","input":"hi"}`); got != "" {
		t.Errorf("seed of an embeddings request = %q, want none", got)
	}
}
