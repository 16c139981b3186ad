package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestCatalogRedactsPasswords(t *testing.T) {
	h := newHarness(t)
	const doc = "version: 1\n" +
		"state: {backend: redis, redis: {url: \"redis://default:redis-PASSWORD-1@cache:6379/0\"}}\n" +
		"database:\n  url: postgres://sluice:db-PASSWORD-2@db:5432/sluice?sslmode=disable&password=db-PASSWORD-3\n"
	if _, err := h.catalog.Apply(t.Context(), []byte(doc), 0, false, ""); err != nil {
		t.Fatal(err)
	}
	resp, body := h.do(t, http.MethodGet, "/admin/catalog", testToken, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/catalog = %d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "PASSWORD") {
		t.Errorf("GET /admin/catalog shows a password:\n%s", body)
	}
	if want := "postgres://sluice:REDACTED@db:5432/sluice?sslmode=disable&password=REDACTED"; !strings.Contains(body, want) {
		t.Errorf("GET /admin/catalog =\n%s\nwant it to contain %s", body, want)
	}
}
