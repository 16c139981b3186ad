package config

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestChatGPTEndpoints(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "rt", "refresh-token-0001\n")
	base := `version: 1
database: {url: "sqlite://:memory:"}
endpoints:
  - {id: cg, base_url: https://chatgpt.com/backend-api/codex, protocols: [openai.responses], chatgpt: {}}
credentials:
  - id: login
    oauth: {token_url: https://auth.openai.com/oauth/token, client_id: app_x, refresh_token_file: DIR/rt, body: json}
    headers: {chatgpt-account-id: acct-1}
    endpoints: [cg]
models:
  - {alias: m, deployments: [{model: gpt-5, endpoints: [cg]}]}
`
	load := func(doc string) (*Catalog, error) {
		return Load([]byte(strings.ReplaceAll(doc, "DIR", dir)), lookup(nil))
	}
	c, err := load(base)
	if err != nil {
		t.Fatalf("valid ChatGPT catalog: %v", err)
	}
	if got := c.Endpoints[0].Host(); got != (sluice.Host{Cloud: sluice.CloudChatGPT}) {
		t.Errorf("host = %+v, want the ChatGPT backend", got)
	}
	if _, err := load(strings.Replace(base, "chatgpt-account-id", "Chatgpt-Account-ID", 1)); err != nil {
		t.Errorf("the account header spelled otherwise: %v", err)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"protocols: [openai.responses]", "protocols: [openai.chat]", "chatgpt does not host openai.chat"},
		{"headers: {chatgpt-account-id: acct-1}", "headers: {x-other: v}", `endpoints[0]: endpoint "cg" is on the ChatGPT backend: the credential needs headers: {chatgpt-account-id`},
		{"    headers: {chatgpt-account-id: acct-1}\n", "", "the credential needs headers: {chatgpt-account-id"},
		{"chatgpt: {}", "chatgpt: {}, azure: {api_version: v}", "set only one of azure, vertex, bedrock, code_assist and chatgpt"},
		{"chatgpt: {}", "chatgpt: {originator: me}", "originator"},
	} {
		_, err := load(strings.Replace(base, tt.from, tt.to, 1))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s → %s: %v, want %q", tt.from, tt.to, err, tt.want)
		}
	}
}
