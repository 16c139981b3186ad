package admin_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
)

// TestListKeysBySelector: GET /admin/keys?selector= lists the keys a batch
// on the same selector matches (catalog and revoked keys included: they
// are listed, a batch skips them), through the client and the CLI; a bad
// selector is refused as a batch's is; no selector lists every key.
func TestListKeysBySelector(t *testing.T) {
	h := batchHarness(t)
	ids := func(list []admin.KeyRecord) []string {
		var out []string
		for _, k := range list {
			out = append(out, k.ID)
		}
		slices.Sort(out)
		return out
	}
	for selector, want := range map[string][]string{
		"team=web":          {"cat-1", "web-1", "web-2", "web-3"},
		"team=web,env=prod": {"web-1"},
		"team in (api)":     {"api-1"},
		"!team":             nil,
	} {
		got, err := h.client.SelectKeys(t.Context(), selector)
		if err != nil {
			t.Fatalf("SelectKeys(%q): %v", selector, err)
		}
		if !slices.Equal(ids(got), want) {
			t.Errorf("SelectKeys(%q) = %v, want %v", selector, ids(got), want)
		}
	}
	all, err := h.client.ListKeys(t.Context())
	if err != nil || len(all) != 5 {
		t.Errorf("ListKeys = %d keys, %v; want all 5", len(all), err)
	}
	for _, bad := range []string{"", "team in (", "a=b,,c"} {
		resp, body := h.do(t, http.MethodGet, "/admin/keys?selector="+strings.NewReplacer(" ", "+", "(", "%28", ",", "%2C").Replace(bad), testToken, "")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "selector") {
			t.Errorf("selector %q: %d %s, want 400 naming the selector", bad, resp.StatusCode, body)
		}
	}
	code, out, errOut := h.runCLI(t, "keys", "list", "--selector", "team=web,env=prod")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "web-1 ") {
		t.Errorf("keys list --selector = %d %q (stderr %q), want a header and web-1", code, out, errOut)
	}
}

// TestListKeysBySelectorInPages: a selector with limit pages through the
// matching keys only, counting them in X-Total-Count.
func TestListKeysBySelectorInPages(t *testing.T) {
	h := batchHarness(t)
	var got []string
	after, pages := "", 0
	for {
		keys, total, next, err := h.client.KeysPage(t.Context(), "team=web", after, 3)
		if err != nil || total != 4 {
			t.Fatalf("KeysPage(team=web, %q, 3) total %d, %v; want the 4 that match", after, total, err)
		}
		for _, k := range keys {
			got = append(got, k.ID)
		}
		pages++
		if next == "" {
			break
		}
		after = next
	}
	slices.Sort(got)
	if want := []string{"cat-1", "web-1", "web-2", "web-3"}; pages != 2 || !slices.Equal(got, want) {
		t.Errorf("pages of 3 of team=web: %v in %d pages, want %v in 2", got, pages, want)
	}
	if resp, body := h.do(t, http.MethodGet, "/admin/keys?selector=team%3Dweb&after=api-1", testToken, ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("after a key the selector does not match = %d %s, want 400", resp.StatusCode, body)
	}
}
