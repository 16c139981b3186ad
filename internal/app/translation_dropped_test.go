package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// postHeaders is harness.post with the caller's extra headers.
func postHeaders(t *testing.T, h *harness, path, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

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
			status, hdr, got := postHeaders(t, h, "/v1/chat/completions", tt.body, nil)
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
			status, hdr, got := postHeaders(t, h, "/v1/chat/completions", body, map[string]string{"X-Sluice-Translation": "strict"})
			if status != 400 || !strings.Contains(got, `"invalid_request_error"`) ||
				!strings.Contains(got, "seed cannot be carried to this model's upstream (Anthropic Messages)") || hdr.Get("X-Sluice-Dropped") != "" {
				t.Errorf("strict POST = %d %s (dropped %q), want 400 invalid_request_error naming seed", status, got, hdr.Get("X-Sluice-Dropped"))
			}
		}
		if n := len(h.simA.Requests()); n != sent {
			t.Errorf("the simulator got %d requests for strict callers, want none", n-sent)
		}
		// Nothing dropped, nothing refused.
		status, hdr, got := postHeaders(t, h, "/v1/chat/completions", `{"model":"gpt-on-claude","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"X-Sluice-Translation": "strict"})
		if status != 200 || hdr.Get("X-Sluice-Dropped") != "" {
			t.Errorf("strict POST without hints = %d %s (dropped %q), want 200 naming nothing", status, got, hdr.Get("X-Sluice-Dropped"))
		}
		status, _, got = postHeaders(t, h, "/v1/chat/completions", seeded+`}`, map[string]string{"X-Sluice-Translation": "lenient"})
		if status != 400 || !strings.Contains(got, "X-Sluice-Translation must be strict") {
			t.Errorf("X-Sluice-Translation: lenient = %d %s, want 400 saying what it may be", status, got)
		}
	})

	t.Run("passthrough", func(t *testing.T) {
		status, hdr, got := postHeaders(t, h, "/v1/chat/completions", `{"model":"only-a","seed":7,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"X-Sluice-Translation": "strict"})
		if status != 200 || hdr.Get("X-Sluice-Dropped") != "" {
			t.Errorf("passthrough = %d %s (dropped %q), want 200 naming nothing", status, got, hdr.Get("X-Sluice-Dropped"))
		}
	})
}
