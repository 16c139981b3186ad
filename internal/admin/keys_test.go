package admin_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/authn"
)

// wantAPIError fails unless err is an *adminclient.APIError with the status and code.
func wantAPIError(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	ae, ok := errors.AsType[*adminclient.APIError](err)
	if !ok || ae.Status != status || ae.Code != code {
		t.Errorf("%s error = %v, want an *APIError %d %s", what, err, status, code)
	}
}

// authenticates reports whether the keyring accepts the plaintext now.
func authenticates(kr *authn.Keyring, plaintext string) bool {
	_, err := kr.Authenticate(plaintext)
	return err == nil
}

func TestKeyLifecycle(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()

	created, err := h.client.CreateKey(ctx, admin.KeySpec{
		ID: "web-1", Name: "web app", Tenant: "web", Models: []string{"fast", "smart"}, Priority: "interactive", ExpiresIn: "24h",
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := created.Record
	if !strings.HasPrefix(created.Key, authn.KeyPrefix) || rec.ID != "web-1" || rec.Status != sluice.KeyActive ||
		rec.Tenant != "web" || rec.Priority != "interactive" || !slices.Equal(rec.Models, []string{"fast", "smart"}) {
		t.Fatalf("CreateKey = %+v", created)
	}
	if until := time.Until(rec.ExpiresAt); until < 23*time.Hour || until > 25*time.Hour {
		t.Errorf("expires_at = %v, want about 24h from now", rec.ExpiresAt)
	}
	if !strings.HasPrefix(created.Key, strings.TrimSuffix(rec.Prefix, "…")) {
		t.Errorf("prefix %q is not the start of the key", rec.Prefix)
	}
	if !authenticates(h.keys, created.Key) {
		t.Fatal("the created key does not authenticate")
	}

	list, err := h.client.ListKeys(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "web-1" {
		t.Fatalf("ListKeys = %+v, %v; want web-1", list, err)
	}

	k, err := h.client.Disable(ctx, "web-1")
	if err != nil || k.Status != sluice.KeyDisabled {
		t.Fatalf("Disable = %+v, %v; want disabled", k, err)
	}
	if authenticates(h.keys, created.Key) {
		t.Error("a disabled key authenticates")
	}

	k, err = h.client.Enable(ctx, "web-1")
	if err != nil || k.Status != sluice.KeyActive {
		t.Fatalf("Enable = %+v, %v; want active", k, err)
	}
	if !authenticates(h.keys, created.Key) {
		t.Error("an enabled key does not authenticate")
	}

	k, err = h.client.Expire(ctx, "web-1", admin.Expiry{In: "1h"})
	if err != nil || k.Status != sluice.KeyActive || time.Until(k.ExpiresAt) > time.Hour || time.Until(k.ExpiresAt) < 59*time.Minute {
		t.Fatalf("Expire(in 1h) = %+v, %v; want active, expiring in 1h", k, err)
	}
	k, err = h.client.Expire(ctx, "web-1", admin.Expiry{Never: true})
	if err != nil || !k.ExpiresAt.IsZero() {
		t.Fatalf("Expire(never) = %+v, %v; want no expiry", k, err)
	}

	k, err = h.client.SetModels(ctx, "web-1", []string{"fast"})
	if err != nil || !slices.Equal(k.Models, []string{"fast"}) {
		t.Fatalf("SetModels(fast) = %+v, %v", k, err)
	}
	k, err = h.client.SetModels(ctx, "web-1", nil)
	if err != nil || len(k.Models) != 0 {
		t.Fatalf("SetModels(nil) = %+v, %v; want every alias", k, err)
	}

	rotated, err := h.client.Rotate(ctx, "web-1")
	if err != nil || rotated.Key == created.Key || !strings.HasPrefix(rotated.Key, authn.KeyPrefix) {
		t.Fatalf("Rotate = %+v, %v; want a new key", rotated, err)
	}
	if authenticates(h.keys, created.Key) {
		t.Error("the old plaintext authenticates after rotate")
	}
	if !authenticates(h.keys, rotated.Key) {
		t.Error("the rotated plaintext does not authenticate")
	}

	k, err = h.client.Revoke(ctx, "web-1")
	if err != nil || k.Status != sluice.KeyRevoked {
		t.Fatalf("Revoke = %+v, %v; want revoked", k, err)
	}
	if authenticates(h.keys, rotated.Key) {
		t.Error("a revoked key authenticates")
	}
	_, err = h.client.Enable(ctx, "web-1")
	wantAPIError(t, "Enable(revoked)", err, http.StatusConflict, "key_transition_invalid")
	_, err = h.client.Rotate(ctx, "web-1")
	wantAPIError(t, "Rotate(revoked)", err, http.StatusConflict, "key_transition_invalid")
	_, err = h.client.Key(ctx, "missing")
	wantAPIError(t, "Key(missing)", err, http.StatusNotFound, "not_found")
	_, err = h.client.CreateKey(ctx, admin.KeySpec{ID: "web-1", Name: "again", Tenant: "web"})
	wantAPIError(t, "CreateKey(duplicate)", err, http.StatusConflict, "key_conflict")

	logs := h.logs.String()
	for _, action := range []string{"keys.create", "keys.disable", "keys.enable", "keys.expire", "keys.models", "keys.rotate", "keys.revoke"} {
		if !strings.Contains(logs, `"action":"`+action+`","key_id":"web-1"`) {
			t.Errorf("no log line for %s of web-1", action)
		}
	}
}

func TestExpireNowAndPending(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	created, err := h.client.CreateKey(ctx, admin.KeySpec{Name: "n", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Record.ID, "key_") {
		t.Errorf("generated ID = %q, want key_…", created.Record.ID)
	}
	k, err := h.client.Expire(ctx, created.Record.ID, admin.Expiry{})
	if err != nil || k.Status != sluice.KeyExpired {
		t.Fatalf("Expire(now) = %+v, %v; want expired", k, err)
	}
	if shown, err := h.client.Key(ctx, created.Record.ID); err != nil || shown.Status != sluice.KeyExpired {
		t.Errorf("Key after expire = %+v, %v; want status expired", shown, err)
	}
	if authenticates(h.keys, created.Key) {
		t.Error("an expired key authenticates")
	}

	pending, err := h.client.CreateKey(ctx, admin.KeySpec{Name: "p", Tenant: "t", Pending: true})
	if err != nil || pending.Record.Status != sluice.KeyPending {
		t.Fatalf("CreateKey(pending) = %+v, %v", pending, err)
	}
	if authenticates(h.keys, pending.Key) {
		t.Error("a pending key authenticates")
	}
	if k, err := h.client.Enable(ctx, pending.Record.ID); err != nil || k.Status != sluice.KeyActive || !authenticates(h.keys, pending.Key) {
		t.Errorf("Enable(pending) = %+v, %v; want an active key that authenticates", k, err)
	}
}

// TestPlaintextShownOnce checks that a plaintext key appears in the create
// and rotate answers and nowhere else: not in list or show, not in the log,
// and that no answer carries the stored hash.
func TestPlaintextShownOnce(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	resp, body := h.do(t, http.MethodPost, "/admin/keys", testToken, `{"id":"k1","name":"n","tenant":"t"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create status = %d (%s), want 201", resp.StatusCode, body)
	}
	rotated, err := h.client.Rotate(ctx, "k1") // plaintext #2
	if err != nil {
		t.Fatal(err)
	}
	first := body[strings.Index(body, authn.KeyPrefix):]
	first = first[:strings.IndexByte(first, '"')]
	secrets := []string{first, rotated.Key}
	stored, err := h.keys.Load(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/admin/keys", ""},
		{"GET", "/admin/keys/k1", ""},
		{"GET", "/admin/status", ""},
		{"POST", "/admin/keys/k1/disable", ""},
		{"POST", "/admin/keys/k1/enable", ""},
		{"POST", "/admin/keys/k1/expire", `{"in":"1h"}`},
		{"PUT", "/admin/keys/k1/models", `{"models":["fast"]}`},
	} {
		_, b := h.do(t, r.method, r.path, testToken, r.body)
		answers = append(answers, b)
	}
	logs := h.logs.String()
	for i, s := range secrets {
		for _, a := range answers {
			if strings.Contains(a, s) {
				t.Errorf("plaintext #%d appears in %q", i, a)
			}
		}
		if strings.Contains(logs, s) {
			t.Errorf("plaintext #%d appears in the log", i)
		}
	}
	for _, a := range append(answers, body) {
		if strings.Contains(a, stored.Hash) || strings.Contains(a, `"hash"`) {
			t.Errorf("the key hash appears in %q", a)
		}
	}
	if strings.Contains(logs, stored.Hash) {
		t.Error("the key hash appears in the log")
	}
	if !strings.Contains(logs, `"action":"keys.create","key_id":"k1"`) {
		t.Errorf("the create was not logged; log:\n%s", logs)
	}
}

// everySetting is a KeySettings with every field set.
var everySetting = admin.KeySettings{
	Labels:     map[string]string{"team": "search"},
	Policy:     admin.KeyPolicy{Mode: "preferred", Accounts: []string{"org-1"}, Fallback: "any", Wait: sluice.Duration(2 * time.Second)},
	Limits:     admin.KeyLimits{RPM: 60, TPM: 6000, MaxInflight: 2, DailyTokens: 100000},
	UserLimits: admin.KeyLimits{RPM: 6, MaxInflight: 1},
	Task:       "chat", Tasks: []string{"batch"}, Paths: []string{"chat"}, ServiceTiers: []string{"flex"}, OnLimit: "refuse",
	Assert: []string{"user", "profile"}, TraceContent: true,
}

func TestKeyCarriesEverySetting(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	created, err := h.client.CreateKey(ctx, admin.KeySpec{ID: "full", Name: "full", Tenant: "web", KeySettings: everySetting})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(everySetting, created.Record.KeySettings); diff != "" || created.Record.Source != "api" {
		t.Errorf("created record (source %q) settings (-want +got):\n%s", created.Record.Source, diff)
	}
	stored, _ := h.keys.Load(ctx, "full")
	if stored.Policy.Wait.D() != 2*time.Second || stored.OnLimit != sluice.OnLimitRefuse || stored.Labels["team"] != "search" {
		t.Errorf("stored key = %+v, want the settings as given", stored)
	}

	tier, none := []string{"priority"}, admin.KeyLimits{}
	updated, err := h.client.UpdateKey(ctx, "full", admin.KeyChange{ServiceTiers: &tier, Limits: &none})
	if err != nil {
		t.Fatal(err)
	}
	want := everySetting
	want.ServiceTiers, want.Limits = tier, none
	if diff := cmp.Diff(want, updated.KeySettings); diff != "" {
		t.Errorf("updated settings (-want +got):\n%s", diff)
	}
	resp, body := h.do(t, http.MethodPatch, "/admin/keys/full", testToken, `{"policy":{"wait":"soon"}}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "invalid_request") || !strings.Contains(body, `invalid duration \"soon\"`) {
		t.Errorf("PATCH with a bad wait = %d %s, want 400 invalid_request naming the duration", resp.StatusCode, body)
	}
}

func TestCatalogKeysAreListedReadOnly(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	h.keys.SetStatic([]*sluice.Key{{ID: "from-catalog", Hash: "h", Status: sluice.KeyActive, Static: true, KeySettings: sluice.KeySettings{Labels: map[string]string{"team": "a"}}}})
	list, err := h.client.ListKeys(ctx)
	if err != nil || len(list) != 1 || list[0].Source != "catalog" || !list[0].Static || list[0].Labels["team"] != "a" {
		t.Fatalf("ListKeys = %+v, %v; want the catalog's key, marked so, with its labels", list, err)
	}
	name := "renamed"
	_, err = h.client.UpdateKey(ctx, "from-catalog", admin.KeyChange{Name: &name})
	wantAPIError(t, "UpdateKey(catalog key)", err, http.StatusConflict, "key_read_only")
	_, err = h.client.Disable(ctx, "from-catalog")
	wantAPIError(t, "Disable(catalog key)", err, http.StatusConflict, "key_read_only")
}

// TestListKeysPages: pages of GET /admin/keys walk the whole list in its
// order, with the total and the next page's after; without limit or
// after it still answers every key.
func TestListKeysPages(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"k1", "k2", "k3", "k4", "k5"} {
		if _, err := h.client.CreateKey(t.Context(), admin.KeySpec{ID: id, Name: id, Tenant: "web"}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := h.client.ListKeys(t.Context())
	if err != nil || len(all) != 5 {
		t.Fatalf("ListKeys = %d keys, %v; want 5", len(all), err)
	}
	var walked []string
	after := ""
	for range 5 {
		keys, total, next, err := h.client.KeysPage(t.Context(), "", after, 2)
		if err != nil || total != 5 {
			t.Fatalf("KeysPage(%q, 2) total %d, %v; want 5", after, total, err)
		}
		for _, k := range keys {
			walked = append(walked, k.ID)
		}
		if next == "" {
			break
		}
		if next != keys[len(keys)-1].ID {
			t.Errorf("next page after %q, want the page's last key %s", next, keys[len(keys)-1].ID)
		}
		after = next
	}
	var want []string
	for _, k := range all {
		want = append(want, k.ID)
	}
	if !cmp.Equal(walked, want) {
		t.Errorf("pages walked %v, want %v", walked, want)
	}
	resp, _ := h.do(t, http.MethodGet, "/admin/keys", testToken, "")
	if got := resp.Header.Get(admin.TotalCountHeader); got != "5" || resp.Header.Get(admin.NextAfterHeader) != "" {
		t.Errorf("GET /admin/keys: total %q, next %q; want 5 and none", got, resp.Header.Get(admin.NextAfterHeader))
	}
	for _, c := range []struct{ path, names string }{
		{"/admin/keys?after=nobody", "after"}, {"/admin/keys?limit=0", "limit"}, {"/admin/keys?limit=1001", "limit"},
	} {
		resp, body := h.do(t, http.MethodGet, c.path, testToken, "")
		if e := decodeError(t, body); resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(e.Error.Message, c.names+" ") {
			t.Errorf("GET %s = %d %+v, want 400 naming %s", c.path, resp.StatusCode, e.Error, c.names)
		}
	}
	code, out, errOut := h.runCLI(t, "keys", "list", "--limit", "2", "--after", want[1])
	if code != 0 || !strings.Contains(out, want[2]) || strings.Contains(out, want[1]+" ") ||
		!strings.Contains(out, "5 keys in all; next page: --after "+want[3]) {
		t.Errorf("keys list --limit 2 --after %s = %d\n%s%s", want[1], code, out, errOut)
	}
}
