package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// anthropicStream is an Anthropic Messages stream as the API sends it.
const anthropicStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[],"stop_reason":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

// anthropicUpstream is an Anthropic Messages API that answers by the
// caller's model: "claude-up" a message (or anthropicStream), "claude-cut"
// a stream that breaks after its first event, "claude-busy" 429 with
// retry-after, "claude-overloaded" 529. It records the last request's header and body.
type anthropicUpstream struct {
	mu     sync.Mutex
	header http.Header
	body   map[string]any
}

func (u *anthropicUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &body)
	u.mu.Lock()
	u.header, u.body = r.Header.Clone(), body
	u.mu.Unlock()
	if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != secretA1 {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		return
	}
	stream, _ := body["stream"].(bool)
	switch {
	case body["model"] == "claude-busy":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
	case body["model"] == "claude-overloaded":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	case body["model"] == "claude-cut":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, anthropicStream[:strings.Index(anthropicStream, "event: content_block_start")])
	case stream:
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, anthropicStream)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"cache_read_input_tokens":4,"output_tokens":5}}`)
	}
}

// anthropicCatalog adds an Anthropic endpoint (at the URL replacing
// ANTHROPIC_URL) and its aliases to the test catalog.
const anthropicCatalog = `  - id: ep-anthropic
    base_url: ANTHROPIC_URL
    protocols: [anthropic.messages]
credentials:
  - {id: cred-anthropic, secret_env: UP_A1, endpoints: [ep-anthropic]}`

func newAnthropicHarness(t *testing.T) (*harness, *anthropicUpstream) {
	t.Helper()
	up := &anthropicUpstream{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	template := strings.Replace(catalogTemplate, "credentials:", strings.ReplaceAll(anthropicCatalog, "ANTHROPIC_URL", srv.URL), 1)
	template = strings.Replace(template, "keys:\n", `  - alias: claude
    protocol: anthropic.messages
    deployments: [{model: claude-up, endpoints: [ep-anthropic]}]
  - alias: claude-cut
    protocol: anthropic.messages
    deployments: [{model: claude-cut, endpoints: [ep-anthropic]}]
  - alias: claude-busy
    protocol: anthropic.messages
    deployments: [{model: claude-busy, endpoints: [ep-anthropic]}]
  - alias: claude-overloaded
    protocol: anthropic.messages
    deployments: [{model: claude-overloaded, endpoints: [ep-anthropic]}]
keys:
`, 1)
	return newHarnessWith(t, template, "{backend: memory}", simulator.Options{}), up
}

// postAnthropic posts body to path as the Anthropic SDK does: the key in
// x-api-key, with a version and a beta header.
func postAnthropic(t *testing.T, h *harness, path, key, body string) (int, http.Header, string) {
	t.Helper()
	header := map[string]string{"Anthropic-Version": "2023-06-01", "Anthropic-Beta": "context-management-2025-06-27"}
	if key != "" {
		header["X-Api-Key"] = key
	}
	return h.postWith(t.Context(), path, "", body, header)
}

func TestAnthropicMessagesPassThrough(t *testing.T) {
	h, up := newAnthropicHarness(t)
	body := `{"model":"claude","max_tokens":64,"metadata":{"user_id":"user-7"},"messages":[{"role":"user","content":"hi"}]}`
	status, _, got := postAnthropic(t, h, "/v1/messages?beta=true", keyWeb, body)
	if status != 200 || !strings.Contains(got, `"text":"Hello"`) {
		t.Fatalf("POST /v1/messages = %d %s, want the upstream's message", status, got)
	}
	up.mu.Lock()
	hdr, sent := up.header, up.body
	up.mu.Unlock()
	if sent["model"] != "claude-up" || hdr.Get("Anthropic-Version") != "2023-06-01" ||
		hdr.Get("Anthropic-Beta") != "context-management-2025-06-27" || hdr.Get("Authorization") != "" {
		t.Errorf("upstream got model %v, headers %v; want claude-up, the caller's version and beta, x-api-key only", sent["model"], hdr)
	}
	eventually(t, 2e9, "the access log line with usage", func() bool {
		return strings.Contains(h.logs.String(), `"prompt_tokens":7,"completion_tokens":5`)
	})

	status, hdrs, got := postAnthropic(t, h, "/v1/messages", keyWeb, strings.Replace(body, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1))
	if status != 200 || got != anthropicStream || hdrs.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream = %d %q, want the upstream's events unchanged", status, got)
	}
	eventually(t, 2e9, "the access log line with the stream's usage", func() bool {
		return strings.Contains(h.logs.String(), `"prompt_tokens":117,"completion_tokens":7`)
	})
}

func TestAnthropicStreamCutEndsWithErrorEvent(t *testing.T) {
	h, _ := newAnthropicHarness(t)
	status, _, got := postAnthropic(t, h, "/v1/messages", keyWeb, `{"model":"claude-cut","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	want := "event: error\ndata: "
	if status != 200 || !strings.HasPrefix(got, "event: message_start") || !strings.Contains(got, want) ||
		!strings.Contains(got, string(sluice.CodeUpstreamStreamFailed)) {
		t.Errorf("cut stream = %d %q, want its first event and then an Anthropic error event", status, got)
	}
}

// anthropicError is Anthropic's error envelope.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

func TestAnthropicErrorEnvelope(t *testing.T) {
	h, _ := newAnthropicHarness(t)
	tests := []struct {
		name, path, key, body string
		status                int
		typ                   string
		code                  sluice.Code
	}{
		{"missing key", "/v1/messages", "", `{"model":"claude","messages":[]}`, 401, "authentication_error", sluice.CodeNoCredentials},
		{"unknown model", "/v1/messages", keyWeb, `{"model":"nope","messages":[]}`, 404, "not_found_error", sluice.CodeModelNotFound},
		{"embeddings alias on messages", "/v1/messages", keyWeb, `{"model":"embed","messages":[]}`, 404, "not_found_error", sluice.CodeModelNotFound},
		{"duplicate model", "/v1/messages", keyWeb, `{"model":"claude","Model":"x","messages":[]}`, 400, "invalid_request_error", sluice.CodeInvalidRequest},
		// Before the rate limit, which cools the one account for the rest.
		{"overloaded upstream", "/v1/messages", keyWeb, `{"model":"claude-overloaded","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, 503, "overloaded_error", sluice.CodeNoUpstreamAvailable},
		{"rate limited upstream", "/v1/messages", keyWeb, `{"model":"claude-busy","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, 429, "rate_limit_error", sluice.CodeCapacityWaitTimeout},
		{"unknown path", "/v1/messages/batches", keyWeb, `{}`, 404, "not_found_error", sluice.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, got := postAnthropic(t, h, tt.path, tt.key, tt.body)
			var e anthropicError
			if err := json.Unmarshal([]byte(got), &e); err != nil || e.Type != "error" {
				t.Fatalf("body %q is not an Anthropic error envelope: %v", got, err)
			}
			if status != tt.status || e.Error.Type != tt.typ || e.Error.Code != string(tt.code) || e.Error.Message == "" {
				t.Errorf("%s = %d %+v, want %d %s with code %s", tt.name, status, e.Error, tt.status, tt.typ, tt.code)
			}
			if status == 429 && hdr.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		})
	}
}

func TestAnthropicKeyAsBearer(t *testing.T) {
	h, _ := newAnthropicHarness(t)
	status, _, got := h.post(t.Context(), "/v1/messages", keyWeb, `{"model":"claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 {
		t.Errorf("POST /v1/messages with Authorization: Bearer = %d %s, want 200", status, got)
	}
}

func TestAnthropicWrongMethod(t *testing.T) {
	h, _ := newAnthropicHarness(t)
	resp, err := http.Get(h.url("/v1/messages"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e anthropicError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 405 || e.Error.Code != string(sluice.CodeMethodNotAllowed) {
		t.Errorf("GET /v1/messages = %d %+v (%v), want 405 in Anthropic's envelope", resp.StatusCode, e, err)
	}
}
