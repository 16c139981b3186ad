package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/catalog"
)

// SuspendAccount disables the account with the reason, like the real pool.
func (f *fakePool) SuspendAccount(_ context.Context, id, reason string) (admin.AccountState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.accounts, func(a admin.AccountState) bool { return a.ID == id })
	if i < 0 {
		return admin.AccountState{}, fmt.Errorf("account %s: %w", id, catalog.ErrNotFound)
	}
	f.accounts[i].Status, f.accounts[i].Reason = "disabled", reason
	return f.accounts[i], nil
}

// TestSuspendBillingAccount checks a billing account's suspension from
// suspend to resume: the reason is required, the suspension (reason,
// since, by) shows in the account's views and in the keyring admission
// reads, and the audit log keeps it with the state before and after.
func TestSuspendBillingAccount(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	for _, body := range []string{"", `{}`, `{"reason":"  "}`, `{"reason":"` + strings.Repeat("x", 501) + `"}`} {
		if resp, answer := h.do(t, http.MethodPost, "/admin/billing/accounts/cat-acct/suspend", testToken, body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("suspend with the body %.20q = %d %s, want 400", body, resp.StatusCode, answer)
		}
	}
	if _, err := h.client.SuspendBillingAccount(ctx, "no-such", "unpaid"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("suspend of an unknown billing account = %v, want 404", err)
	}

	a, err := h.client.SuspendBillingAccount(ctx, "cat-acct", "unpaid invoice 42")
	if err != nil {
		t.Fatal(err)
	}
	if sp := a.Suspension; sp == nil || sp.Reason != "unpaid invoice 42" || sp.By != "admin" || sp.Since.IsZero() {
		t.Errorf("suspended account's suspension = %+v, want the reason, by admin, since now", sp)
	}
	if _, ok := h.keys.Suspended(catalog.SuspendedBillingAccount, "cat-acct"); !ok {
		t.Errorf("the keyring does not hold the suspension")
	}
	all, err := h.client.BillingAccounts(ctx)
	if err != nil || len(all) == 0 || all[0].Suspension == nil {
		t.Errorf("GET /admin/billing/accounts = %+v, %v; want cat-acct suspended", all, err)
	}
	shown, err := h.client.BillingAccount(ctx, "cat-acct")
	if err != nil || shown.Suspension == nil || shown.Suspension.Reason != "unpaid invoice 42" {
		t.Errorf("GET /admin/billing/accounts/cat-acct = %+v, %v; want its suspension", shown, err)
	}

	a, err = h.client.ResumeBillingAccount(ctx, "cat-acct")
	if err != nil || a.Suspension != nil {
		t.Fatalf("resume = %+v, %v; want no suspension", a, err)
	}
	if _, ok := h.keys.Suspended(catalog.SuspendedBillingAccount, "cat-acct"); ok {
		t.Errorf("the keyring still holds the suspension after the resume")
	}

	log := h.auditLog(t)
	if len(log) < 2 || log[1].Action != "billing.suspend" || log[0].Action != "billing.resume" {
		t.Fatalf("audit log = %+v, want billing.suspend then billing.resume", log)
	}
	suspended, resumed := log[1], log[0]
	if !bytes.Contains(suspended.After, []byte(`"reason":"unpaid invoice 42"`)) || !bytes.Contains(suspended.Before, []byte(`"suspended":false`)) ||
		suspended.TokenID != "admin" || !slices.Equal(suspended.Targets, []string{"cat-acct"}) {
		t.Errorf("suspend entry = %s by %s on %v, before %s, after %s; want the reason after, not suspended before", suspended.Action,
			suspended.TokenID, suspended.Targets, suspended.Before, suspended.After)
	}
	if !bytes.Contains(resumed.Before, []byte(`"reason":"unpaid invoice 42"`)) || !bytes.Contains(resumed.After, []byte(`"suspended":false`)) {
		t.Errorf("resume entry before %s, after %s; want the suspension before, none after", resumed.Before, resumed.After)
	}
}

// TestSuspendTenant checks that a tenant can be suspended before it has
// keys, shows in GET /admin/tenants with its key count, and resumes.
func TestSuspendTenant(t *testing.T) {
	h, _ := auditHarness(t) // keys web-1 and pending-1 of tenant web; tenant idle suspended
	ctx := t.Context()
	if _, err := h.client.SuspendTenant(ctx, "future", "not signed yet"); err != nil {
		t.Fatal(err)
	}
	all, err := h.client.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tn := range all {
		got = append(got, fmt.Sprintf("%s:%d:%v", tn.ID, tn.Keys, tn.Suspension != nil))
	}
	if want := []string{"future:0:true", "idle:0:true", "web:2:false"}; !slices.Equal(got, want) {
		t.Errorf("tenants = %v, want %v", got, want)
	}
	if tn, err := h.client.ResumeTenant(ctx, "future"); err != nil || tn.ID != "future" || tn.Suspension != nil {
		t.Errorf("resume of a tenant without keys = %+v, %v; want it, not suspended", tn, err)
	}
	if _, err := h.client.Tenant(ctx, "future"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("GET a resumed tenant without keys = %v, want 404", err)
	}
	if _, ok := h.keys.Suspended(catalog.SuspendedTenant, "future"); ok {
		t.Errorf("tenant future is still suspended")
	}
	if tn, err := h.client.SuspendTenant(ctx, "web", "abuse"); err != nil || tn.Suspension == nil || tn.Keys != 2 {
		t.Errorf("suspend web = %+v, %v; want it suspended with its 2 keys", tn, err)
	}
}

// TestSuspendAccount checks that suspending an upstream account disables
// it with the reason and who suspended it, and resume enables it.
func TestSuspendAccount(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	if resp, body := h.do(t, http.MethodPost, "/admin/accounts/acct-a/suspend", testToken, ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("suspend without a reason = %d %s, want 400", resp.StatusCode, body)
	}
	a, err := h.client.SuspendAccount(ctx, "acct-a", "contract ended")
	if err != nil || a.Status != "disabled" || a.Reason != "suspended by admin: contract ended" {
		t.Errorf("suspend = %+v, %v; want disabled, reason \"suspended by admin: contract ended\"", a, err)
	}
	if a, err = h.client.ResumeAccount(ctx, "acct-a"); err != nil || a.Status != "active" {
		t.Errorf("resume = %+v, %v; want active", a, err)
	}
	if _, err := h.client.SuspendAccount(ctx, "no-such", "x"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("suspend of an unknown account = %v, want 404", err)
	}
	log := h.auditLog(t)
	var after map[string]json.RawMessage
	if i := slices.IndexFunc(log, func(e admin.AuditEntry) bool { return e.Action == "accounts.suspend" && e.Status == 200 }); i < 0 {
		t.Errorf("no accounts.suspend in the audit log")
	} else if json.Unmarshal(log[i].After, &after) != nil || !bytes.Contains(after["acct-a"], []byte("contract ended")) {
		t.Errorf("accounts.suspend after = %s, want the reason", log[i].After)
	}
}

// isStatus reports whether err is an answer of the admin API with status.
func isStatus(err error, status int) bool {
	ae, ok := errors.AsType[*adminclient.APIError](err)
	return ok && ae.Status == status
}

// TestCLISuspend runs the suspend and resume verbs of billing accounts,
// tenants and upstream accounts against the admin API.
func TestCLISuspend(t *testing.T) {
	h, _ := auditHarness(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // in stdout (stderr for a usage error)
	}{
		{"billing suspend", []string{"billing", "suspend", "cat-acct", "--reason", "unpaid invoice 9"}, 0, []string{"Suspended:", "by admin", "Reason:", "unpaid invoice 9"}},
		{"billing suspend needs a reason", []string{"billing", "suspend", "cat-acct"}, 2, []string{"--reason is required", "usage: sluice billing suspend ID --reason TEXT"}},
		{"billing resume", []string{"billing", "resume", "cat-acct"}, 0, []string{"Suspended:", "no"}},
		{"tenants suspend", []string{"tenants", "suspend", "web", "--reason", "abuse"}, 0, []string{"Keys:", "2", "by admin", "abuse"}},
		{"tenants list", []string{"tenants", "list"}, 0, []string{"ID", "SUSPENDED", "REASON", "idle", "earlier", "web", "abuse"}},
		{"tenants resume", []string{"tenants", "resume", "web"}, 0, []string{"Suspended:", "no"}},
		{"tenants show unknown", []string{"tenants", "show", "nobody"}, 1, []string{"not found"}},
		{"accounts suspend", []string{"accounts", "suspend", "acct-a", "--reason", "contract ended"}, 0, []string{"disabled", "suspended by admin: contract ended"}},
		{"accounts resume", []string{"accounts", "resume", "acct-a"}, 0, []string{"Status:", "active"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := h.runCLI(t, tt.args...)
			out := stdout
			if tt.wantCode != 0 {
				out = stderr
			}
			if code != tt.wantCode {
				t.Fatalf("exit %d (stdout %q, stderr %q), want %d", code, stdout, stderr, tt.wantCode)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q lacks %q", out, w)
				}
			}
		})
	}
}
