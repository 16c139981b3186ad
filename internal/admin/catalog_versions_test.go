package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/catalog"
)

// The fake catalog's history is a real memcatalog store of what it applied.

func (f *fakeCatalog) Versions(ctx context.Context, limit int) ([]catalog.CatalogVersion, error) {
	return f.versions.ListCatalogVersions(ctx, limit)
}

func (f *fakeCatalog) LoadVersion(ctx context.Context, version int64) (catalog.CatalogVersion, error) {
	return f.versions.LoadCatalogVersion(ctx, version)
}

func (f *fakeCatalog) Rollback(ctx context.Context, version int64, by string) (admin.CatalogStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readOnly {
		return admin.CatalogStatus{}, fmt.Errorf("catalog is managed by /etc/sluice.yaml: %w", admin.ErrCatalogReadOnly)
	}
	v, err := f.versions.LoadCatalogVersion(ctx, version)
	if err != nil {
		return admin.CatalogStatus{}, err
	}
	return f.apply(ctx, catalog.CatalogVersion{Doc: v.Doc, By: by, RollbackOf: version}, 0)
}

func (f *fakeCatalog) Replicas(context.Context) ([]catalog.Replica, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replicas, nil
}

// applyAs applies doc through the API with token, and fails the test
// unless it is accepted.
func (h *harness) applyAs(t *testing.T, token, doc string) {
	t.Helper()
	if resp, body := h.do(t, http.MethodPut, "/admin/catalog", token, doc); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /admin/catalog = %d %s", resp.StatusCode, body)
	}
}

const (
	versionOne = "version: 1\nmodels: [{alias: fast}]\n"
	versionTwo = "version: 1\n# keys: none yet\nmodels: [{alias: smart}]\ndatabase: {url: 'postgres://u:db-PASSWORD@db/x'}\n"
)

// TestCatalogVersionRoutes: every apply is a numbered version with its
// author and line counts; any version reads back (passwords redacted),
// diffs against any other, and is restored by a rollback that stores a
// new version and is audited.
func TestCatalogVersionRoutes(t *testing.T) {
	h := newHarness(t)
	h.applyAs(t, testToken, versionOne)
	h.applyAs(t, testToken, versionTwo)

	vs, err := h.client.CatalogVersions(t.Context(), 0)
	if err != nil || len(vs) != 2 {
		t.Fatalf("CatalogVersions = %+v, %v; want 2", vs, err)
	}
	if v := vs[0]; v.Version != 2 || v.By != "admin" || v.Bytes != len(versionTwo) || v.LinesAdded != 3 || v.LinesRemoved != 1 || v.At.IsZero() {
		t.Errorf("newest version = %+v, want 2 by admin, %d bytes, +3 -1", v, len(versionTwo))
	}
	if v := vs[1]; v.Version != 1 || v.LinesAdded != 2 || v.LinesRemoved != 0 {
		t.Errorf("oldest version = %+v, want 1, +2 -0", v)
	}

	doc, err := h.client.CatalogVersionDoc(t.Context(), 2)
	if err != nil || strings.Contains(string(doc), "PASSWORD") || !strings.Contains(string(doc), "u:REDACTED@db") {
		t.Errorf("version 2 = %q, %v; want it with its password redacted", doc, err)
	}
	stored, err := h.client.CatalogDiff(t.Context(), 1, 2)
	if err != nil || strings.Contains(stored, "PASSWORD") || !strings.Contains(stored, "-models: [{alias: fast}]\n") ||
		!strings.Contains(stored, "+database: {url: 'postgres://u:REDACTED@db/x'}\n") {
		t.Errorf("diff 1 2 = %q, %v; want the stored diff, redacted", stored, err)
	}
	reversed, err := h.client.CatalogDiff(t.Context(), 2, 1)
	if err != nil || !strings.HasPrefix(reversed, "--- catalog@2\n+++ catalog@1\n") || !strings.Contains(reversed, "+models: [{alias: fast}]\n") {
		t.Errorf("diff 2 1 = %q, %v; want a diff computed from 2 to 1", reversed, err)
	}
	if same, err := h.client.CatalogDiff(t.Context(), 2, 2); err != nil || same != "" {
		t.Errorf("diff 2 2 = %q, %v; want empty", same, err)
	}

	st, err := h.client.RollbackCatalog(t.Context(), 1)
	if err != nil || st.StoredVersion != 3 || string(h.catalog.Status().Document) != versionOne {
		t.Fatalf("rollback to 1 = %+v, %v; want version 3 serving version 1's document", st, err)
	}
	vs, _ = h.client.CatalogVersions(t.Context(), 1)
	if len(vs) != 1 || vs[0].Version != 3 || vs[0].RollbackOf != 1 || vs[0].By != "admin" {
		t.Errorf("CatalogVersions(limit 1) after the rollback = %+v, want version 3, rollback of 1, by admin", vs)
	}
	entries, err := h.client.Audit(t.Context(), adminclient.AuditQuery{Action: "catalog.rollback"})
	if err != nil || len(entries) != 1 || entries[0].Status != http.StatusOK || entries[0].TokenID != "admin" ||
		len(entries[0].Targets) != 1 || entries[0].Targets[0] != "catalog" {
		t.Errorf("audit of the rollback = %+v, %v; want one catalog.rollback by admin on the catalog", entries, err)
	}
}

func TestCatalogVersionErrors(t *testing.T) {
	h := newHarness(t)
	h.applyAs(t, testToken, versionOne)
	tests := []struct {
		name, method, path, token string
		wantStatus                int
		wantCode                  string
	}{
		{"missing version", http.MethodGet, "/admin/catalog/versions/9", testToken, 404, "not_found"},
		{"not a number", http.MethodGet, "/admin/catalog/versions/latest", testToken, 400, "invalid_request"},
		{"version 0", http.MethodGet, "/admin/catalog/versions/0", testToken, 400, "invalid_request"},
		{"diff from a missing version", http.MethodGet, "/admin/catalog/versions/1/diff?from=7", testToken, 404, "not_found"},
		{"diff from a negative version", http.MethodGet, "/admin/catalog/versions/1/diff?from=-1", testToken, 400, "invalid_request"},
		{"bad limit", http.MethodGet, "/admin/catalog/versions?limit=0", testToken, 400, "invalid_request"},
		{"rollback to a missing version", http.MethodPost, "/admin/catalog/versions/9/rollback", testToken, 404, "not_found"},
		{"rollback with a read token", http.MethodPost, "/admin/catalog/versions/1/rollback", testReadToken, 403, "admin_forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, tt.method, tt.path, tt.token, "")
			if resp.StatusCode != tt.wantStatus || !strings.Contains(body, `"code":"`+tt.wantCode+`"`) {
				t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, resp.StatusCode, body, tt.wantStatus, tt.wantCode)
			}
		})
	}
	// A read token reads the history.
	if resp, body := h.do(t, http.MethodGet, "/admin/catalog/versions", testReadToken, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /admin/catalog/versions with a read token = %d %s", resp.StatusCode, body)
	}
	h.catalog.setReadOnly(true)
	resp, body := h.do(t, http.MethodPost, "/admin/catalog/versions/1/rollback", testToken, "")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "catalog_read_only") {
		t.Errorf("rollback of a file catalog = %d %s, want 409 catalog_read_only", resp.StatusCode, body)
	}
	if vs, _ := h.client.CatalogVersions(t.Context(), 0); len(vs) != 1 {
		t.Errorf("%d versions after the refused rollbacks, want 1", len(vs))
	}
}

// TestStatusListsReplicas: GET /admin/status and sluice status show every
// replica the catalog reports, marking the one that answered.
func TestStatusListsReplicas(t *testing.T) {
	h := newHarness(t)
	seen := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	h.catalog.mu.Lock()
	h.catalog.st.Replica = "gw-b"
	h.catalog.replicas = []catalog.Replica{
		{ID: "gw-a", Source: "store", Version: 4, Since: seen.Add(-time.Hour), SeenAt: seen,
			LastError: "credentials[0].secret_env: OPENAI_KEY is not set\nmodels[1]: …", LastErrorAt: seen.Add(-time.Minute)},
		{ID: "gw-b", Source: "store", Version: 5, Since: seen.Add(-time.Minute), SeenAt: seen},
	}
	h.catalog.mu.Unlock()

	resp, body := h.do(t, http.MethodGet, "/admin/status", testReadToken, "")
	var st admin.Status
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || len(st.Replicas) != 2 {
		t.Fatalf("GET /admin/status = %d %s, want two replicas", resp.StatusCode, body)
	}
	if r := st.Replicas[0]; r.ID != "gw-a" || r.Version != 4 || !r.SeenAt.Equal(seen) || !strings.HasPrefix(r.LastError, "credentials[0]") {
		t.Errorf("first replica = %+v, want gw-a at version 4 with its error", r)
	}
	code, out, errOut := h.runCLI(t, "status")
	if code != 0 || !strings.Contains(out, "Replicas:") || !strings.Contains(out, "* gw-b") ||
		!strings.Contains(out, "OPENAI_KEY is not set") || strings.Contains(out, "models[1]") {
		t.Errorf("sluice status = %d %q %q; want both replicas, gw-b marked, gw-a's first error line", code, out, errOut)
	}
}

// TestCLICatalog runs every catalog verb against the API.
func TestCLICatalog(t *testing.T) {
	h := newHarness(t)
	h.applyAs(t, testToken, versionOne)
	h.applyAs(t, testToken, versionTwo)

	code, out, errOut := h.runCLI(t, "catalog", "history")
	if code != 0 || !strings.Contains(out, "VERSION") || !strings.Contains(out, "+3 -1") || !strings.Contains(out, "admin") {
		t.Errorf("catalog history = %d %q %q", code, out, errOut)
	}
	code, out, _ = h.runCLI(t, "catalog", "show", "1")
	if code != 0 || out != versionOne {
		t.Errorf("catalog show 1 = %d %q, want %q", code, out, versionOne)
	}
	code, out, _ = h.runCLI(t, "catalog", "diff", "1", "2")
	if code != 0 || !strings.HasPrefix(out, "--- catalog@1\n+++ catalog@2\n") || strings.Contains(out, "PASSWORD") {
		t.Errorf("catalog diff 1 2 = %d %q", code, out)
	}
	code, out, _ = h.runCLI(t, "catalog", "diff", "1", "1")
	if code != 0 || !strings.Contains(out, "the same") {
		t.Errorf("catalog diff 1 1 = %d %q, want them the same", code, out)
	}
	code, out, errOut = h.runCLI(t, "catalog", "rollback", "1")
	if code != 0 || !strings.Contains(out, "stored version 3 with the document of version 1") {
		t.Errorf("catalog rollback 1 = %d %q %q", code, out, errOut)
	}
	code, out, _ = h.runCLI(t, "catalog", "history", "--json", "--limit", "1")
	var vs []admin.CatalogVersion
	if code != 0 || json.Unmarshal([]byte(out), &vs) != nil || len(vs) != 1 || vs[0].RollbackOf != 1 {
		t.Errorf("catalog history --json --limit 1 = %d %q, want version 3, rollback of 1", code, out)
	}
	code, _, errOut = h.runCLI(t, "catalog", "show", "8")
	if code != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("catalog show 8 = %d %q, want exit 1, not_found", code, errOut)
	}
	if code, out, _ := h.runCLI(t, "catalog", "show"); code != 0 || !strings.Contains(out, "alias: fast") {
		t.Errorf("catalog show (no version) = %d %q, want the serving document", code, out)
	}
	for _, args := range [][]string{{"catalog"}, {"catalog", "erase"}, {"catalog", "show", "x"}, {"catalog", "show", "1", "2"},
		{"catalog", "rollback", "0"}, {"catalog", "diff", "1"}, {"catalog", "diff", "1", "0"}} {
		if code, out, errOut := h.runCLI(t, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("RunCLI(%q) = %d %q %q, want a usage error", args, code, out, errOut)
		}
	}
}
