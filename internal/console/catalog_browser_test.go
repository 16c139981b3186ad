package console_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// startStoredGateway starts a gateway without a catalog file, on a
// database of its own, and applies each version (made from consoleCatalog
// as filled for it) through PUT /admin/catalog, so that they are stored
// versions 1, 2 …, the last serving. The demo serves until the first.
func startStoredGateway(t *testing.T, versions ...func(doc string) string) *consoleGateway {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	db := filepath.Join(t.TempDir(), "sluice.db")
	gw, err := app.Start(t.Context(), app.Options{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", DatabaseURL: "sqlite://" + db,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv: func(k string) (string, bool) {
			if k == "SLUICE_ADMIN_TOKEN" { // the demo's, until our catalog's tokens serve
				return writeToken, true
			}
			v, ok := consoleEnv[k]
			return v, ok
		},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { gw.Close() })
	g := &consoleGateway{gw: gw, sim: sim}
	doc := fmt.Sprintf(consoleCatalog, db, srv.URL)
	for i, version := range versions {
		if status, body := adminCall(t, g, "PUT", "/admin/catalog", writeToken, version(doc), nil); status != http.StatusOK {
			t.Fatalf("apply catalog version %d: %d %s", i+1, status, body)
		}
	}
	return g
}

// asIs is consoleCatalog unchanged.
func asIs(doc string) string { return doc }

// TestBrowserCatalogStoredVersions: on a gateway whose catalog is stored,
// consoleCatalog then the same with org-b taking 3 in flight, the page
// lists both versions, shows a version's document and the diff
// between them, and rolls back to version 1 (after a confirmation), which
// the status then serves as version 3.
func TestBrowserCatalogStoredVersions(t *testing.T) {
	g := startStoredGateway(t, asIs, func(doc string) string {
		return strings.Replace(doc, "{id: org-b, max_inflight: 2", "{id: org-b, max_inflight: 3", 1)
	})
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "catalog", "#catalog-versions")
	waitText(t, ctx, "#catalog-status", "stored version 2", testWait)
	if n := eval[int](t, ctx, `document.querySelectorAll('#catalog-versions tbody tr').length`); n != 2 {
		t.Errorf("versions listed: %d, want 2", n)
	}
	run(t, ctx, "compare", chromedp.Click(chromedp.CSS(`#catalog-compare`)))
	waitText(t, ctx, "#catalog-diff", "+  - {id: org-b, max_inflight: 3", testWait)
	waitText(t, ctx, "#catalog-diff", "-  - {id: org-b, max_inflight: 2", testWait)
	checkA11y(t, ctx, "catalog")
	shot(t, ctx, "catalog-en")

	visit(t, ctx, "catalog/version/1", "#catalog-doc")
	waitText(t, ctx, "#catalog-doc", "{id: org-b, max_inflight: 2", testWait)

	visit(t, ctx, "catalog", "#catalog-versions")
	run(t, ctx, "roll back", chromedp.Click(chromedp.CSS(`#catalog-versions button[data-version="1"]`)))
	confirmYes(t, ctx)
	waitText(t, ctx, "#catalog-status", "stored version 3", testWait)
	waitText(t, ctx, "#catalog-versions", "(rollback to 1)", testWait)
	if _, doc := adminCall(t, g, "GET", "/admin/catalog", writeToken, "", nil); !strings.Contains(doc, "{id: org-b, max_inflight: 2") {
		t.Errorf("serving catalog after the rollback to 1 has not version 1's org-b:\n%s", doc)
	}

	inChinese(t, ctx, "catalog", "#catalog-status", "已存储版本 3")
}

// TestBrowserCatalogFromFileRefusesRollback: the test gateway reads its
// catalog from a file; the page says so and offers no rollback, and the
// admin API refuses one.
func TestBrowserCatalogFromFileRefusesRollback(t *testing.T) {
	g := startGateway(t)
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "catalog", "#catalog-file")
	waitText(t, ctx, "#catalog-file", "catalog.yaml", testWait)
	if n := eval[int](t, ctx, `document.querySelectorAll('#catalog-versions button').length`); n != 0 {
		t.Errorf("rollback buttons on a file-sourced catalog: %d, want none", n)
	}
	if status, body := adminCall(t, g, "POST", "/admin/catalog/versions/1/rollback", writeToken, "", nil); status < 400 {
		t.Errorf("rollback on a file-sourced catalog = %d %s, want it refused", status, body)
	}
	checkA11y(t, ctx, "catalog-file")
}
