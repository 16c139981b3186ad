package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// The headers the real clients send (Claude Code 2.1, Codex CLI 0.169,
// Gemini CLI 0.61), each with the gateway's key where the client puts it.
var (
	claudeCodeHeaders = http.Header{
		"X-Api-Key":         {keyWeb},
		"Anthropic-Version": {"2023-06-01"},
		"Anthropic-Beta":    {"claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"},
		"X-App":             {"cli"},
		"Anthropic-Dangerous-Direct-Browser-Access": {"true"},
		"X-Claude-Code-Session-Id":                  {"6f1c2d9e-3b4a-4c5d-8e7f-0a1b2c3d4e5f"},
		"X-Stainless-Lang":                          {"js"},
		"X-Stainless-Os":                            {"Linux"},
		"X-Stainless-Retry-Count":                   {"0"},
		"User-Agent":                                {"claude-cli/2.1.328 (external, cli)"},
	}
	codexHeaders = http.Header{
		"Authorization":         {"Bearer " + keyWeb},
		"Originator":            {"codex_exec"},
		"Session-Id":            {"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"},
		"Thread-Id":             {"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"},
		"X-Client-Request-Id":   {"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d"},
		"X-Codex-Beta-Features": {"unified_exec"},
		"X-Codex-Turn-Metadata": {`{"turn":1}`},
		"X-Codex-Window-Id":     {"w-1"},
		"User-Agent":            {"codex_exec/0.169.0 (Linux; x86_64)"},
	}
	geminiCLIHeaders = http.Header{
		"X-Goog-Api-Key":    {keyWeb},
		"X-Goog-Api-Client": {"google-genai-sdk/1.30.0 gl-node/v22.12.0"},
		"User-Agent":        {"GeminiCLI/0.61.0 (linux; x64)"},
	}
	// callerOnly are the names of the headers above that describe the
	// caller's protocol or client, besides user-agent.
	claudeCodeOnly = []string{"Anthropic-Beta", "X-App", "Anthropic-Dangerous-Direct-Browser-Access", "X-Claude-Code-Session-Id", "X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Retry-Count"}
	codexOnly      = []string{"Originator", "Session-Id", "Thread-Id", "X-Client-Request-Id", "X-Codex-Beta-Features", "X-Codex-Turn-Metadata", "X-Codex-Window-Id"}
)

// headersTemplate is the test catalog with an endpoint on simA for each
// protocol besides ep-a's chat: ep-claude (Anthropic Messages), ep-resp
// (Responses) and ep-gem (Gemini), every one with simA's first key, and
// an alias on each, plus claude-on-gpt, Anthropic callers on ep-a's chat.
var headersTemplate = protocolTemplate(protocolTemplate(protocolTemplate(catalogTemplate,
	"ep-claude", sluice.ProtocolAnthropic, `  - {alias: claude-sim, protocol: anthropic.messages, deployments: [{model: claude-sonnet-4-6, endpoints: [ep-claude]}]}
  - {alias: claude-on-gpt, protocol: anthropic.messages, deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]}
`),
	"ep-resp", sluice.ProtocolOpenAIResponses, "  - {alias: gpt-5-codex, protocol: openai.responses, deployments: [{model: gpt-5-codex, endpoints: [ep-resp]}]}\n"),
	"ep-gem", sluice.ProtocolGemini, "  - {alias: gemini-sim, protocol: gemini.generate, deployments: [{model: gemini-2.5-flash, endpoints: [ep-gem]}]}\n")

// headerCall is one client's request, as the client sends it.
type headerCall struct {
	path, body string
	header     http.Header
}

var (
	claudeCodeCall = func(alias string) headerCall {
		return headerCall{"/v1/messages?beta=true", `{"model":"` + alias + `","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, claudeCodeHeaders}
	}
	codexCall  = headerCall{"/backend-api/codex/responses", `{"model":"gpt-5-codex","input":"hi","store":false}`, codexHeaders}
	geminiCall = headerCall{"/v1beta/models/gemini-sim:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, geminiCLIHeaders}
)

// upstreamHeaders sends call to the gateway and returns the headers
// simA received for it, after checking it was answered and that the
// gateway's key reached the upstream nowhere: not as the credential, in
// no header, not in the path.
func upstreamHeaders(t *testing.T, h *harness, call headerCall) http.Header {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url(call.path), strings.NewReader(call.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = call.header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d %s, want 200", call.path, resp.StatusCode, body)
	}
	rec := lastRequest(t, h.simA)
	if rec.Key != secretA1 {
		t.Errorf("the upstream was presented %q, want the credential's secret", rec.Key)
	}
	if strings.Contains(rec.Path, keyWeb) {
		t.Errorf("the gateway's key reached the upstream in the path %s", rec.Path)
	}
	for name, values := range rec.Header {
		for _, v := range values {
			if strings.Contains(v, keyWeb) {
				t.Errorf("the gateway's key reached the upstream in %s", name)
			}
		}
	}
	return rec.Header
}

// TestCallerHeadersReachTheUpstream: the headers a real client sends that
// a provider may need reach an upstream that speaks the client's protocol
// as they were sent, user-agent included, and none of them reaches an
// upstream its request is translated for, whose user-agent is Sluice's.
func TestCallerHeadersReachTheUpstream(t *testing.T) {
	h := newHarnessWith(t, headersTemplate, "{backend: memory}", simulator.Options{})
	tests := []struct {
		name   string
		call   headerCall
		passed []string // the caller's headers the upstream gets, as sent
		absent []string
		agent  string
	}{
		{"ClaudeCodeToAnthropic", claudeCodeCall("claude-sim"), append([]string{"Anthropic-Version"}, claudeCodeOnly...), nil, "claude-cli/2.1.328 (external, cli)"},
		{"ClaudeCodeTranslatedToChat", claudeCodeCall("claude-on-gpt"), nil, append([]string{"Anthropic-Version"}, claudeCodeOnly...), "sluice"},
		{"CodexToResponses", codexCall, codexOnly, nil, "codex_exec/0.169.0 (Linux; x86_64)"},
		{"GeminiCLIToGemini", geminiCall, []string{"X-Goog-Api-Client"}, nil, "GeminiCLI/0.61.0 (linux; x64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := upstreamHeaders(t, h, tt.call)
			for _, name := range tt.passed {
				if g, w := got.Values(name), tt.call.header.Values(name); strings.Join(g, "\n") != strings.Join(w, "\n") {
					t.Errorf("upstream %s = %q, want the caller's %q", name, g, w)
				}
			}
			for _, name := range tt.absent {
				if g := got.Values(name); len(g) > 0 {
					t.Errorf("upstream %s = %q, want none (the request was translated)", name, g)
				}
			}
			if g := got.Get("User-Agent"); g != tt.agent {
				t.Errorf("upstream User-Agent = %q, want %q", g, tt.agent)
			}
		})
	}
}

// TestEndpointHeaderRules: forward_headers sends an endpoint a caller's
// header even when the request is translated, and drop_headers keeps from
// it headers its protocol would pass on; the caller's key still reaches
// no upstream.
func TestEndpointHeaderRules(t *testing.T) {
	template := strings.NewReplacer(
		"    protocols: [openai.chat, openai.embeddings]\n    breaker: {failures: 3, open: 300ms}\n",
		"    protocols: [openai.chat, openai.embeddings]\n    breaker: {failures: 3, open: 300ms}\n    forward_headers: [x-claude-code-session-id, x-app]\n",
		"    protocols: [anthropic.messages]\n",
		"    protocols: [anthropic.messages]\n    drop_headers: [x-stainless-*, user-agent]\n",
	).Replace(headersTemplate)
	h := newHarnessWith(t, template, "{backend: memory}", simulator.Options{})

	got := upstreamHeaders(t, h, claudeCodeCall("claude-on-gpt"))
	for _, name := range []string{"X-Claude-Code-Session-Id", "X-App"} {
		if g, w := got.Get(name), claudeCodeHeaders.Get(name); g != w {
			t.Errorf("translated, forward_headers names it: upstream %s = %q, want %q", name, g, w)
		}
	}
	if g := got.Get("Anthropic-Beta"); g != "" {
		t.Errorf("translated: upstream Anthropic-Beta = %q, want none (forward_headers does not name it)", g)
	}

	got = upstreamHeaders(t, h, claudeCodeCall("claude-sim"))
	for _, name := range []string{"X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Retry-Count"} {
		if g := got.Get(name); g != "" {
			t.Errorf("drop_headers names x-stainless-*: upstream %s = %q, want none", name, g)
		}
	}
	if g := got.Get("User-Agent"); g != "sluice" {
		t.Errorf("drop_headers names user-agent: upstream User-Agent = %q, want sluice", g)
	}
	if g, w := got.Get("Anthropic-Beta"), claudeCodeHeaders.Get("Anthropic-Beta"); g != w {
		t.Errorf("upstream Anthropic-Beta = %q, want the caller's %q (not dropped)", g, w)
	}
}
