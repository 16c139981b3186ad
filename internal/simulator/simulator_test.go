package simulator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/simulator"
)

// start serves a simulator over real HTTP for the test's duration.
func start(t *testing.T, opts simulator.Options) (*simulator.Simulator, *httptest.Server) {
	t.Helper()
	sim := simulator.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close) // first: releases stalled handlers so srv.Close returns
	return sim, srv
}

// send makes a request with a bearer key ("" sends no Authorization).
func send(t *testing.T, ctx context.Context, srv *httptest.Server, key, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func post(t *testing.T, srv *httptest.Server, key, path, body string) *http.Response {
	t.Helper()
	return send(t, t.Context(), srv, key, http.MethodPost, path, body)
}

// readAll reads and closes the body.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return b
}

// apiError is OpenAI's error envelope, with pointers so null is visible.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello to the world"}]}`

func TestRequestErrors(t *testing.T) {
	_, srv := start(t, simulator.Options{
		Models:            []string{"gpt-4o-mini", "text-embedding-3-small"},
		Keys:              map[string]simulator.Behavior{"good": {}, "revoked": {Invalid: true}},
		RejectUnknownKeys: true,
	})
	tests := []struct {
		name       string
		key        string
		method     string
		path       string
		body       string
		wantStatus int
		wantType   string
		wantCode   string // "" when null
		wantParam  string // "" when null
	}{
		{"no key", "", "POST", "/v1/chat/completions", chatBody, 401, "invalid_request_error", "", ""},
		{"invalid key", "revoked", "POST", "/v1/chat/completions", chatBody, 401, "invalid_request_error", "invalid_api_key", ""},
		{"unknown key rejected", "sk-somebody-else", "POST", "/v1/chat/completions", chatBody, 401, "invalid_request_error", "invalid_api_key", ""},
		{"unknown path", "good", "POST", "/v1/completions", chatBody, 404, "invalid_request_error", "", ""},
		{"wrong method", "good", "GET", "/v1/chat/completions", "", 404, "invalid_request_error", "", ""},
		{"invalid json", "good", "POST", "/v1/chat/completions", `{"model":`, 400, "invalid_request_error", "", ""},
		{"wrong type", "good", "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":"5"}`, 400, "invalid_request_error", "invalid_type", "max_tokens"},
		{"missing model", "good", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "", ""},
		{"missing messages", "good", "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini"}`, 400, "invalid_request_error", "missing_required_parameter", "messages"},
		{"empty messages", "good", "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, 400, "invalid_request_error", "empty_array", "messages"},
		{"max_tokens zero", "good", "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400, "invalid_request_error", "integer_below_min_value", "max_tokens"},
		{"unknown model", "good", "POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "invalid_request_error", "model_not_found", ""},
		{"unknown embedding model", "good", "POST", "/v1/embeddings", `{"model":"ada","input":"hi"}`, 404, "invalid_request_error", "model_not_found", ""},
		{"empty input", "good", "POST", "/v1/embeddings", `{"model":"text-embedding-3-small","input":""}`, 400, "invalid_request_error", "", ""},
		{"missing input", "good", "POST", "/v1/embeddings", `{"model":"text-embedding-3-small"}`, 400, "invalid_request_error", "missing_required_parameter", "input"},
		{"object input", "good", "POST", "/v1/embeddings", `{"model":"text-embedding-3-small","input":{"a":1}}`, 400, "invalid_request_error", "", ""},
		{"bad encoding", "good", "POST", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi","encoding_format":"hex"}`, 400, "invalid_request_error", "invalid_value", "encoding_format"},
		{"bad dimensions", "good", "POST", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi","dimensions":0}`, 400, "invalid_request_error", "invalid_value", "dimensions"},
		{"unknown model retrieve", "good", "GET", "/v1/models/gpt-9", "", 404, "invalid_request_error", "model_not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, t.Context(), srv, tt.key, tt.method, tt.path, tt.body)
			body := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", resp.StatusCode, tt.wantStatus, body)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("no x-request-id")
			}
			e := decodeError(t, body)
			if e.Error.Message == "" {
				t.Errorf("empty message in %s", body)
			}
			if e.Error.Type != tt.wantType {
				t.Errorf("type = %q, want %q", e.Error.Type, tt.wantType)
			}
			if got := deref(e.Error.Code); got != tt.wantCode {
				t.Errorf("code = %q, want %q", got, tt.wantCode)
			}
			if got := deref(e.Error.Param); got != tt.wantParam {
				t.Errorf("param = %q, want %q", got, tt.wantParam)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestIncorrectKeyIsMasked(t *testing.T) {
	_, srv := start(t, simulator.Options{RejectUnknownKeys: true})
	body := string(readAll(t, post(t, srv, "sk-proj-secret-secret-1234", "/v1/chat/completions", chatBody)))
	if strings.Contains(body, "secret") || !strings.Contains(body, "1234") {
		t.Errorf("body = %s, want the key masked down to its last four", body)
	}
}

func TestModels(t *testing.T) {
	tests := []struct {
		name   string
		models []string
		want   []string
	}{
		{"default", nil, simulator.DefaultModels},
		{"configured", []string{"m1", "m2"}, []string{"m1", "m2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := start(t, simulator.Options{Models: tt.models})
			resp := send(t, t.Context(), srv, "k", "GET", "/v1/models", "")
			var list struct {
				Object string
				Data   []struct {
					ID      string
					Object  string
					Created int64
					OwnedBy string `json:"owned_by"`
				}
			}
			if err := json.Unmarshal(readAll(t, resp), &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range list.Data {
				got = append(got, m.ID)
				if m.Object != "model" || m.Created == 0 || m.OwnedBy == "" {
					t.Errorf("model %+v lacks object, created or owned_by", m)
				}
			}
			if list.Object != "list" {
				t.Errorf("object = %q, want list", list.Object)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("model ids (-want +got):\n%s", diff)
			}
			resp = send(t, t.Context(), srv, "k", "GET", "/v1/models/"+tt.want[0], "")
			if body := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"`+tt.want[0]+`"`) {
				t.Errorf("GET /v1/models/%s = %d %s", tt.want[0], resp.StatusCode, body)
			}
		})
	}
}

func TestFailStatus(t *testing.T) {
	tests := []struct {
		name      string
		give      simulator.Behavior
		wantType  string // Content-Type
		wantInBdy string
		wantHdr   map[string]string
	}{
		{"500", simulator.Behavior{FailStatus: 500}, "application/json", `"type":"server_error"`, nil},
		{"502", simulator.Behavior{FailStatus: 502}, "application/json", `"type":"cf_bad_gateway"`, nil},
		{"503", simulator.Behavior{FailStatus: 503}, "application/json", `"type":"server_error"`, nil},
		{"504", simulator.Behavior{FailStatus: 504}, "application/json", `"type":"cf_gateway_timeout"`, nil},
		{"520", simulator.Behavior{FailStatus: 520}, "text/html; charset=UTF-8", "Error code 520", map[string]string{"Server": "cloudflare"}},
		{"524", simulator.Behavior{FailStatus: 524}, "text/html; charset=UTF-8", "A timeout occurred", map[string]string{"Server": "cloudflare"}},
		{"529", simulator.Behavior{FailStatus: 529}, "application/json", `"type":"overloaded_error"`, nil},
		{"401", simulator.Behavior{FailStatus: 401}, "application/json", `"code":"invalid_api_key"`, nil},
		{"403", simulator.Behavior{FailStatus: 403}, "application/json", `"code":"unsupported_country_region_territory"`, nil},
		{"429", simulator.Behavior{FailStatus: 429, RetryAfter: 2500 * time.Millisecond}, "application/json", `"code":"rate_limit_exceeded"`,
			map[string]string{"Retry-After": "3", "Retry-After-Ms": "2500", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "2.5s"}},
		{"429 default retry", simulator.Behavior{FailStatus: 429}, "application/json", "Please try again in 1s.",
			map[string]string{"Retry-After": "1", "Retry-After-Ms": "1000"}},
		{"429 no retry hint", simulator.Behavior{FailStatus: 429, RetryAfter: -1}, "application/json", `"type":"requests"`,
			map[string]string{"Retry-After": "", "Retry-After-Ms": ""}},
		{"429 insufficient quota", simulator.Behavior{FailStatus: 429, FailBody: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
			"application/json", `"code":"insufficient_quota"`, map[string]string{"Retry-After": "1"}},
		{"body override", simulator.Behavior{FailStatus: 503, FailBody: "upstream connect error"}, "text/plain; charset=utf-8", "upstream connect error", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, srv := start(t, simulator.Options{Default: tt.give})
			resp := post(t, srv, "k", "/v1/chat/completions", chatBody)
			body := string(readAll(t, resp))
			if resp.StatusCode != tt.give.FailStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.give.FailStatus)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			if !strings.Contains(body, tt.wantInBdy) {
				t.Errorf("body = %s, want it to contain %s", body, tt.wantInBdy)
			}
			if tt.wantType == "application/json" && !json.Valid([]byte(body)) {
				t.Errorf("body is not JSON: %s", body)
			}
			for k, want := range tt.wantHdr {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if got := sim.Requests()[0].Status; got != tt.give.FailStatus {
				t.Errorf("recorded status = %d, want %d", got, tt.give.FailStatus)
			}
		})
	}
}

func TestLatencyDelaysHeaders(t *testing.T) {
	_, srv := start(t, simulator.Options{Default: simulator.Behavior{Latency: 50 * time.Millisecond, FailStatus: 503}})
	begin := time.Now()
	resp := post(t, srv, "k", "/v1/chat/completions", chatBody)
	readAll(t, resp)
	if got := time.Since(begin); got < 50*time.Millisecond {
		t.Errorf("answered after %v, want at least the 50ms latency", got)
	}
}

func TestClientGoneDuringLatency(t *testing.T) {
	sim, srv := start(t, simulator.Options{Default: simulator.Behavior{Latency: time.Minute}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Authorization", "Bearer k")
		_, err := srv.Client().Do(req)
		done <- err
	}()
	eventually(t, "the request to be in flight", func() bool { return sim.InFlight() == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Error("request succeeded, want it cancelled")
	}
	eventually(t, "Cancelled() == 1", func() bool { return sim.Cancelled() == 1 && sim.InFlight() == 0 })
	rec := sim.Requests()[0]
	if rec.Status != 499 || !rec.Cancelled {
		t.Errorf("record = status %d cancelled %v, want 499 true", rec.Status, rec.Cancelled)
	}
}

func TestRecords(t *testing.T) {
	sim, srv := start(t, simulator.Options{})
	readAll(t, post(t, srv, "key-a", "/v1/chat/completions", chatBody))
	readAll(t, post(t, srv, "key-b", "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	readAll(t, post(t, srv, "key-a", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`))
	readAll(t, post(t, srv, "", "/v1/embeddings", `{}`))

	type rec struct {
		Key, Path, Model string
		Stream           bool
		Status           int
		Auth             string
	}
	var got []rec
	for _, r := range sim.Requests() {
		got = append(got, rec{r.Key, r.Path, r.Model, r.Stream, r.Status, r.Header.Get("Authorization")})
		if r.At.IsZero() || len(r.Body) == 0 {
			t.Errorf("record %+v lacks At or Body", r)
		}
	}
	want := []rec{
		{"key-a", "/v1/chat/completions", "gpt-4o-mini", false, 200, "Bearer key-a"},
		{"key-b", "/v1/chat/completions", "gpt-4o", true, 200, "Bearer key-b"},
		{"key-a", "/v1/embeddings", "text-embedding-3-small", false, 200, "Bearer key-a"},
		{"", "/v1/embeddings", "", false, 401, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
	if got := string(sim.Requests()[0].Body); got != chatBody {
		t.Errorf("Body = %s, want %s", got, chatBody)
	}
	for key, want := range map[string]int{"key-a": 2, "key-b": 1, "": 1, "key-c": 0} {
		if got := sim.Count(key); got != want {
			t.Errorf("Count(%q) = %d, want %d", key, got, want)
		}
	}

	sim.Reset()
	if got := len(sim.Requests()); got != 0 {
		t.Errorf("len(Requests()) after Reset = %d, want 0", got)
	}
	if got := sim.Count("key-a"); got != 0 {
		t.Errorf("Count after Reset = %d, want 0", got)
	}
	if got := sim.MaxInFlight(""); got != 0 {
		t.Errorf("MaxInFlight after Reset = %d, want 0", got)
	}
}

func TestMaxRecordsKeepsNewest(t *testing.T) {
	sim, srv := start(t, simulator.Options{MaxRecords: 2})
	for _, key := range []string{"k1", "k2", "k3"} {
		readAll(t, post(t, srv, key, "/v1/chat/completions", chatBody))
	}
	var got []string
	for _, r := range sim.Requests() {
		got = append(got, r.Key)
	}
	if diff := cmp.Diff([]string{"k2", "k3"}, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if got := sim.Count("k1"); got != 1 {
		t.Errorf("Count(k1) = %d, want 1: counters stay exact", got)
	}
}

func TestSetKey(t *testing.T) {
	sim, srv := start(t, simulator.Options{})
	if resp := post(t, srv, "k", "/v1/chat/completions", chatBody); resp.StatusCode != 200 {
		t.Fatalf("status = %d before SetKey, want 200", resp.StatusCode)
	}
	sim.SetKey("k", simulator.Behavior{Invalid: true})
	resp := post(t, srv, "k", "/v1/chat/completions", chatBody)
	readAll(t, resp)
	if resp.StatusCode != 401 {
		t.Errorf("status = %d after SetKey(Invalid), want 401", resp.StatusCode)
	}
}
