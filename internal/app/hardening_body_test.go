package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// smugglingTemplate is catalogTemplate with two aliases named as their
// deployments' models, and the scoped key allowed only one of them: a body
// whose model is the deployment's is forwarded without a rewrite.
var smugglingTemplate = strings.NewReplacer(
	"models:\n  - alias: fast\n", "models:\n  - alias: capsame\n    deployments: [{model: capsame, endpoints: [ep-a]}]\n"+
		"  - alias: o1-pro\n    deployments: [{model: o1-pro, endpoints: [ep-a]}]\n  - alias: fast\n",
	"models: [fast]}", "models: [capsame, fast]}",
).Replace(catalogTemplate)

// TestModelSmugglingIsRefused: a body with more than one member some JSON
// reader takes for "model" (a duplicate, another case, an escaped
// spelling), or for another field Sluice reads, is a 400 that names the
// field and reaches no upstream; a body with one plain "model" reaches the
// upstream with exactly the deployment's model, once.
func TestModelSmugglingIsRefused(t *testing.T) {
	h := newHarnessWith(t, smugglingTemplate, "{backend: memory}", simulator.Options{})
	for _, body := range []string{
		`{"model":"o1-pro","model":"capsame","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"o1-pro","Model":"capsame","messages":[{"role":"user","content":"hi"}]}`,
		`{"Model":"o1-pro","model":"capsame","messages":[{"role":"user","content":"hi"}]}`,
		`{"mod\u0065l":"o1-pro","model":"capsame","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"capsame","model\u0000":"o1-pro","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"fast","MODEL":"o1-pro","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"capsame","stream":false,"Stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		status, _, answer := h.post(t.Context(), "/v1/chat/completions", keyScoped, body)
		if status != http.StatusBadRequest || !strings.Contains(answer, "invalid_request") || !strings.Contains(answer, "must appear at most once") {
			t.Errorf("POST %s = %d %s, want 400 invalid_request naming the field", body, status, answer)
		}
		if strings.Contains(answer, "o1-pro") || strings.Contains(answer, "capsame") {
			t.Errorf("POST %s answer %s echoes a value", body, answer)
		}
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 0 {
		t.Fatalf("the upstreams received %d requests, want none", n)
	}
	for alias, want := range map[string]string{"capsame": "capsame", "fast": "gpt-4o-mini"} {
		h.simA.Reset()
		if status, _, answer := h.post(t.Context(), "/v1/chat/completions", keyScoped, `{"model":"`+alias+`","messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
			t.Fatalf("POST model %s = %d %s", alias, status, answer)
		}
		recs := h.simA.Requests()
		if len(recs) != 1 || recs[0].Model != want || bytes.Count(recs[0].Body, []byte(`"model"`)) != 1 {
			t.Errorf("model %s: upstream received %d requests, the first %s; want one with model %q, once", alias, len(recs), bodyOf(recs), want)
		}
	}
}

func bodyOf(recs []simulator.Recorded) []byte {
	if len(recs) == 0 {
		return nil
	}
	return recs[0].Body
}

// TestHugeMaxTokensRunsAlone: max_tokens 9223372036854775807 once
// overflowed the token estimate to nothing reserved, and six such requests
// on a key with tpm 2000 all ran at once. The estimate saturates: each
// reserves the whole window, so they run one at a time.
func TestHugeMaxTokensRunsAlone(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		tpl := strings.Replace(catalogTemplate, "{id: web, tenant: web, secret_env: KEY_WEB}", "{id: web, tenant: web, secret_env: KEY_WEB, limits: {tpm: 2000}}", 1)
		h := newHarnessWith(t, tpl, state, simulator.Options{})
		for _, secret := range []string{secretA1, secretA2} {
			h.simA.SetKey(secret, simulator.Behavior{Latency: 300 * time.Millisecond})
		}
		body := `{"model":"only-a","max_tokens":9223372036854775807,"messages":[{"role":"user","content":"hi"}]}`
		statuses := make([]int, 6)
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() { statuses[i], _, _ = h.post(t.Context(), "/v1/chat/completions", keyWeb, body) })
		}
		wg.Wait()
		if peak := h.simA.MaxInFlight(""); peak != 1 {
			t.Errorf("upstream peak = %d with statuses %v, want 1: each request reserves the whole tpm 2000", peak, statuses)
		}
		ok := 0
		for _, s := range statuses {
			if s == http.StatusOK {
				ok++
			}
		}
		if ok == 0 {
			t.Errorf("statuses %v: want the first request admitted", statuses)
		}
	})
}

// TestBadEndUserIsInvalidRequest: an end user (the body's "user" or
// X-Sluice-User) with a control character, or longer than 256 bytes, once
// reached the per-user limit state and got a 503; it is a 400.
func TestBadEndUserIsInvalidRequest(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		tpl := strings.Replace(catalogTemplate, "{id: web, tenant: web, secret_env: KEY_WEB}", "{id: web, tenant: web, secret_env: KEY_WEB, user_limits: {max_inflight: 1}}", 1)
		h := newHarnessWith(t, tpl, state, simulator.Options{})
		send := func(bodyUser, headerUser string) (int, string) {
			body, _ := json.Marshal(map[string]any{"model": "fast", "user": bodyUser, "messages": []any{map[string]string{"role": "user", "content": "hi"}}})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url("/v1/chat/completions"), bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+keyWeb)
			if headerUser != "" {
				req.Header.Set("X-Sluice-User", headerUser)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			defer resp.Body.Close()
			var answer bytes.Buffer
			_, _ = answer.ReadFrom(resp.Body)
			return resp.StatusCode, answer.String()
		}
		tests := []struct {
			name         string
			body, header string
			wantStatus   int
		}{
			{name: "body with a control character", body: "alice\x01", wantStatus: 400},
			{name: "body with a newline", body: "alice\nbob", wantStatus: 400},
			{name: "body too long", body: strings.Repeat("a", 257), wantStatus: 400},
			{name: "header with a tab", body: "alice", header: "alice\tbob", wantStatus: 400},
			{name: "header too long", header: strings.Repeat("b", 257), wantStatus: 400},
			{name: "header with bytes that are not UTF-8", header: "alice\xff", wantStatus: 400},
			{name: "body at the limit", body: strings.Repeat("a", 256), wantStatus: 200},
			{name: "header in another script", header: "José", wantStatus: 200},
		}
		for _, tt := range tests {
			status, answer := send(tt.body, tt.header)
			if status != tt.wantStatus || status == 400 && !strings.Contains(answer, "invalid_request") {
				t.Errorf("%s: status %d %s, want %d", tt.name, status, answer, tt.wantStatus)
			}
		}
	})
}

// TestMaxOutputTokensIsEnforced: an alias with max_output_tokens refuses a
// request asking for more output, by max_tokens or max_completion_tokens.
func TestMaxOutputTokensIsEnforced(t *testing.T) {
	tpl := strings.Replace(catalogTemplate, "  - alias: only-a\n", "  - alias: only-a\n    max_output_tokens: 1000\n", 1)
	h := newHarnessWith(t, tpl, "{backend: memory}", simulator.Options{})
	tests := []struct {
		give       string
		wantStatus int
	}{
		{give: `"max_tokens":1000`, wantStatus: http.StatusOK},
		{give: `"max_completion_tokens":999`, wantStatus: http.StatusOK},
		{give: `"max_tokens":1001`, wantStatus: http.StatusBadRequest},
		{give: `"max_tokens":10,"max_completion_tokens":9223372036854775807`, wantStatus: http.StatusBadRequest},
	}
	for _, tt := range tests {
		body := `{"model":"only-a",` + tt.give + `,"messages":[{"role":"user","content":"hi"}]}`
		status, _, answer := h.post(t.Context(), "/v1/chat/completions", keyWeb, body)
		if status != tt.wantStatus || status == http.StatusBadRequest && !strings.Contains(answer, "invalid_request") {
			t.Errorf("POST %s = %d %s, want %d", tt.give, status, answer, tt.wantStatus)
		}
	}
	if n := len(h.simA.Requests()); n != 2 {
		t.Errorf("upstream received %d requests, want only the 2 within the limit", n)
	}
}

// TestJobSubmitSmugglingIsRefused: a video submit whose model some reader
// could take from another member or form part than Sluice did is a 400
// that reaches no upstream, in JSON and in a multipart form.
func TestJobSubmitSmugglingIsRefused(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	part := func(disposition, value string) string {
		return "--x\r\nContent-Disposition: " + disposition + "\r\n\r\n" + value + "\r\n"
	}
	tests := []struct{ contentType, body string }{
		{"application/json", `{"model":"sora-2-pro","model":"sora","prompt":"x"}`},
		{"application/json", `{"Model":"sora-2-pro","model":"sora","prompt":"x"}`},
		{"multipart/form-data; boundary=x", part(`form-data; name="model"`, "sora-2-pro") + part(`form-data; name="model"`, "sora") + "--x--\r\n"},
		{"multipart/form-data; boundary=x", part(`form-data; name="model"; filename="m"`, "sora-2-pro") + part(`form-data; name="model"`, "sora") + "--x--\r\n"},
		{"multipart/form-data; boundary=x", part(`form-data; name="model"; name="model"`, "sora-2-pro") + part(`form-data; name="model"`, "sora") + "--x--\r\n"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url("/v1/videos"), strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+keyWeb)
		req.Header.Set("Content-Type", tt.contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var answer bytes.Buffer
		_, _ = answer.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer.String(), `"code":"invalid_request"`) {
			t.Errorf("submit %q = %d %s, want Sluice's 400 invalid_request", tt.body, resp.StatusCode, answer.String())
		}
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 0 {
		t.Errorf("the upstreams saw %d requests, want none", n)
	}
}
