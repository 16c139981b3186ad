package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/simulator"
)

// TestAdminTokensAndAuditLog runs a gateway with a read token and a write
// token besides admin_token_env, and checks roles and the audit log in its
// database.
func TestAdminTokensAndAuditLog(t *testing.T) {
	template := strings.Replace(catalogTemplate, "  admin_token_env: ADMIN_TOKEN\n", `  admin_token_env: ADMIN_TOKEN
  admin_tokens:
    - {id: dashboard, secret_env: ADMIN_READ, role: read}
    - {id: deploy, secret_env: ADMIN_DEPLOY, role: write}
`, 1)
	h := newHarnessWith(t, template, "{backend: memory}", simulator.Options{})
	ctx := t.Context()
	base := "http://" + h.gw.AdminAddr()
	reader := adminclient.NewClient(base, testEnv["ADMIN_READ"])
	deployer := adminclient.NewClient(base, testEnv["ADMIN_DEPLOY"])
	operator := adminclient.NewClient(base, testEnv["ADMIN_TOKEN"])

	if _, err := reader.Accounts(ctx); err != nil {
		t.Fatalf("read token: Accounts = %v", err)
	}
	_, err := reader.CreateKey(ctx, admin.KeySpec{Name: "x", Tenant: "web"})
	if ae, ok := err.(*adminclient.APIError); !ok || ae.Status != http.StatusForbidden || ae.Code != "admin_forbidden" {
		t.Fatalf("read token: CreateKey = %v, want 403 admin_forbidden", err)
	}

	issued, err := deployer.CreateKey(ctx, admin.KeySpec{ID: "web-2", Name: "web", Tenant: "web",
		KeySettings: admin.KeySettings{Labels: map[string]string{"team": "web"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deployer.SetCredential(ctx, "cred-b1", "drain", false); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Batch(ctx, admin.Batch{Selector: "team=web", Operation: admin.BatchDisable}); err != nil {
		t.Fatal(err)
	}
	// The catalog's rules for keys hold in a dry run too.
	preview, err := operator.Batch(ctx, admin.Batch{Selector: "team=web", Operation: admin.BatchSetPolicy,
		Policy: &admin.KeyPolicy{Mode: "pool", Pool: "nope"}, DryRun: true})
	if err != nil || len(preview.Skipped) != 1 || !strings.Contains(preview.Skipped[0].Reason, `unknown pool "nope"`) {
		t.Fatalf("dry run of an unknown pool = %+v, %v; want web-2 skipped for it", preview, err)
	}
	_, err = operator.ApplyCatalog(ctx, []byte(h.catalog()), 0, false) // managed by the file: refused, and recorded
	if ae, ok := err.(*adminclient.APIError); !ok || ae.Code != "catalog_read_only" {
		t.Fatalf("ApplyCatalog = %v, want catalog_read_only", err)
	}

	entries, err := reader.Audit(ctx, adminclient.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.TokenID+" "+e.Action+" "+strings.Join(e.Targets, ",")+" "+e.Error)
	}
	want := []string{
		"admin catalog.apply catalog catalog_read_only",
		"admin keys.batch.set_policy.dry_run  ",
		"admin keys.batch.disable web-2 ",
		"deploy credentials.drain cred-b1 ",
		"deploy keys.create web-2 ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e := entries[3]; string(e.Before) != `{"cred-b1":{"status":"active"}}` || string(e.After) != `{"cred-b1":{"status":"draining","reason":"operator: drain"}}` {
		t.Errorf("drain before %s after %s, want active → draining", e.Before, e.After)
	}

	code, raw := h.adminGet("/admin/audit")
	if code != http.StatusOK {
		t.Fatalf("GET /admin/audit = %d", code)
	}
	for _, secret := range []string{issued.Key, authn.Hash(issued.Key), keyWeb, keyScoped, secretA1, secretA2, secretB1,
		testEnv["ADMIN_TOKEN"], testEnv["ADMIN_READ"], testEnv["ADMIN_DEPLOY"]} {
		if strings.Contains(raw, secret) {
			t.Errorf("the audit log holds a secret (%.12s…)", secret)
		}
	}
}
