package app_test

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// staleTemplate is fastOnEpA with one catalog key and a key store
// staleness bound of 2s.
const staleTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  key_staleness: 2s
` + fastOnEpA + `keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// scrape reads the value of the metric name (without labels) from h's /metrics.
func scrape(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + h.gw.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s is not exported", name)
	return 0
}

// TestStaleKeyStoreFailsClosed checks that a gateway whose key store
// cannot be read (its keys table is renamed away, in this test's own
// PostgreSQL schema) answers 503 state_unavailable with a Retry-After
// once its view is older than server.key_staleness — the catalog's keys
// too — that its age metric passes the bound and its failure counter
// grows, and that it serves again once the store is back.
func TestStaleKeyStoreFailsClosed(t *testing.T) {
	pg := testenv.Postgres(t)
	h := newHarnessWith(t, onPostgres(staleTemplate, pg, t.TempDir()), "{backend: memory}", simulator.Options{})
	db, err := sqldb.Open(t.Context(), pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	schema, _ := url.Parse(pg)
	table := schema.Query().Get("search_path") + ".keys"

	if status, code := chatAs(t, h, keyWeb); status != http.StatusOK {
		t.Fatalf("with the store up: %d %s, want 200", status, code)
	}
	if _, err := db.Exec(t.Context(), `ALTER TABLE `+table+` RENAME TO keys_away`); err != nil {
		t.Fatal(err)
	}
	broken := time.Now()
	// Within the bound the last view still judges.
	if status, code := chatAs(t, h, keyWeb); status != http.StatusOK {
		t.Errorf("just after the store broke: %d %s, want 200 (within the bound)", status, code)
	}
	eventually(t, 5*time.Second, "503 state_unavailable past the bound", func() bool {
		status, code := chatAs(t, h, keyWeb)
		return status == http.StatusServiceUnavailable && code == "state_unavailable"
	})
	if waited := time.Since(broken); waited < 1*time.Second {
		t.Errorf("refused %v after the store broke, before the 2s bound could pass", waited)
	}
	status, header, _ := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody)
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" {
		t.Errorf("stale: %d Retry-After %q, want 503 with a Retry-After", status, header.Get("Retry-After"))
	}
	if age := scrape(t, h, "sluice_key_store_age_seconds"); age <= 2 {
		t.Errorf("sluice_key_store_age_seconds = %v, want past the 2s bound", age)
	}
	failures := scrape(t, h, "sluice_key_store_refresh_failures_total")
	eventually(t, 3*time.Second, "the failure counter grows", func() bool {
		return scrape(t, h, "sluice_key_store_refresh_failures_total") > failures
	})
	if failures < 1 {
		t.Errorf("sluice_key_store_refresh_failures_total = %v, want at least 1", failures)
	}

	if _, err := db.Exec(t.Context(), `ALTER TABLE `+schema.Query().Get("search_path")+`.keys_away RENAME TO keys`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "served again once the store is back", func() bool {
		status, _ := chatAs(t, h, keyWeb)
		return status == http.StatusOK
	})
	if age := scrape(t, h, "sluice_key_store_age_seconds"); age > 2 {
		t.Errorf("sluice_key_store_age_seconds = %v once the store is back, want under the bound", age)
	}
}
