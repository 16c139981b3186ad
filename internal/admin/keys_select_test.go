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

// TestListKeysBySelectorInPages: a selector and a page together page
// through the selected keys only, with their count as the total.
func TestListKeysBySelectorInPages(t *testing.T) {
	h := batchHarness(t)
	all, err := h.client.SelectKeys(t.Context(), "team=web")
	if err != nil || len(all) != 4 {
		t.Fatalf("SelectKeys(team=web) = %d keys, %v; want 4", len(all), err)
	}
	var walked []string
	after := ""
	for range 4 {
		page, total, next, err := h.client.KeysPage(t.Context(), "team=web", after, 3)
		if err != nil || total != 4 {
			t.Fatalf("KeysPage(team=web, %q, 3): total %d, %v; want 4", after, total, err)
		}
		for _, k := range page {
			walked = append(walked, k.ID)
		}
		if after = next; after == "" {
			break
		}
	}
	var want []string
	for _, k := range all {
		want = append(want, k.ID)
	}
	if !slices.Equal(walked, want) {
		t.Errorf("pages of team=web walked %v, want %v", walked, want)
	}
	resp, body := h.do(t, http.MethodGet, "/admin/keys?selector=team%3Dapi&after="+want[0], testToken, "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "after") {
		t.Errorf("after a key the selector leaves out: %d %s, want 400 naming after", resp.StatusCode, body)
	}
}
