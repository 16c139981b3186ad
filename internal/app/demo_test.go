package app_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/app"
)

// TestServeWithoutConfigurationRunsTheDemo is the README's first command:
// no catalog, the embedded store and the built-in simulated provider, and a
// banner with a key that works.
func TestServeWithoutConfigurationRunsTheDemo(t *testing.T) {
	gw, key := startDemo(t)
	for _, model := range []string{"demo", "gpt-4o-mini"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"Hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
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
	req.Header.Set("X-Api-Key", key)
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
	req.Header.Set("Authorization", "Bearer "+key)
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

// startDemo starts the gateway without a catalog, as the README's first
// command does, and returns it with the demo key its banner shows.
func startDemo(t *testing.T) (*app.Gateway, string) {
	t.Helper()
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
	return gw, key[1]
}

// demoCall is one way of calling a model: a caller protocol's request and
// what its answer must hold.
type demoCall struct {
	protocol string
	request  func(base, key, model string) *http.Request
	answer   string // a piece of every answer of the protocol
}

// demoCalls call a model as OpenAI chat, Anthropic Messages, OpenAI
// Responses and Gemini callers do.
var demoCalls = []demoCall{
	{"chat", func(base, key, model string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"Hello"}]}`))
		r.Header.Set("Authorization", "Bearer "+key)
		return r
	}, `"object":"chat.completion"`},
	{"messages", func(base, key, model string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(`{"model":"`+model+`","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`))
		r.Header.Set("X-Api-Key", key)
		r.Header.Set("Anthropic-Version", "2023-06-01")
		return r
	}, `"type":"message"`},
	{"responses", func(base, key, model string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+"/v1/responses", strings.NewReader(`{"model":"`+model+`","store":false,"input":"Hello"}`))
		r.Header.Set("Authorization", "Bearer "+key)
		return r
	}, `"object":"response"`},
	{"gemini", func(base, key, model string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+"/v1beta/models/"+model+":generateContent", strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"Hello"}]}]}`))
		r.Header.Set("X-Goog-Api-Key", key)
		return r
	}, `"candidates"`},
}

// TestEveryDemoAliasAnswersEveryCallerProtocol walks the demo's OpenAI
// model list as a new user would and calls each alias as chat, Messages,
// Responses and Gemini: every generation alias answers all four, whichever
// provider's protocol its endpoint speaks (passed through there, translated
// elsewhere); an embeddings or video alias, which names its protocol,
// answers none of them (404 in each caller's envelope). Anthropic's and
// Gemini's model lists show what may be called through their protocols.
func TestEveryDemoAliasAnswersEveryCallerProtocol(t *testing.T) {
	gw, key := startDemo(t)
	base := "http://" + gw.Addr()
	get := func(path string, header ...string) string {
		t.Helper()
		r, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for i := 0; i < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	ids := func(body, field string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`"`+field+`":"([^"]+)"`).FindAllStringSubmatch(body, -1) {
			out = append(out, strings.TrimPrefix(m[1], "models/"))
		}
		return out
	}
	openAIList := ids(get("/v1/models", "Authorization", "Bearer "+key), "id")
	namesProtocol := map[string]bool{"text-embedding-3-small": true, "sora-2": true}
	var generation []string
	for _, model := range openAIList {
		if !namesProtocol[model] {
			generation = append(generation, model)
		}
	}
	if len(generation) < 6 || len(openAIList) != len(generation)+len(namesProtocol) {
		t.Fatalf("OpenAI's model list = %v, want the demo's generation aliases and its OpenAI embeddings and video aliases", openAIList)
	}
	if got := ids(get("/v1/models", "X-Api-Key", key, "Anthropic-Version", "2023-06-01"), "id"); strings.Join(got, " ") != strings.Join(generation, " ") {
		t.Errorf("Anthropic's model list = %v, want the generation aliases %v", got, generation)
	}
	if got := ids(get("/v1beta/models", "X-Goog-Api-Key", key), "name"); strings.Join(got, " ") != strings.Join(sortedWith(generation, "gemini-embedding-001"), " ") {
		t.Errorf("Gemini's model list = %v, want the generation aliases and gemini-embedding-001", got)
	}
	for _, model := range openAIList {
		for _, c := range demoCalls {
			resp, err := http.DefaultClient.Do(c.request(base, key, model))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case namesProtocol[model] && (resp.StatusCode != 404 || !strings.Contains(string(body), "model_not_found")):
				t.Errorf("%s as %s = %d %s, want 404 model_not_found", model, c.protocol, resp.StatusCode, body)
			case !namesProtocol[model] && (resp.StatusCode != 200 || !strings.Contains(string(body), c.answer)):
				t.Errorf("%s as %s = %d %s, want an answer holding %s", model, c.protocol, resp.StatusCode, body, c.answer)
			}
		}
	}
}

// sortedWith is names and more, sorted.
func sortedWith(names []string, more ...string) []string {
	return slices.Sorted(slices.Values(append(slices.Clone(names), more...)))
}
