package pipeline

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/routing"
	"github.com/sluicehq/sluice/internal/upstream"
)

// An alias gets an edge on an endpoint that speaks another protocol when
// serves says the pair is translated, spoken in the endpoint's protocol;
// an endpoint that speaks the alias's protocol keeps it.
func TestCompileServingEdgesOfTranslatedPairs(t *testing.T) {
	env := func(string) (string, bool) { return "sk-upstream", true }
	translates := func(caller, upstream sluice.Protocol) bool {
		return caller == upstream || caller == sluice.ProtocolAnthropic && upstream == sluice.ProtocolOpenAIChat
	}
	cat, err := config.LoadServing([]byte(`version: 1
endpoints:
  - {id: compatible, base_url: http://deepseek.test, protocols: [openai.embeddings, openai.chat]}
  - {id: anthropic, base_url: http://anthropic.test, protocols: [anthropic.messages]}
credentials:
  - {id: c1, secret_env: UP, endpoints: [compatible, anthropic]}
models:
  - alias: claude
    protocol: anthropic.messages
    deployments: [{model: m, endpoints: [anthropic, compatible]}]
keys: [{id: web, tenant: web, secret_env: KEY}]
`), env, translates)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := CompileServing(cat, env, "test", translates)
	if err != nil {
		t.Fatal(err)
	}
	edges, _ := snap.Routes.Candidates("claude", routing.FillFirst{})
	got := map[string]sluice.Protocol{}
	for _, e := range edges {
		got[e.Endpoint.ID] = e.Protocol
	}
	want := map[string]sluice.Protocol{"anthropic": sluice.ProtocolAnthropic, "compatible": sluice.ProtocolOpenAIChat}
	if len(got) != len(want) || got["anthropic"] != want["anthropic"] || got["compatible"] != want["compatible"] {
		t.Errorf("edges of claude speak %v, want %v", got, want)
	}
	same, err := Compile(cat, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	if edges, _ := same.Routes.Candidates("claude", routing.FillFirst{}); len(edges) != 1 {
		t.Errorf("Compile (same protocol only) built %d edges for claude, want 1", len(edges))
	}
}

// A count Sluice answers itself sent nothing upstream: releasing its claim
// must not end a probe or reset a cooldown.
func TestLocalAnswerIsNoSuccess(t *testing.T) {
	if out := outcome(upstream.Attempt{Local: true, Committed: true}); out.Success || out.RateLimited {
		t.Errorf("outcome of a local answer = %+v, want neither success nor rate limit", out)
	}
	if out := outcome(upstream.Attempt{Committed: true}); !out.Success {
		t.Errorf("outcome of an upstream's answer = %+v, want success", out)
	}
}
