package app_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/app"
)

// TestServeWithoutConfigurationRunsTheDemo is the README's first command:
// no catalog, the embedded store and the built-in simulated provider, and a
// banner with a key that works.
func TestServeWithoutConfigurationRunsTheDemo(t *testing.T) {
	var banner bytes.Buffer
	gw, err := app.Start(t.Context(), app.Options{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
		DatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "sluice.db"),
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv:   func(string) (string, bool) { return "", false },
		Banner:      &banner,
	})
	if err != nil {
		t.Fatalf("Start without a catalog: %v", err)
	}
	t.Cleanup(func() { gw.Close() })
	key := regexp.MustCompile(`demo key\s+(sk-sluice-\S+)`).FindStringSubmatch(banner.String())
	if key == nil || !strings.Contains(banner.String(), gw.Addr()) || !strings.Contains(banner.String(), "curl") {
		t.Fatalf("banner = %q, want the address, a demo key and a curl to try", banner.String())
	}
	for _, model := range []string{"demo", "gpt-4o-mini"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"Hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+key[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"content"`) {
			t.Errorf("demo %s = %d %s, want an answer", model, resp.StatusCode, body)
		}
	}
	// Claude Code's way: Anthropic Messages, the key in x-api-key.
	req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/messages?beta=true",
		strings.NewReader(`{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`))
	req.Header.Set("X-Api-Key", key[1])
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"type":"message"`) {
		t.Errorf("demo claude-sonnet-4-6 = %d %s, want a message", resp.StatusCode, body)
	}
	// Codex's way: OpenAI Responses, the key as a bearer token.
	req, _ = http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/responses",
		strings.NewReader(`{"model":"gpt-5-codex","store":false,"input":"Hello"}`))
	req.Header.Set("Authorization", "Bearer "+key[1])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"object":"response"`) {
		t.Errorf("demo gpt-5-codex = %d %s, want a response", resp.StatusCode, body)
	}
}
