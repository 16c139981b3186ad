package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/catalog"
)

// writeRequests is one request for each write route of the admin API,
// against the harness with the key web-1. A write route missing here fails
// TestAuditRecordsEveryWriteOnce: add its request, and it is checked too.
var writeRequests = map[string]struct{ path, body string }{
	"PUT /admin/catalog":                       {"/admin/catalog", "version: 1\nmodels: [fast, slow]\n"},
	"POST /admin/keys":                         {"/admin/keys", `{"id":"new-1","name":"new","tenant":"web"}`},
	"POST /admin/keys/{id}/disable":            {"/admin/keys/web-1/disable", ""},
	"POST /admin/keys/{id}/enable":             {"/admin/keys/pending-1/enable", ""},
	"POST /admin/keys/{id}/revoke":             {"/admin/keys/web-1/revoke", ""},
	"POST /admin/keys/{id}/rotate":             {"/admin/keys/web-1/rotate", ""},
	"POST /admin/keys/{id}/expire":             {"/admin/keys/web-1/expire", `{"in":"1h"}`},
	"POST /admin/keys/batch":                   {"/admin/keys/batch", `{"selector":"team=web","operation":"disable"}`},
	"PATCH /admin/keys/{id}":                   {"/admin/keys/web-1", `{"name":"renamed"}`},
	"PUT /admin/keys/{id}/models":              {"/admin/keys/web-1/models", `{"models":["fast"]}`},
	"POST /admin/accounts/{id}/disable":        {"/admin/accounts/acct-a/disable", ""},
	"POST /admin/accounts/{id}/enable":         {"/admin/accounts/acct-b/enable", ""},
	"POST /admin/credentials/{id}/disable":     {"/admin/credentials/cred-2/disable", ""},
	"POST /admin/credentials/{id}/drain":       {"/admin/credentials/cred-2/drain", ""},
	"POST /admin/credentials/{id}/enable":      {"/admin/credentials/cred-3/enable", ""},
	"POST /admin/credentials/{id}/remove":      {"/admin/credentials/cred-2/remove", ""},
	"PUT /admin/billing/accounts/{id}":         {"/admin/billing/accounts/new-acct", `{"plan":"standard"}`},
	"POST /admin/billing/accounts/{id}/topup":  {"/admin/billing/accounts/cat-acct/topup", `{"amount":"10.00"}`},
	"POST /admin/billing/accounts/{id}/adjust": {"/admin/billing/accounts/cat-acct/adjust", `{"amount":"-1.50","reason":"goodwill"}`},
	"POST /admin/billing/accounts/{id}/refund": {"/admin/billing/accounts/cat-acct/refund", `{"request_id":"req-charged","reason":"bad answer"}`},
	"POST /admin/billing/prices":               {"/admin/billing/prices", `{"kind":"price","plan":"standard","alias":"fast","input":"1.00"}`},
	"PUT /admin/entitlements":                  {"/admin/entitlements", `{"entitlements":[{"tenant":"web","user":"bob","profile":"paid"}]}`},
	"DELETE /admin/entitlements":               {"/admin/entitlements", `{"users":[{"tenant":"web","user":"alice"}]}`},

	// A rollback to the version auditHarness stores.
	"POST /admin/catalog/versions/{version}/rollback": {"/admin/catalog/versions/1/rollback", ""},

	"POST /admin/billing/accounts/{id}/suspend": {"/admin/billing/accounts/cat-acct/suspend", `{"reason":"unpaid invoice"}`},
	"POST /admin/billing/accounts/{id}/resume":  {"/admin/billing/accounts/cat-acct/resume", ""},
	"POST /admin/tenants/{id}/suspend":          {"/admin/tenants/web/suspend", `{"reason":"abuse report"}`},
	"POST /admin/tenants/{id}/resume":           {"/admin/tenants/idle/resume", ""},
	"POST /admin/accounts/{id}/suspend":         {"/admin/accounts/acct-a/suspend", `{"reason":"contract ended"}`},
	"POST /admin/accounts/{id}/resume":          {"/admin/accounts/acct-b/resume", ""},
}

// auditHarness is a harness with the keys web-1 (active) and pending-1,
// and the billing account cat-acct and the tenant idle suspended. It
// returns the keys' plaintexts.
func auditHarness(t *testing.T) (*harness, []string) {
	t.Helper()
	h := newHarness(t)
	for _, sp := range []catalog.Suspension{
		{Kind: catalog.SuspendedBillingAccount, ID: "cat-acct", Reason: "earlier", Since: time.Now(), By: "admin"},
		{Kind: catalog.SuspendedTenant, ID: "idle", Reason: "earlier", Since: time.Now(), By: "admin"},
	} {
		if err := h.keys.Suspend(t.Context(), sp); err != nil {
			t.Fatal(err)
		}
	}
	var secrets []string
	for _, spec := range []admin.KeySpec{
		{ID: "web-1", Name: "web", Tenant: "web", KeySettings: admin.KeySettings{Labels: map[string]string{"team": "web"}}},
		{ID: "pending-1", Name: "later", Tenant: "web", Pending: true},
	} {
		issued, err := h.client.CreateKey(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, issued.Key)
	}
	// Stored catalog version 1, for a rollback to restore.
	if _, err := h.catalog.Apply(t.Context(), []byte("version: 1\nmodels: [fast]\n"), 0, false, "admin"); err != nil {
		t.Fatal(err)
	}
	return h, secrets
}

// audit returns every entry of the harness's audit log, newest first.
func (h *harness) auditLog(t *testing.T) []admin.AuditEntry {
	t.Helper()
	entries, err := h.client.Audit(t.Context(), adminclient.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestAuditRecordsEveryWriteOnce(t *testing.T) {
	for _, rt := range admin.Routes(newHarness(t).handler) {
		pattern, action := rt[0], rt[1]
		method, _, _ := strings.Cut(pattern, " ")
		if method == http.MethodGet {
			if action != "" {
				t.Errorf("read route %s has the audit action %q", pattern, action)
			}
			continue
		}
		t.Run(pattern, func(t *testing.T) {
			if action == "" {
				t.Fatalf("write route %s has no audit action", pattern)
			}
			req, ok := writeRequests[pattern]
			if !ok {
				t.Fatalf("no request for the write route %s in writeRequests", pattern)
			}
			h, secrets := auditHarness(t)
			before := len(h.auditLog(t))
			resp, body := h.do(t, method, req.path, testToken, req.body)
			if resp.StatusCode >= 300 {
				t.Fatalf("%s %s = %d %s", method, req.path, resp.StatusCode, body)
			}
			var issued admin.IssuedKey
			if json.Unmarshal([]byte(body), &issued) == nil && issued.Key != "" {
				secrets = append(secrets, issued.Key)
			}
			log := h.auditLog(t)
			if len(log) != before+1 {
				t.Fatalf("audit log grew by %d entries, want 1", len(log)-before)
			}
			e := log[0]
			// A batch names its operation: keys.batch.disable.
			if e.Action != action && !strings.HasPrefix(e.Action, action+".") || e.Method != method || e.Path != req.path || e.TokenID != "admin" ||
				e.Remote != "127.0.0.1" || e.Status != resp.StatusCode || e.Error != "" || len(e.Targets) == 0 {
				t.Errorf("entry = %s %s %s by %s from %s, status %d %s, targets %v; want action %s, %s %s by admin from 127.0.0.1, status %d, targets",
					e.Action, e.Method, e.Path, e.TokenID, e.Remote, e.Status, e.Error, e.Targets, action, method, req.path, resp.StatusCode)
			}
			if e.After == nil || string(e.Before) == string(e.After) {
				t.Errorf("entry before = %s, after = %s; want the state the write changed", e.Before, e.After)
			}
			wantNoSecret(t, h, secrets)
		})
	}
}

// wantNoSecret fails if the audit log holds a key's plaintext or hash, or
// an admin token.
func wantNoSecret(t *testing.T, h *harness, secrets []string) {
	t.Helper()
	_, raw := h.do(t, http.MethodGet, "/admin/audit?limit=1000", testToken, "")
	for _, s := range secrets {
		for _, bad := range []string{s, authn.Hash(s), authn.Hash(s)[:16]} {
			if strings.Contains(raw, bad) {
				t.Errorf("the audit log holds a key's plaintext or hash:\n%s", raw)
			}
		}
	}
	for _, tok := range []string{testToken, testReadToken} {
		if strings.Contains(raw, tok) {
			t.Errorf("the audit log holds an admin token:\n%s", raw)
		}
	}
}

func TestAuditRecordsFailedWrites(t *testing.T) {
	h, _ := auditHarness(t)
	ctx := t.Context()
	if _, err := h.client.Revoke(ctx, "web-1"); err != nil {
		t.Fatal(err)
	}
	_, err := h.client.Enable(ctx, "web-1")
	wantAPIError(t, "Enable of a revoked key", err, http.StatusConflict, "key_transition_invalid")
	_, err = h.client.Disable(ctx, "nope")
	wantAPIError(t, "Disable of an unknown key", err, http.StatusNotFound, "not_found")

	log := h.auditLog(t)
	if len(log) < 2 {
		t.Fatalf("audit log = %+v, want the two failed writes", log)
	}
	unknown, revoked := log[0], log[1]
	if unknown.Status != http.StatusNotFound || unknown.Error != "not_found" || unknown.Action != "keys.disable" ||
		string(unknown.Before) != `{"nope":null}` || string(unknown.After) != `{"nope":null}` {
		t.Errorf("entry of the unknown key = %+v", unknown)
	}
	if revoked.Status != http.StatusConflict || revoked.Error != "key_transition_invalid" || revoked.Action != "keys.enable" ||
		string(revoked.Before) != string(revoked.After) || !strings.Contains(string(revoked.After), `"status":"revoked"`) {
		t.Errorf("entry of the revoked key = %+v, want it unchanged and revoked", revoked)
	}
}

func TestAuditFilters(t *testing.T) {
	h, _ := auditHarness(t)
	ctx := t.Context()
	for _, id := range []string{"web-1", "pending-1"} {
		if _, err := h.client.Disable(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		give adminclient.AuditQuery
		want []string // actions and targets, newest first
	}{
		{"Action", adminclient.AuditQuery{Action: "keys.disable"}, []string{"keys.disable pending-1", "keys.disable web-1"}},
		{"Target", adminclient.AuditQuery{Target: "web-1"}, []string{"keys.disable web-1", "keys.create web-1"}},
		{"Limit", adminclient.AuditQuery{Limit: 1}, []string{"keys.disable pending-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, err := h.client.Audit(ctx, tt.give)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Action+" "+strings.Join(e.Targets, ","))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Audit(%+v) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
	resp, body := h.do(t, http.MethodGet, "/admin/audit?limit=0", testToken, "")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("limit=0: %d %s, want 400", resp.StatusCode, body)
	}
}

func TestRoles(t *testing.T) {
	h, _ := auditHarness(t)
	entries := len(h.auditLog(t))
	tests := []struct {
		name, method, path, token string
		wantStatus                int
		wantCode                  string
	}{
		{"ReadTokenMayGet", http.MethodGet, "/admin/keys", testReadToken, http.StatusOK, ""},
		{"ReadTokenMayReadTheAuditLog", http.MethodGet, "/admin/audit", testReadToken, http.StatusOK, ""},
		{"ReadTokenMayNotPost", http.MethodPost, "/admin/keys/web-1/disable", testReadToken, http.StatusForbidden, "admin_forbidden"},
		{"ReadTokenMayNotPut", http.MethodPut, "/admin/catalog", testReadToken, http.StatusForbidden, "admin_forbidden"},
		{"ReadTokenUnknownPathIs404", http.MethodPost, "/admin/nope", testReadToken, http.StatusNotFound, "not_found"},
		{"WriteTokenMayPost", http.MethodPost, "/admin/keys/web-1/disable", testToken, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, tt.method, tt.path, tt.token, "")
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantCode == "" {
				return
			}
			e := decodeError(t, body)
			if e.Error.Code != tt.wantCode {
				t.Errorf("code = %q, want %q", e.Error.Code, tt.wantCode)
			}
			if tt.wantCode == "admin_forbidden" && !strings.Contains(e.Error.Message, `admin token "dashboard" has the role read, which may only GET`) {
				t.Errorf("message = %q, want it to name the token and its role", e.Error.Message)
			}
		})
	}
	k, err := h.client.Key(t.Context(), "web-1")
	if err != nil || k.Status != "disabled" {
		t.Fatalf("web-1 = %+v, %v; want disabled by the write token only", k, err)
	}
	log := h.auditLog(t)
	if len(log) != entries+1 || log[0].TokenID != "admin" {
		t.Errorf("audit log grew by %d entries (newest %+v), want 1: the write token's; refused writes are not recorded", len(log)-entries, log[0])
	}
}
