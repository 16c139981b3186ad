package pipeline

import (
	"maps"
	"slices"
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
	translates := func(caller, upstream sluice.Protocol) bool {
		return caller == upstream || caller == sluice.ProtocolAnthropic && upstream == sluice.ProtocolOpenAIChat
	}
	cat, snap := compileServing(t, translates, `version: 1
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
`)
	edges, _ := snap.Routes.Candidates("claude", sluice.ProtocolAnthropic, routing.FillFirst{})
	got := map[string]sluice.Protocol{}
	for _, e := range edges {
		got[e.Endpoint.ID] = e.Protocol
	}
	want := map[string]sluice.Protocol{"anthropic": sluice.ProtocolAnthropic, "compatible": sluice.ProtocolOpenAIChat}
	if len(got) != len(want) || got["anthropic"] != want["anthropic"] || got["compatible"] != want["compatible"] {
		t.Errorf("edges of claude speak %v, want %v", got, want)
	}
	same, err := Compile(cat, upstreamSecret, "test")
	if err != nil {
		t.Fatal(err)
	}
	if edges, _ := same.Routes.Candidates("claude", sluice.ProtocolAnthropic, routing.FillFirst{}); len(edges) != 1 {
		t.Errorf("Compile (same protocol only) built %d edges for claude, want 1", len(edges))
	}
}

// An alias without a protocol answers callers of every generation
// protocol: an endpoint that speaks the caller's protocol passes it
// through, another translates from the first of its protocols that serves
// it; callers that go out in the same protocol share the edge.
func TestAliasWithoutProtocolAnswersEveryGenerationProtocol(t *testing.T) {
	generation := func(p sluice.Protocol) bool { return slices.Contains(sluice.Generation, p) }
	translates := func(caller, upstream sluice.Protocol) bool { return generation(caller) && generation(upstream) }
	_, snap := compileServing(t, translates, `version: 1
endpoints:
  - {id: openai, base_url: http://openai.test, protocols: [openai.embeddings, openai.chat, openai.responses]}
  - {id: anthropic, base_url: http://anthropic.test, protocols: [anthropic.messages]}
credentials:
  - {id: c1, secret_env: UP, endpoints: [openai, anthropic]}
models:
  - alias: any
    deployments: [{model: m, endpoints: [openai, anthropic]}]
  - alias: only-messages
    protocol: anthropic.messages
    deployments: [{model: m, endpoints: [openai, anthropic]}]
keys: [{id: web, tenant: web, secret_env: KEY}]
`)
	if got := snap.Routes.Alias("any").Protocols; !slices.Equal(got, sluice.Generation) {
		t.Errorf("any answers %v, want %v", got, sluice.Generation)
	}
	want := map[sluice.Protocol]map[string]sluice.Protocol{
		sluice.ProtocolOpenAIChat:      {"openai": sluice.ProtocolOpenAIChat, "anthropic": sluice.ProtocolAnthropic},
		sluice.ProtocolOpenAIResponses: {"openai": sluice.ProtocolOpenAIResponses, "anthropic": sluice.ProtocolAnthropic},
		sluice.ProtocolAnthropic:       {"openai": sluice.ProtocolOpenAIChat, "anthropic": sluice.ProtocolAnthropic},
		sluice.ProtocolGemini:          {"openai": sluice.ProtocolOpenAIChat, "anthropic": sluice.ProtocolAnthropic},
	}
	byUpstream := map[[2]string]*sluice.Edge{}
	for caller, w := range want {
		edges, ok := snap.Routes.Candidates("any", caller, routing.FillFirst{})
		got := map[string]sluice.Protocol{}
		for _, e := range edges {
			got[e.Endpoint.ID] = e.Protocol
			k := [2]string{e.Endpoint.ID, string(e.Protocol)}
			if prev := byUpstream[k]; prev != nil && prev != e {
				t.Errorf("a %s caller's edge on %s in %s is not the one other callers share", caller, e.Endpoint.ID, e.Protocol)
			}
			byUpstream[k] = e
		}
		if !ok || !maps.Equal(got, w) {
			t.Errorf("a %s caller of any goes out as %v (ok %v), want %v", caller, got, ok, w)
		}
	}
	if _, ok := snap.Routes.Candidates("only-messages", sluice.ProtocolOpenAIChat, nil); ok {
		t.Error("an alias restricted to anthropic.messages has candidates for a chat caller")
	}
	if _, ok := snap.Routes.Candidates("any", sluice.ProtocolOpenAIEmbeddings, nil); ok {
		t.Error("an alias without a protocol has candidates for an embeddings caller")
	}
}

// upstreamSecret is the environment of the catalogs compiled here: every
// secret is one made-up upstream key.
func upstreamSecret(string) (string, bool) { return "sk-upstream", true }

// compileServing loads catalog and compiles it where serves says which
// pairs are translated.
func compileServing(t *testing.T, serves config.Serves, catalog string) (*config.Catalog, *Snapshot) {
	t.Helper()
	cat, err := config.LoadServing([]byte(catalog), upstreamSecret, serves)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := CompileServing(cat, upstreamSecret, "test", serves)
	if err != nil {
		t.Fatal(err)
	}
	return cat, snap
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
