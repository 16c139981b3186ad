package app_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// keyPathsTemplate is the Responses harness's catalog where a key that
// lists no paths gets server.default_key_paths [chat], beside a key for
// Codex only (paths [responses]) and one that may only compact
// (responses_compact).
var keyPathsTemplate = protocolTemplate(strings.NewReplacer(
	"  max_body_bytes: 4096\n", "  max_body_bytes: 4096\n  default_key_paths: [chat]\n",
	"  - {id: scoped, tenant: web, secret_env: KEY_SCOPED, models: [fast]}\n",
	"  - {id: codex, tenant: web, secret_env: KEY_CODEX, paths: [responses]}\n  - {id: compact, tenant: web, secret_env: KEY_COMPACT, paths: [responses_compact]}\n",
).Replace(catalogTemplate), "ep-resp", sluice.ProtocolOpenAIResponses, responsesAliases)

// TestKeyPathNames: each route of the Responses API (OpenAI's and the
// ChatGPT backend's, where Codex posts) is admitted by the path names that
// cover it and refused with access_scope_denied by the others, and a key
// that lists no paths gets server.default_key_paths.
func TestKeyPathNames(t *testing.T) {
	h := newHarnessWith(t, keyPathsTemplate, "{backend: memory}", simulator.Options{})
	chat := []string{"/v1/chat/completions", `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`}
	create := []string{"/v1/responses", `{"model":"gpt-resp","input":"hi"}`}
	codexCreate := []string{"/backend-api/codex/responses", `{"model":"gpt-resp","input":"hi","stream":true,"store":false}`}
	compact := []string{"/v1/responses/compact", `{"model":"gpt-resp","input":"hi"}`}
	codexCompact := []string{"/backend-api/codex/responses/compact", `{"model":"gpt-resp","input":"hi"}`}
	tests := []struct {
		name    string
		key     string
		allowed [][]string
		denied  [][]string
	}{
		{"NoPathsGetsTheDefault", keyWeb, [][]string{chat}, [][]string{create, codexCreate, compact, codexCompact}},
		{"CodexOnly", testEnv["KEY_CODEX"], [][]string{create, codexCreate, compact, codexCompact}, [][]string{chat}},
		{"CompactOnly", testEnv["KEY_COMPACT"], [][]string{compact, codexCompact}, [][]string{create, codexCreate, chat}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range tt.allowed {
				if code, _, body := h.post(t.Context(), r[0], tt.key, r[1]); code != http.StatusOK {
					t.Errorf("POST %s = %d %s, want 200", r[0], code, body)
				}
			}
			for _, r := range tt.denied {
				if code, _, body := h.post(t.Context(), r[0], tt.key, r[1]); code != http.StatusForbidden || !strings.Contains(body, string(sluice.CodeScopeDenied)) {
					t.Errorf("POST %s = %d %s, want 403 %s", r[0], code, body, sluice.CodeScopeDenied)
				}
			}
		})
	}

	// The model list shows what the default paths let the key call.
	page, err := h.sdk(keyWeb).Models.List(t.Context())
	if err != nil {
		t.Fatalf("Models.List: %v", err)
	}
	var listed []string
	for _, m := range page.Data {
		listed = append(listed, m.ID)
	}
	if !slices.Contains(listed, "fast") || slices.Contains(listed, "gpt-resp") {
		t.Errorf("Models.List for a key with the default paths [chat] = %v, want fast and not the Responses alias gpt-resp", listed)
	}
}
