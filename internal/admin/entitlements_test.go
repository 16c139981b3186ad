package admin_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/catalog/memcatalog"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memstore"
)

// catalogEntitlements are entitlements in memory, checked against a
// catalog with the profiles free and paid and the pool premium.
type catalogEntitlements struct{ memstore.Entitlements }

func (*catalogEntitlements) CheckEntitlement(e store.Entitlement) error {
	var errs []error
	if e.Profile != "free" && e.Profile != "paid" {
		errs = append(errs, fmt.Errorf("profile: unknown profile %q", e.Profile))
	}
	if e.Pool != "" && e.Pool != "premium" {
		errs = append(errs, fmt.Errorf("pool: unknown pool %q", e.Pool))
	}
	return errors.Join(errs...)
}

// Profiles are free (one in flight, 10 RPM, one parse in flight and 20 a
// day), the default of tenant acme, and paid (priority bonus 1, through
// the pool premium).
func (*catalogEntitlements) Profiles() ([]config.Profile, []config.Tenant) {
	return []config.Profile{
			{ID: "free", UserLimits: config.Limits{MaxInflight: 1, RPM: 10}, TaskLimits: map[string]config.TaskLimits{"parse": {MaxInflight: 1, DailyRequests: 20}}},
			{ID: "paid", PriorityBonus: 1, Pool: "premium"},
		}, []config.Tenant{
			{ID: "web"}, {ID: "acme", DefaultProfile: "free"},
		}
}

// harnessEntitlements are the harness's: web/alice is entitled to free.
func harnessEntitlements(t *testing.T) *catalogEntitlements {
	ents := &catalogEntitlements{}
	alice := store.Entitlement{EndUser: store.EndUser{Tenant: "web", User: "alice"}, Profile: "free"}
	if err := ents.PutEntitlements(t.Context(), []store.Entitlement{alice}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return ents
}

func newEntitlementsServer(t *testing.T) (*adminclient.Client, *catalogEntitlements, string) {
	t.Helper()
	audit := new(memcatalog.Store)
	ents := &catalogEntitlements{}
	url := newServer(t, admin.Options{Tokens: testTokens, Audit: audit, Keys: authn.NewKeyring(audit), Entitlements: ents})
	return adminclient.NewClient(url, testToken), ents, url
}

// TestEntitlementsBulk sets hundreds of entitlements in one call (after a
// dry run that changes nothing), changes one, refuses a call with
// problems as a whole, deletes, and audits each write.
func TestEntitlementsBulk(t *testing.T) {
	cl, ents, _ := newEntitlementsServer(t)
	ctx := t.Context()
	until := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	var many []admin.Entitlement
	for i := range 300 {
		many = append(many, admin.Entitlement{Tenant: "acme", User: fmt.Sprintf("u%03d", i), Profile: "paid", ValidUntil: until})
	}
	res, err := cl.PutEntitlements(ctx, admin.EntitlementsPut{Entitlements: many, DryRun: true})
	if err != nil || *res != (admin.EntitlementsResult{DryRun: true, Created: 300}) {
		t.Fatalf("dry run = %+v, %v; want 300 created", res, err)
	}
	if v, _ := ents.EntitlementsVersion(ctx); v != 0 {
		t.Fatalf("the dry run wrote (version %d)", v)
	}
	if res, err = cl.PutEntitlements(ctx, admin.EntitlementsPut{Entitlements: many}); err != nil || *res != (admin.EntitlementsResult{Created: 300}) {
		t.Fatalf("put = %+v, %v; want 300 created", res, err)
	}
	listed, err := cl.Entitlements(ctx, "acme", "", "paid")
	if err != nil || len(listed) != 300 || !listed[0].ValidUntil.Equal(until) || !listed[0].ValidNow || listed[0].UpdatedAt.IsZero() {
		t.Fatalf("list = %d entitlements (first %+v), %v; want 300 valid now until %s", len(listed), listed[0], err, until)
	}

	many[7].Profile, many[7].Pool = "free", "premium"
	if res, err = cl.PutEntitlements(ctx, admin.EntitlementsPut{Entitlements: many}); err != nil || *res != (admin.EntitlementsResult{Replaced: 1, Unchanged: 299}) {
		t.Fatalf("second put = %+v, %v; want 1 replaced, 299 unchanged", res, err)
	}
	if got, _ := cl.Entitlements(ctx, "acme", "u007", ""); len(got) != 1 || got[0].Profile != "free" || got[0].Pool != "premium" {
		t.Errorf("u007 = %+v, want free in pool premium", got)
	}

	bad := []admin.Entitlement{
		{Tenant: "acme", User: "new", Profile: "paid"},
		{Tenant: "acme", User: "x", Profile: "gold", Pool: "nowhere"},
		{Tenant: "acme", User: "new", Profile: "free"},
		{Tenant: "acme", User: "y", Profile: "free", ValidFrom: until, ValidUntil: until},
		{Tenant: "", User: "z", Profile: "free"},
	}
	_, err = cl.PutEntitlements(ctx, admin.EntitlementsPut{Entitlements: bad})
	wantAPIError(t, "put with problems", err, http.StatusBadRequest, "invalid_request")
	for _, want := range []string{`entitlements[1]: profile: unknown profile "gold"`, `pool: unknown pool "nowhere"`,
		"entitlements[2]: the same user as entitlements[0]", "entitlements[3]: valid_until must be after valid_from", "entitlements[4]: tenant, user and profile are required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got, _ := cl.Entitlements(ctx, "acme", "new", ""); len(got) != 0 {
		t.Errorf("a refused put stored %+v", got)
	}

	del := admin.EntitlementsDelete{Users: []admin.EndUserRef{{Tenant: "acme", User: "u001"}, {Tenant: "acme", User: "nobody"}}}
	if res, err = cl.DeleteEntitlements(ctx, del); err != nil || *res != (admin.EntitlementsResult{Deleted: 1, Unchanged: 1}) {
		t.Fatalf("delete = %+v, %v; want 1 deleted, 1 unchanged", res, err)
	}
	if got, _ := cl.Entitlements(ctx, "acme", "", ""); len(got) != 299 {
		t.Errorf("after delete: %d entitlements, want 299", len(got))
	}

	entries, err := cl.Audit(ctx, adminclient.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, fmt.Sprintf("%s %d %d", e.Action, e.Status, len(e.Targets)))
	}
	want := []string{"entitlements.delete 200 1", "entitlements.put 400 0", "entitlements.put 200 1", "entitlements.put 200 300", "entitlements.put.dry_run 200 300"}
	if strings.Join(actions, "; ") != strings.Join(want, "; ") {
		t.Errorf("audit (newest first) = %q, want %q", actions, want)
	}
	if e := entries[2]; !bytes.Contains(e.Before, []byte(`"profile":"paid"`)) || !bytes.Contains(e.After, []byte(`"profile":"free"`)) || e.Targets[0] != "acme/u007" {
		t.Errorf("audit of the change = targets %v, before %s, after %s; want acme/u007 paid → free", e.Targets, e.Before, e.After)
	}
}

// TestProfiles: GET /admin/profiles shows the serving catalog's profiles
// with their limits, task limits, bonus and pool, and the tenants each is
// the default of.
func TestProfiles(t *testing.T) {
	cl, _, _ := newEntitlementsServer(t)
	got, err := cl.Profiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []admin.Profile{
		{ID: "free", UserLimits: config.Limits{MaxInflight: 1, RPM: 10}, TaskLimits: map[string]admin.TaskLimits{"parse": {MaxInflight: 1, DailyRequests: 20}},
			DefaultFor: []string{"acme"}},
		{ID: "paid", TaskLimits: map[string]admin.TaskLimits{}, PriorityBonus: 1, Pool: "premium", DefaultFor: []string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("profiles = %+v, want %+v", got, want)
	}
}

// TestCLIEntitlements sets, lists and deletes entitlements, and lists the
// profiles, with the CLI.
func TestCLIEntitlements(t *testing.T) {
	_, _, url := newEntitlementsServer(t)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		env := map[string]string{adminclient.EnvAdminURL: url, adminclient.EnvAdminToken: testToken}
		code := adminclient.RunCLI(t.Context(), args, &out, &errOut, func(k string) string { return env[k] })
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := run("entitlements", "set", "acme", "bob", "paid", "--pool", "premium", "--until", "2030-01-01T00:00:00Z"); code != 0 || !strings.Contains(out, "created 1") {
		t.Fatalf("set = %d, %q, %q", code, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "ents.json")
	if err := os.WriteFile(file, []byte(`[{"tenant":"acme","user":"ann","profile":"free"},{"tenant":"acme","user":"bob","profile":"paid","pool":"premium","valid_until":"2030-01-01T00:00:00Z"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("entitlements", "put", "-f", file, "--dry-run"); code != 0 || !strings.Contains(out, "created 1, replaced 0, deleted 0, unchanged 1 (dry run") {
		t.Fatalf("put --dry-run = %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut := run("entitlements", "put", "-f", file); code != 0 || !strings.Contains(out, "created 1") {
		t.Fatalf("put = %d, %q, %q", code, out, errOut)
	}
	code, out, _ := run("entitlements", "list", "--tenant", "acme")
	for _, want := range []string{"ann", "bob", "premium", "2030-01-01T00:00:00Z", "valid"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("list = %d, %q; want %q in it", code, out, want)
		}
	}
	if code, out, errOut := run("entitlements", "delete", "acme", "ann", "bob"); code != 0 || !strings.Contains(out, "deleted 2") {
		t.Fatalf("delete = %d, %q, %q", code, out, errOut)
	}
	code, out, _ = run("entitlements", "profiles")
	for _, want := range []string{"free", "parse(inflight 1, day 20)", "acme", "paid", "premium"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("profiles = %d, %q; want %q in it", code, out, want)
		}
	}
	if code, _, errOut := run("entitlements", "set", "acme", "bob"); code != 2 || !strings.Contains(errOut, "missing argument") {
		t.Errorf("set without a profile = %d, %q; want a usage error", code, errOut)
	}
}
