package app_test

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// adminSend sends one admin request to gw with token (none when "") and
// header (name, value, …), and returns the status, the headers and the body.
func adminSend(t *testing.T, gw *app.Gateway, method, path, token, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+gw.AdminAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestApplyingAnEmptyCatalogNeedsForce: a catalog without models would
// stop every request, so PUT /admin/catalog refuses it while the serving
// catalog has aliases, unless forced; the forced apply is audited as such.
func TestApplyingAnEmptyCatalogNeedsForce(t *testing.T) {
	env := maps.Clone(testEnv)
	env["SLUICE_ADMIN_TOKEN"] = testEnv["ADMIN_TOKEN"]
	gw, err := app.Start(t.Context(), app.Options{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
		DatabaseURL: "sqlite://" + filepath.Join(t.TempDir(), "sluice.db"),
		Log:         slog.New(slog.DiscardHandler),
		LookupEnv:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Banner:      io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	token := testEnv["ADMIN_TOKEN"]
	cl := adminclient.NewClient("http://"+gw.AdminAddr(), token)
	before, err := cl.Status(t.Context())
	if err != nil || len(before.Aliases) == 0 {
		t.Fatalf("status = %+v, %v; want the demo's aliases", before, err)
	}

	const empty = "version: 1\nmodels: []\n"
	code, _, body := adminSend(t, gw, http.MethodPut, "/admin/catalog", token, empty)
	if code != http.StatusConflict || !strings.Contains(body, `"catalog_emptied"`) || !strings.Contains(body, "force=true") {
		t.Fatalf("PUT an empty catalog = %d %s, want 409 catalog_emptied naming force=true", code, body)
	}
	if st, _ := cl.Status(t.Context()); st.Version != before.Version || len(st.Aliases) != len(before.Aliases) {
		t.Fatalf("after the refused apply: %+v, want version %d and its aliases serving", st, before.Version)
	}

	st, err := cl.ApplyCatalog(t.Context(), []byte(empty), 0, true)
	if err != nil || len(st.Aliases) != 0 {
		t.Fatalf("forced apply = %+v, %v; want no aliases", st, err)
	}
	entries, err := cl.Audit(t.Context(), adminclient.AuditQuery{})
	if err != nil || len(entries) == 0 || entries[0].Action != "catalog.apply_forced" || entries[0].Status != http.StatusOK {
		t.Fatalf("audit = %+v, %v; want the forced apply first", entries, err)
	}
	if entries[1].Action != "catalog.apply" || entries[1].Error != "catalog_emptied" {
		t.Errorf("audit of the refused apply = %+v, want catalog.apply with catalog_emptied", entries[1])
	}
}

// TestWrongAdminTokensAreThrottled sends 2,000 wrong admin tokens from one
// address: only the first few reach the token check (and the log); the
// rest are answered 429 with a Retry-After, unlogged.
func TestWrongAdminTokensAreThrottled(t *testing.T) {
	h := newHarness(t)
	counts := map[int]int{}
	var retryAfter string
	for range 2000 {
		code, hdr, _ := adminSend(t, h.gw, http.MethodGet, "/admin/status", "wrong-token", "")
		counts[code]++
		if code == http.StatusTooManyRequests {
			retryAfter = hdr.Get("Retry-After")
		}
	}
	lines := strings.Count(h.logs.String(), `"msg":"admin request unauthorized"`)
	t.Logf("2000 wrong tokens: %d checked (401), %d refused (429), %d log lines", counts[401], counts[429], lines)
	if counts[http.StatusUnauthorized] > 12 || counts[http.StatusTooManyRequests] < 1988 || retryAfter == "" {
		t.Errorf("answers = %v (Retry-After %q), want about 10 401s and the rest 429 with a Retry-After", counts, retryAfter)
	}
	if lines != counts[http.StatusUnauthorized] {
		t.Errorf("%d log lines, want one per token checked (%d)", lines, counts[http.StatusUnauthorized])
	}
}

// TestWrongKeysAreThrottledOnEveryPath: a client looping on a wrong key
// gets 429 with a Retry-After once over its budget, on GET /v1/models as
// on the other paths, while a good key from the same address serves.
func TestWrongKeysAreThrottledOnEveryPath(t *testing.T) {
	h := newHarness(t)
	get := func(key string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, h.url("/v1/models"), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	counts := map[int]int{}
	for range 200 {
		code, _ := get("sk-sluice-wrong")
		counts[code]++
	}
	if counts[http.StatusUnauthorized] > 22 || counts[http.StatusTooManyRequests] < 178 {
		t.Errorf("GET /v1/models with a wrong key: %v, want about 20 401s and the rest 429", counts)
	}
	if code, retry := get("sk-sluice-wrong"); code != http.StatusTooManyRequests || retry == "" {
		t.Errorf("throttled = %d, Retry-After %q; want 429 with one", code, retry)
	}
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", "sk-sluice-wrong", chatBody); code != http.StatusTooManyRequests || !strings.Contains(body, "access_auth_throttled") {
		t.Errorf("chat with the wrong key = %d %s, want 429 access_auth_throttled", code, body)
	}
	if code, _ := get(keyWeb); code != http.StatusOK {
		t.Errorf("GET /v1/models with a good key from the same address = %d, want 200", code)
	}
}

// TestAdminInputsFollowTheCatalogsRules: what the admin API creates is
// held to the catalog's rules for names (config.CheckID, CheckText,
// MaxLabels): no control characters in a tenant, no 200 KB name, no 10,000
// labels, no end user with a control character.
func TestAdminInputsFollowTheCatalogsRules(t *testing.T) {
	h := newHarnessWith(t, entitlementsTemplate, "{backend: memory}", simulator.Options{})
	token := testEnv["ADMIN_TOKEN"]
	labels := make([]string, 10_000)
	for i := range labels {
		labels[i] = fmt.Sprintf(`"l%d":"v"`, i)
	}
	tests := []struct {
		name, method, path, body, want string
	}{
		{"tenant with a control character", "POST", "/admin/keys", `{"name":"n","tenant":"we\u0007b"}`, "tenant: "},
		{"name of 200 KB", "POST", "/admin/keys", `{"name":"` + strings.Repeat("n", 200<<10) + `","tenant":"web"}`, "name: is longer than 256 bytes"},
		{"10,000 labels", "POST", "/admin/keys", `{"name":"n","tenant":"web","labels":{` + strings.Join(labels, ",") + `}}`, "labels: at most 64 labels"},
		{"name changed to a control character", "PATCH", "/admin/keys/made", `{"name":"a\nb"}`, "name: must be printable"},
		{"entitlement's tenant", "PUT", "/admin/entitlements", `{"entitlements":[{"tenant":"web\u0000","user":"u","profile":"capped"}]}`, "tenant "},
		{"entitlement's user", "PUT", "/admin/entitlements", `{"entitlements":[{"tenant":"web","user":"u\u001b[2J","profile":"capped"}]}`, "user must be printable"},
	}
	if code, _, body := adminSend(t, h.gw, "POST", "/admin/keys", token, `{"id":"made","name":"n","tenant":"web"}`); code != http.StatusCreated {
		t.Fatalf("create = %d %s", code, body)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := adminSend(t, h.gw, tt.method, tt.path, token, tt.body)
			if code != http.StatusBadRequest || !strings.Contains(body, tt.want) {
				t.Errorf("%s %s = %d %.300s, want 400 naming %q", tt.method, tt.path, code, body, tt.want)
			}
		})
	}
}

// TestARepeatedAmountIsRefused: {"amount":"1","amount":"1000"} applied
// 1000.00; an admin body with a member repeated or spelled in another case
// is refused, and nothing is posted.
func TestARepeatedAmountIsRefused(t *testing.T) {
	h := billed(t, "max_inflight: 1", "", "", simulator.Options{})
	token := testEnv["ADMIN_TOKEN"]
	for i, body := range []string{`{"amount":"1","amount":"1000"}`, `{"amount":"1","Amount":"1000"}`} {
		code, _, answer := adminSend(t, h.gw, "POST", "/admin/billing/accounts/acme/topup", token, body, "Idempotency-Key", fmt.Sprint("dup-", i))
		if code != http.StatusBadRequest || !strings.Contains(answer, `\"amount\" must appear at most once`) {
			t.Errorf("top-up %s = %d %s, want 400 naming amount", body, code, answer)
		}
	}
	acct, err := h.adminClient().BillingAccount(t.Context(), "acme")
	if err != nil || acct.Balance != 0 {
		t.Errorf("acme = %+v, %v; want nothing posted", acct, err)
	}
}
