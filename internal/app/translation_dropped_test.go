package app_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// A chat caller's seed, which Anthropic Messages has no field for, is
// dropped on a Messages deployment and named in X-Sluice-Dropped, whole and
// streamed, and counted; with X-Sluice-Translation: strict the request is
// refused instead, naming seed, before anything reaches the upstream; a
// passthrough answer names nothing, even with seed.
func TestTranslationNamesWhatItDrops(t *testing.T) {
	h := newMessagesHarness(t)
	const seeded = `{"model":"gpt-on-claude","seed":7,"messages":[{"role":"user","content":"hi"}]`
	for _, tt := range []struct{ name, body, want string }{
		{"whole", seeded + `}`, `"chat.completion"`},
		{"stream", seeded + `,"stream":true}`, `data: [DONE]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, got := h.postWith(t.Context(), "/v1/chat/completions", keyWeb, tt.body, nil)
			if status != 200 || !strings.Contains(got, tt.want) {
				t.Fatalf("POST = %d %s, want 200 with %s", status, got, tt.want)
			}
			if d := hdr.Get("X-Sluice-Dropped"); d != "seed" {
				t.Errorf("X-Sluice-Dropped = %q, want seed", d)
			}
			if rec := lastRequest(t, h.simA); rec.Path != "/v1/messages" || strings.Contains(string(rec.Body), "seed") {
				t.Errorf("the upstream got %s %s, want a Messages request without seed", rec.Path, rec.Body)
			}
		})
	}
	const metric = `sluice_translation_dropped_total{caller="openai.chat",field="seed",upstream="anthropic.messages"}`
	if got := h.metric(metric); got != "2" {
		t.Errorf("%s = %q, want 2", metric, got)
	}

	t.Run("strict", func(t *testing.T) {
		sent := len(h.simA.Requests())
		for _, body := range []string{seeded + `}`, seeded + `,"stream":true}`} {
			status, hdr, got := h.postWith(t.Context(), "/v1/chat/completions", keyWeb, body, map[string]string{"X-Sluice-Translation": "strict"})
			if status != 400 || !strings.Contains(got, `"invalid_request_error"`) ||
				!strings.Contains(got, "seed cannot be carried to this model's upstream (Anthropic Messages)") || hdr.Get("X-Sluice-Dropped") != "" {
				t.Errorf("strict POST = %d %s (dropped %q), want 400 invalid_request_error naming seed", status, got, hdr.Get("X-Sluice-Dropped"))
			}
		}
		if n := len(h.simA.Requests()); n != sent {
			t.Errorf("the simulator got %d requests for strict callers, want none", n-sent)
		}
		// Nothing dropped, nothing refused.
		status, hdr, got := h.postWith(t.Context(), "/v1/chat/completions", keyWeb, `{"model":"gpt-on-claude","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"X-Sluice-Translation": "strict"})
		if status != 200 || hdr.Get("X-Sluice-Dropped") != "" {
			t.Errorf("strict POST without hints = %d %s (dropped %q), want 200 naming nothing", status, got, hdr.Get("X-Sluice-Dropped"))
		}
		status, _, got = h.postWith(t.Context(), "/v1/chat/completions", keyWeb, seeded+`}`, map[string]string{"X-Sluice-Translation": "lenient"})
		if status != 400 || !strings.Contains(got, "X-Sluice-Translation must be strict") {
			t.Errorf("X-Sluice-Translation: lenient = %d %s, want 400 saying what it may be", status, got)
		}
	})

	t.Run("passthrough", func(t *testing.T) {
		status, hdr, got := h.postWith(t.Context(), "/v1/chat/completions", keyWeb, `{"model":"only-a","seed":7,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"X-Sluice-Translation": "strict"})
		if status != 200 || hdr.Get("X-Sluice-Dropped") != "" {
			t.Errorf("passthrough = %d %s (dropped %q), want 200 naming nothing", status, got, hdr.Get("X-Sluice-Dropped"))
		}
	})
}

// A strict caller whose request fails over from a passthrough edge to a
// translated one that would drop its seed is refused there, after that
// attempt's claim, which is released: three refusals later, on an account
// that runs two at once, a request that may not wait still gets in.
func TestStrictTranslationOnFailover(t *testing.T) {
	h := newProtocolHarness(t, "ep-claude", sluice.ProtocolAnthropic, `  - alias: chat-then-claude
    deployments:
      - {model: gpt-4o-mini, endpoints: [ep-b], priority: 0}
      - {model: claude-sonnet-4-6, endpoints: [ep-claude], priority: 1}
`)
	h.simB.SetKey(secretB1, simulator.Behavior{FailStatus: 500})
	const body = `{"model":"chat-then-claude","seed":7,"messages":[{"role":"user","content":"hi"}]}`
	for range 3 {
		status, _, got := h.postWith(t.Context(), "/v1/chat/completions", keyWeb, body, map[string]string{"X-Sluice-Translation": "strict"})
		if status != 400 || !strings.Contains(got, "seed cannot be carried to this model's upstream (Anthropic Messages)") {
			t.Fatalf("strict after failover = %d %s, want 400 naming seed", status, got)
		}
	}
	if n := len(h.simA.Requests()); n != 0 {
		t.Errorf("the Messages upstream got %d requests from strict callers, want none", n)
	}
	status, hdr, got := h.postWith(t.Context(), "/v1/chat/completions", keyWeb, body, map[string]string{"X-Sluice-Max-Wait": "0"})
	if status != 200 || hdr.Get("X-Sluice-Dropped") != "seed" {
		t.Errorf("after the refusals = %d %s (dropped %q), want 200 from the Messages upstream naming seed: were the claims released?", status, got, hdr.Get("X-Sluice-Dropped"))
	}
}

// A strict Responses caller offering a built-in tool a chat upstream
// cannot run is refused, naming the tool, rather than have it left out.
func TestStrictTranslationRefusesDroppedTools(t *testing.T) {
	h := newResponsesHarness(t)
	status, _, got := h.postWith(t.Context(), "/v1/responses", keyWeb, `{"model":"resp-on-chat","input":"hi","tools":[{"type":"web_search"}]}`,
		map[string]string{"X-Sluice-Translation": "strict"})
	if status != 400 || !strings.Contains(got, "tools[type=web_search] cannot be carried to this model's upstream (OpenAI chat)") {
		t.Errorf("strict with web_search = %d %s, want 400 naming the tool", status, got)
	}
}

// An answer the response cache replays says what its translation dropped,
// as the answer it keeps did.
func TestCacheHitNamesWhatWasDropped(t *testing.T) {
	h := newHarnessWith(t, cacheTemplate("{ttl: 1m}"), "{backend: memory}", simulator.Options{})
	body := deterministic(messagesCaller, "fast", "hi", false)
	body = `{"top_k":5,` + body[1:]
	for _, want := range []string{"miss", "hit"} {
		resp := h.send(t.Context(), messagesCaller, keyWeb, "fast", false, body, nil)
		if resp == nil {
			t.FailNow()
		}
		resp.Body.Close()
		if c, d := resp.Header.Get("X-Sluice-Cache"), resp.Header.Get("X-Sluice-Dropped"); resp.StatusCode != 200 || c != want || d != "top_k" {
			t.Errorf("%s: %d, X-Sluice-Cache %q, X-Sluice-Dropped %q; want 200, %s, top_k", want, resp.StatusCode, c, d, want)
		}
	}
}
