package admin_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/ledger"
)

// errorBody is the OpenAI error envelope.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, body string) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e
}

func TestToken(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name       string
		path       string
		header     string // Authorization
		wantStatus int
		wantCode   string
	}{
		{"missing", "/admin/status", "", http.StatusUnauthorized, "admin_unauthorized"},
		{"wrong", "/admin/status", "Bearer not-the-token", http.StatusUnauthorized, "admin_unauthorized"},
		{"prefix of the token", "/admin/status", "Bearer " + testToken[:10], http.StatusUnauthorized, "admin_unauthorized"},
		{"token with a suffix", "/admin/status", "Bearer " + testToken + "x", http.StatusUnauthorized, "admin_unauthorized"},
		{"not bearer", "/admin/status", "Basic " + testToken, http.StatusUnauthorized, "admin_unauthorized"},
		{"empty bearer", "/admin/status", "Bearer ", http.StatusUnauthorized, "admin_unauthorized"},
		{"unknown path without token", "/admin/nope", "", http.StatusUnauthorized, "admin_unauthorized"},
		{"right", "/admin/status", "Bearer " + testToken, http.StatusOK, ""},
		{"right, lower-case scheme", "/admin/keys", "bearer " + testToken, http.StatusOK, ""},
		{"metrics without token", "/metrics", "", http.StatusOK, ""},
		{"healthz without token", "/healthz", "", http.StatusNoContent, ""},
		{"unknown path with token", "/admin/nope", "Bearer " + testToken, http.StatusNotFound, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, http.MethodGet, tt.path, "", "", "Authorization", tt.header)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("GET %s status = %d (%s), want %d", tt.path, resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantCode == "" {
				return
			}
			if got := decodeError(t, body).Error.Code; got != tt.wantCode {
				t.Errorf("code = %q, want %q", got, tt.wantCode)
			}
		})
	}
	if strings.Contains(h.logs.String(), testToken) {
		t.Error("the admin token reached the log")
	}
}

func TestMetricsBody(t *testing.T) {
	h := newHarness(t)
	_, body := h.do(t, http.MethodGet, "/metrics", "", "")
	if body != "sluice_up 1\n" {
		t.Errorf("GET /metrics = %q, want the metrics handler's output", body)
	}
	resp, _ := h.do(t, http.MethodPost, "/metrics", "", "")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics status = %d, want 405", resp.StatusCode)
	}
}

func TestNoTokenRefusesEverything(t *testing.T) {
	srv := newServer(t, admin.Options{})
	for _, header := range []string{"", "Bearer ", "Bearer x"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv+"/admin/status", nil)
		req.Header.Set("Authorization", header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("empty admin token, Authorization %q: status = %d, want 401", header, resp.StatusCode)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do(t, http.MethodDelete, "/admin/keys", testToken, "")
	if resp.StatusCode != http.StatusMethodNotAllowed || decodeError(t, body).Error.Code != "method_not_allowed" {
		t.Fatalf("DELETE /admin/keys = %d %s, want 405 method_not_allowed", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Allow"); got != "GET, POST" {
		t.Errorf("Allow = %q, want %q", got, "GET, POST")
	}
}

func TestStatus(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	for _, pending := range []bool{false, false, true} {
		if _, err := h.client.CreateKey(ctx, admin.KeySpec{Name: "n", Tenant: "t", Pending: pending}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := h.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := h.catalog.Status()
	if st.Version != want.Version || st.Source != want.Source || !st.LoadedAt.Equal(want.LoadedAt) {
		t.Errorf("Status = %+v, want catalog %+v", st.CatalogStatus, want)
	}
	if diff := cmp.Diff(map[sluice.KeyStatus]int{sluice.KeyActive: 2, sluice.KeyPending: 1}, st.Keys); diff != "" {
		t.Errorf("Status key counts (-want +got):\n%s", diff)
	}
}

func TestCatalog(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do(t, http.MethodGet, "/admin/catalog", testToken, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != `"1"` || body != string(h.catalog.Status().Document) {
		t.Fatalf("GET /admin/catalog = %d, ETag %q, %q", resp.StatusCode, resp.Header.Get("ETag"), body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/yaml") {
		t.Errorf("Content-Type = %q, want text/yaml", ct)
	}

	tests := []struct {
		name       string
		ifMatch    string
		doc        string
		readOnly   bool
		wantStatus int
		wantCode   string
		wantInMsg  []string
	}{
		{name: "stale If-Match", ifMatch: `"7"`, doc: "version: 1\n", wantStatus: 412, wantCode: "catalog_version_conflict"},
		{name: "invalid", ifMatch: `"1"`, doc: "invalid: true\n", wantStatus: 422, wantCode: "catalog_invalid",
			wantInMsg: []string{"models[0].alias: required", "endpoints[1].base_url: not a URL"}},
		{name: "read-only", doc: "version: 1\n", readOnly: true, wantStatus: 409, wantCode: "catalog_read_only",
			wantInMsg: []string{"/etc/sluice.yaml"}},
		{name: "malformed If-Match", ifMatch: `"one"`, doc: "version: 1\n", wantStatus: 400, wantCode: "invalid_request"},
		{name: "empty document", doc: "", wantStatus: 400, wantCode: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.catalog.setReadOnly(tt.readOnly)
			resp, body := h.do(t, http.MethodPut, "/admin/catalog", testToken, tt.doc, "If-Match", tt.ifMatch)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("PUT /admin/catalog status = %d (%s), want %d", resp.StatusCode, body, tt.wantStatus)
			}
			e := decodeError(t, body)
			if e.Error.Code != tt.wantCode {
				t.Errorf("code = %q, want %q", e.Error.Code, tt.wantCode)
			}
			for _, s := range tt.wantInMsg {
				if !strings.Contains(e.Error.Message, s) {
					t.Errorf("message %q does not contain %q", e.Error.Message, s)
				}
			}
		})
	}
	h.catalog.setReadOnly(false)

	st, err := h.client.ApplyCatalog(t.Context(), []byte("version: 1\n# v2\n"), 1, false)
	if err != nil || st.Version != 2 || st.StoredVersion != 1 {
		t.Fatalf("ApplyCatalog(if 1) = %+v, %v; want snapshot 2, stored version 1", st, err)
	}
	// The ETag is the stored version, which every replica numbers alike.
	doc, version, err := h.client.Catalog(t.Context())
	if err != nil || version != 1 || string(doc) != "version: 1\n# v2\n" {
		t.Fatalf("Catalog() = %q, %d, %v; want the applied document at stored version 1", doc, version, err)
	}
	if _, err := h.client.ApplyCatalog(t.Context(), []byte("version: 1\n"), 0, false); err != nil {
		t.Errorf("ApplyCatalog(no If-Match) = %v, want success", err)
	}
	_, err = h.client.ApplyCatalog(t.Context(), []byte("version: 1\n"), version, false)
	if ae, ok := errors.AsType[*adminclient.APIError](err); !ok || ae.Status != http.StatusPreconditionFailed || ae.Code != "catalog_version_conflict" {
		t.Errorf("ApplyCatalog(stale) error = %v, want an *APIError 412 catalog_version_conflict", err)
	}
	if !strings.Contains(h.logs.String(), `"action":"catalog.apply"`) {
		t.Error("catalog apply was not logged")
	}
}

func TestRequestErrors(t *testing.T) {
	h := newHarness(t)
	if _, err := h.client.CreateKey(t.Context(), admin.KeySpec{ID: "k1", Name: "n", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	big := `{"name":"` + strings.Repeat("x", 1<<20) + `","tenant":"t"}`
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"malformed JSON", "POST", "/admin/keys", `{"name":`, 400, "invalid_request"},
		{"unknown field", "POST", "/admin/keys", `{"name":"n","tenant":"t","scopes":[]}`, 400, "invalid_request"},
		{"two objects", "POST", "/admin/keys", `{"name":"n","tenant":"t"}{}`, 400, "invalid_request"},
		{"empty body", "POST", "/admin/keys", ``, 400, "invalid_request"},
		{"no name", "POST", "/admin/keys", `{"tenant":"t"}`, 400, "invalid_request"},
		{"no tenant", "POST", "/admin/keys", `{"name":"n"}`, 400, "invalid_request"},
		{"bad id", "POST", "/admin/keys", `{"id":"a/b","name":"n","tenant":"t"}`, 400, "invalid_request"},
		{"empty alias", "POST", "/admin/keys", `{"name":"n","tenant":"t","models":["fast",""]}`, 400, "invalid_request"},
		{"both expiries", "POST", "/admin/keys", `{"name":"n","tenant":"t","expires_in":"1h","expires_at":"2030-01-01T00:00:00Z"}`, 400, "invalid_request"},
		{"bad duration", "POST", "/admin/keys", `{"name":"n","tenant":"t","expires_in":"soon"}`, 400, "invalid_request"},
		{"already expired", "POST", "/admin/keys", `{"name":"n","tenant":"t","expires_at":"2001-01-01T00:00:00Z"}`, 400, "invalid_request"},
		{"bad time", "POST", "/admin/keys", `{"name":"n","tenant":"t","expires_at":"tomorrow"}`, 400, "invalid_request"},
		{"too large", "POST", "/admin/keys", big, 413, "request_too_large"},
		{"duplicate id", "POST", "/admin/keys", `{"id":"k1","name":"n","tenant":"t"}`, 409, "key_conflict"},
		{"expire: two fields", "POST", "/admin/keys/k1/expire", `{"in":"1h","never":true}`, 400, "invalid_request"},
		{"expire: negative", "POST", "/admin/keys/k1/expire", `{"in":"-1h"}`, 400, "invalid_request"},
		{"expire: unknown field", "POST", "/admin/keys/k1/expire", `{"when":"now"}`, 400, "invalid_request"},
		{"models: missing", "PUT", "/admin/keys/k1/models", `{}`, 400, "invalid_request"},
		{"models: unknown key", "PUT", "/admin/keys/nope/models", `{"models":[]}`, 404, "not_found"},
		{"show unknown key", "GET", "/admin/keys/nope", ``, 404, "not_found"},
		{"disable unknown key", "POST", "/admin/keys/nope/disable", ``, 404, "not_found"},
		{"usage: bad since", "GET", "/admin/usage?since=yesterday", ``, 400, "invalid_request"},
		{"usage: bad limit", "GET", "/admin/usage?limit=-1", ``, 400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, tt.method, tt.path, testToken, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s status = %d (%.200s), want %d", tt.method, tt.path, resp.StatusCode, body, tt.wantStatus)
			}
			if got := decodeError(t, body).Error.Code; got != tt.wantCode {
				t.Errorf("code = %q, want %q", got, tt.wantCode)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	h := newHarness(t)
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h.usage.RecordUsage(t.Context(), []sluice.UsageRecord{{
		RequestID: "req-1", KeyID: "k1", Tenant: "t", Alias: "fast", Protocol: sluice.ProtocolOpenAIChat,
		Status: 200, Started: started, Latency: 1500 * time.Millisecond, TTFT: 250500 * time.Microsecond,
		Usage: sluice.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Measured: true},
		Executions: []sluice.Execution{
			{EdgeID: "c1/e1/m", Status: sluice.ExecutionRate, HTTPStatus: 429, Started: started, Duration: 20 * time.Millisecond},
			{EdgeID: "c2/e1/m", Status: sluice.ExecutionOK, HTTPStatus: 200, Started: started, FirstByte: 200 * time.Millisecond, Duration: time.Second},
		},
	}})
	recs, err := h.client.Usage(t.Context(), ledger.UsageFilter{Since: started.Add(-time.Minute), Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || len(recs[0].Executions) != 2 {
		t.Fatalf("Usage = %+v, want one record with two executions", recs)
	}
	r := recs[0]
	if r.LatencyMS != 1500 || r.TTFTMS != 250.5 || r.Executions[0].DurationMS != 20 || r.Executions[1].FirstByteMS != 200 {
		t.Errorf("durations = latency %v, ttft %v, exec durations %v/%v; want 1500, 250.5, 20, first byte 200 (ms)",
			r.LatencyMS, r.TTFTMS, r.Executions[0].DurationMS, r.Executions[1].FirstByteMS)
	}
	if r.Usage.TotalTokens != 15 || r.Executions[0].Status != sluice.ExecutionRate {
		t.Errorf("record = %+v", r)
	}
	if f, _ := h.usage.got(); f.Limit != 5 || !f.Since.Equal(started.Add(-time.Minute)) {
		t.Errorf("ListUsage got since %v limit %d, want %v 5", f.Since, f.Limit, started.Add(-time.Minute))
	}
}

// newServer serves the admin API with opts and returns its URL.
func newServer(t *testing.T, opts admin.Options) string {
	t.Helper()
	srv := httptest.NewServer(admin.New(opts))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBodiesSpellEachMemberOnce: every admin body is decoded in one
// place, which refuses a member repeated or spelled in another case, at
// any depth, as the data plane does: encoding/json would apply the last
// one ({"amount":"1","amount":"1000"} applied 1000.00).
func TestBodiesSpellEachMemberOnce(t *testing.T) {
	tests := []struct {
		name, method, path, body, field string
	}{
		{"repeated amount", "POST", "/admin/billing/accounts/cat-acct/topup", `{"amount":"1","amount":"1000"}`, "amount"},
		{"amount in another case", "POST", "/admin/billing/accounts/cat-acct/topup", `{"amount":"1","Amount":"1000"}`, "amount"},
		{"amount in another case alone", "POST", "/admin/billing/accounts/cat-acct/topup", `{"AMOUNT":"1000"}`, "amount"},
		{"Kelvin sign", "POST", "/admin/keys", `{"name":"n","tenant":"web","tas\u212a":"x"}`, "task"},
		{"repeated tenant", "POST", "/admin/keys", `{"name":"n","tenant":"web","tenant":"other"}`, "tenant"},
		{"escaped repetition", "POST", "/admin/keys", `{"name":"n","tenant":"web","ten\u0061nt":"other"}`, "tenant"},
		{"nested", "POST", "/admin/keys", `{"name":"n","tenant":"web","policy":{"mode":"default","Mode":"pool"}}`, "policy.mode"},
		{"promoted from an embedded struct", "POST", "/admin/keys", `{"name":"n","tenant":"web","on_limit":"wait","On_Limit":"refuse"}`, "on_limit"},
		{"repeated label", "POST", "/admin/keys", `{"name":"n","tenant":"web","labels":{"team":"a","team":"b"}}`, "labels.team"},
		{"in a list", "PUT", "/admin/entitlements", `{"entitlements":[{"tenant":"web","user":"alice","profile":"free","User":"bob"}]}`, "entitlements[0].user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			resp, body := h.do(t, tt.method, tt.path, testToken, tt.body, "Idempotency-Key", "k-1")
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s %s %s = %d %s, want 400", tt.method, tt.path, tt.body, resp.StatusCode, body)
			}
			if msg := decodeError(t, body).Error.Message; tt.field != "" && !strings.Contains(msg, `"`+tt.field+`" must appear at most once, spelled exactly so`) {
				t.Errorf("message = %q, want it to name %q", msg, tt.field)
			}
		})
	}
	// A label whose name only differs in case is another label.
	h := newHarness(t)
	if resp, body := h.do(t, "POST", "/admin/keys", testToken, `{"name":"n","tenant":"web","labels":{"team":"a","Team":"b"}}`); resp.StatusCode != http.StatusCreated {
		t.Errorf("labels team and Team = %d %s, want 201", resp.StatusCode, body)
	}
}

// TestADeeplyNestedBodyIsRefused: the spelling check walks a body
// recursively; a megabyte of brackets is refused, not walked.
func TestADeeplyNestedBodyIsRefused(t *testing.T) {
	h := newHarness(t)
	body := `{"name":"n","tenant":"web","labels":` + strings.Repeat("[", 500_000) + strings.Repeat("]", 500_000) + `}`
	resp, answer := h.do(t, "POST", "/admin/keys", testToken, body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, "nested deeper than") {
		t.Errorf("deeply nested body = %d %.200s, want 400", resp.StatusCode, answer)
	}
}
