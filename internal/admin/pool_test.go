package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/catalog"
)

// coolingUntil is when acct-a's cooldown ends in the fake pool.
var coolingUntil = time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)

// fakePool is an admin.Pool over fixed accounts and credentials. remove is
// refused while a credential has work in flight, unless it is draining and
// forced, like the real pool.
type fakePool struct {
	mu          sync.Mutex
	accounts    []admin.AccountState
	credentials []admin.CredentialState
	removes     []bool // force of every remove that reached the pool
}

func newFakePool() *fakePool {
	return &fakePool{
		accounts: []admin.AccountState{
			{ID: "acct-a", QuotaScope: "account", Cap: 4, InFlight: 2, Waiting: 1, CoolingUntil: coolingUntil, Level: 2,
				Probe: "available", Status: "active", Credentials: []string{"cred-1", "cred-2"}},
			{ID: "acct-b", QuotaScope: "credential", Status: "disabled", Reason: "billing: insufficient quota",
				Since: coolingUntil.Add(-time.Hour), Credentials: []string{"cred-3"}},
		},
		credentials: []admin.CredentialState{
			{ID: "cred-1", Account: "acct-a", Status: "active", InFlight: 2, Endpoints: []string{"openai"}},
			{ID: "cred-2", Account: "acct-a", Status: "active", Endpoints: []string{"openai", "azure"}},
			{ID: "cred-3", Account: "acct-b", Status: "disabled", Reason: "billing: insufficient quota", Endpoints: []string{"openai"}},
		},
	}
}

func (f *fakePool) Accounts(context.Context) ([]admin.AccountState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.accounts), nil
}

func (f *fakePool) Credentials(context.Context) ([]admin.CredentialState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.credentials), nil
}

func (f *fakePool) SetAccount(_ context.Context, id, action string) (admin.AccountState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.accounts, func(a admin.AccountState) bool { return a.ID == id })
	if i < 0 {
		return admin.AccountState{}, fmt.Errorf("account %s: %w", id, catalog.ErrNotFound)
	}
	a := &f.accounts[i]
	a.Status, a.Reason = map[string]sluice.UpstreamStatus{"disable": "disabled", "enable": "active"}[action], ""
	if action == "disable" {
		a.Reason = "operator"
	}
	return *a, nil
}

func (f *fakePool) SetCredential(_ context.Context, id, action string, force bool) (admin.CredentialState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.credentials, func(c admin.CredentialState) bool { return c.ID == id })
	if i < 0 {
		return admin.CredentialState{}, fmt.Errorf("credential %s: %w", id, catalog.ErrNotFound)
	}
	c := &f.credentials[i]
	if action == "remove" {
		f.removes = append(f.removes, force)
		if c.InFlight > 0 && (c.Status != "draining" || !force) {
			return admin.CredentialState{}, fmt.Errorf("credential %s holds %d claims: %w", id, c.InFlight, admin.ErrClaimsHeld)
		}
	}
	c.Status = map[string]sluice.UpstreamStatus{"disable": "disabled", "drain": "draining", "enable": "active", "remove": "removed"}[action]
	return *c, nil
}

// gotRemoves returns the force of every remove that reached the pool.
func (f *fakePool) gotRemoves() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removes)
}

func TestAccounts(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	want, _ := h.pool.Accounts(ctx)

	got, err := h.client.Accounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Accounts (-want +got):\n%s", diff)
	}
	a, err := h.client.Account(ctx, "acct-b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Picture == nil {
		t.Error("Account(acct-b) has no picture, on a gateway with a usage database") // TestAccountPicture checks what it holds
	}
	a.Picture = nil
	if diff := cmp.Diff(want[1], *a); diff != "" {
		t.Errorf("Account(acct-b) (-want +got):\n%s", diff)
	}

	tests := []struct {
		id, action string
		wantStatus sluice.UpstreamStatus
		wantReason string
	}{
		{"acct-b", "enable", "active", ""},
		{"acct-a", "disable", "disabled", "operator"},
		{"acct-a", "enable", "active", ""},
	}
	for _, tt := range tests {
		a, err := h.client.SetAccount(ctx, tt.id, tt.action)
		if err != nil || a.ID != tt.id || a.Status != tt.wantStatus || a.Reason != tt.wantReason {
			t.Errorf("SetAccount(%s, %s) = %+v, %v; want status %q, reason %q", tt.id, tt.action, a, err, tt.wantStatus, tt.wantReason)
		}
	}
	if a, _ := h.client.Account(ctx, "acct-b"); a == nil || a.Status != "active" {
		t.Errorf("Account(acct-b) after enable = %+v, want active", a)
	}
	if logs := h.logs.String(); !strings.Contains(logs, `"action":"accounts.enable","account_id":"acct-b","status":"active"`) {
		t.Errorf("accounts.enable of acct-b was not logged:\n%s", logs)
	}

	_, err = h.client.Account(ctx, "nope")
	wantAPIError(t, "Account(nope)", err, http.StatusNotFound, "not_found")
	_, err = h.client.SetAccount(ctx, "nope", "disable")
	wantAPIError(t, "SetAccount(nope)", err, http.StatusNotFound, "not_found")
}

func TestCredentials(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	want, _ := h.pool.Credentials(ctx)

	got, err := h.client.Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Credentials (-want +got):\n%s", diff)
	}
	c, err := h.client.Credential(ctx, "cred-2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1], *c); diff != "" {
		t.Errorf("Credential(cred-2) (-want +got):\n%s", diff)
	}
	_, err = h.client.Credential(ctx, "nope")
	wantAPIError(t, "Credential(nope)", err, http.StatusNotFound, "not_found")

	// cred-1 has two requests in flight: a remove must not drop them unless
	// the credential drains and the operator forces it.
	steps := []struct {
		id, action string
		force      bool
		wantStatus sluice.UpstreamStatus // "" = refused with credential_claims_held
	}{
		{"cred-2", "disable", false, "disabled"},
		{"cred-2", "enable", false, "active"},
		{"cred-1", "remove", false, ""},
		{"cred-1", "remove", true, ""}, // forced, but not draining
		{"cred-1", "drain", false, "draining"},
		{"cred-1", "remove", false, ""}, // draining, but not forced
		{"cred-1", "remove", true, "removed"},
		{"cred-2", "remove", false, "removed"}, // nothing in flight
	}
	for _, st := range steps {
		what := fmt.Sprintf("SetCredential(%s, %s, force %t)", st.id, st.action, st.force)
		c, err := h.client.SetCredential(ctx, st.id, st.action, st.force)
		if st.wantStatus == "" {
			wantAPIError(t, what, err, http.StatusConflict, "credential_claims_held")
			continue
		}
		if err != nil || c.ID != st.id || c.Status != st.wantStatus {
			t.Errorf("%s = %+v, %v; want status %q", what, c, err, st.wantStatus)
		}
	}
	if diff := cmp.Diff([]bool{false, true, false, true, false}, h.pool.gotRemoves()); diff != "" {
		t.Errorf("force of the removes the pool saw (-want +got):\n%s", diff)
	}
	logs := h.logs.String()
	for _, line := range []string{
		`"action":"credentials.drain","credential_id":"cred-1","status":"draining"`,
		`"action":"credentials.remove","credential_id":"cred-1","status":"removed","force":true`,
	} {
		if !strings.Contains(logs, line) {
			t.Errorf("the log lacks %s:\n%s", line, logs)
		}
	}
	_, err = h.client.SetCredential(ctx, "nope", "drain", false)
	wantAPIError(t, "SetCredential(nope)", err, http.StatusNotFound, "not_found")
}

func TestPoolRequests(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name       string
		method     string
		path       string
		token      string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"list accounts without token", "GET", "/admin/accounts", "", "", 401, "admin_unauthorized"},
		{"show credential without token", "GET", "/admin/credentials/cred-1", "", "", 401, "admin_unauthorized"},
		{"drain without token", "POST", "/admin/credentials/cred-2/drain", "", "", 401, "admin_unauthorized"},
		{"enable account with a wrong token", "POST", "/admin/accounts/acct-b/enable", "wrong", "", 401, "admin_unauthorized"},
		{"show unknown account", "GET", "/admin/accounts/nope", testToken, "", 404, "not_found"},
		{"remove unknown credential", "POST", "/admin/credentials/nope/remove", testToken, "", 404, "not_found"},
		{"unknown credential action", "POST", "/admin/credentials/cred-2/revoke", testToken, "", 404, "not_found"},
		{"GET an action", "GET", "/admin/credentials/cred-2/drain", testToken, "", 405, "method_not_allowed"},
		{"remove with claims", "POST", "/admin/credentials/cred-1/remove", testToken, "", 409, "credential_claims_held"},
		{"remove: bad force", "POST", "/admin/credentials/cred-1/remove?force=maybe", testToken, "", 400, "invalid_request"},
		{"remove: unknown field", "POST", "/admin/credentials/cred-1/remove", testToken, `{"now":true}`, 400, "invalid_request"},
		{"drain", "POST", "/admin/credentials/cred-1/drain", testToken, "", 200, ""},
		{"forced remove by query", "POST", "/admin/credentials/cred-1/remove?force=true", testToken, "", 200, ""},
		{"remove with an empty body object", "POST", "/admin/credentials/cred-2/remove", testToken, `{}`, 200, ""},
	}
	for _, tt := range tests { // in order: the drain comes before the forced remove
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, tt.method, tt.path, tt.token, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s status = %d (%s), want %d", tt.method, tt.path, resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantCode == "" {
				return
			}
			if got := decodeError(t, body).Error.Code; got != tt.wantCode {
				t.Errorf("code = %q, want %q", got, tt.wantCode)
			}
		})
	}
	if got := h.pool.gotRemoves(); !slices.Equal(got, []bool{false, true, false}) {
		t.Errorf("force of the removes the pool saw = %v, want [false true false]", got)
	}
}

func TestPoolStatusAndNoPool(t *testing.T) {
	h := newHarness(t)
	st, err := h.client.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[sluice.UpstreamStatus]int{"active": 1, "disabled": 1}, st.Accounts); diff != "" {
		t.Errorf("Status account counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[sluice.UpstreamStatus]int{"active": 2, "disabled": 1}, st.Credentials); diff != "" {
		t.Errorf("Status credential counts (-want +got):\n%s", diff)
	}

	c := adminclient.NewClient(newServer(t, admin.Options{Tokens: testTokens}), testToken)
	_, err = c.Accounts(t.Context())
	wantAPIError(t, "Accounts without a pool", err, http.StatusNotFound, "not_found")
	_, err = c.SetCredential(t.Context(), "cred-1", "drain", false)
	wantAPIError(t, "SetCredential without a pool", err, http.StatusNotFound, "not_found")
	if st, err := c.Status(t.Context()); err != nil || st.Accounts != nil || st.Credentials != nil {
		t.Errorf("Status without a pool = %+v, %v; want no account or credential counts", st, err)
	}
}

func TestCLIPool(t *testing.T) {
	h := newHarness(t)

	code, out, errOut := h.runCLI(t, "credentials", "list")
	if code != 0 {
		t.Fatalf("credentials list exit = %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "ID ACCOUNT STATUS IN-FLIGHT COOLDOWN REASON" {
		t.Fatalf("credentials list = %q, want a header and three rows", out)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "cred-1 acct-a active 2 - -" {
		t.Errorf("credentials list row = %q, want %q", got, "cred-1 acct-a active 2 - -")
	}
	if !strings.Contains(lines[3], "billing: insufficient quota") {
		t.Errorf("credentials list row %q lacks the reason", lines[3])
	}

	code, out, _ = h.runCLI(t, "accounts", "list")
	row := "acct-a account 2/4 1 " + coolingUntil.Format(time.RFC3339) + " available active -"
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), row) || !strings.Contains(out, "0/∞") {
		t.Errorf("accounts list = %d %q, want a row %q and an unlimited cap", code, out, row)
	}

	code, out, errOut = h.runCLI(t, "credentials", "drain", "cred-1")
	if code != 0 || !regexp.MustCompile(`Status:\s+draining`).MatchString(out) {
		t.Fatalf("credentials drain = %d, stdout %q, stderr %q; want the draining credential", code, out, errOut)
	}
	code, out, errOut = h.runCLI(t, "credentials", "remove", "cred-1")
	if code != 1 || out != "" || !strings.Contains(errOut, "credential_claims_held") {
		t.Errorf("credentials remove (claims held) = %d, stdout %q, stderr %q; want exit 1, credential_claims_held", code, out, errOut)
	}
	code, out, errOut = h.runCLI(t, "credentials", "remove", "cred-1", "--force", "--json")
	var cr admin.CredentialState
	if code != 0 || json.Unmarshal([]byte(out), &cr) != nil || cr.Status != "removed" {
		t.Errorf("credentials remove --force --json = %d, stdout %q, stderr %q; want the removed credential", code, out, errOut)
	}
	if got := h.pool.gotRemoves(); !slices.Equal(got, []bool{false, true}) {
		t.Errorf("force of the removes the pool saw = %v, want [false true]", got)
	}

	code, out, errOut = h.runCLI(t, "accounts", "enable", "acct-b")
	if code != 0 || !regexp.MustCompile(`Status:\s+active`).MatchString(out) || !regexp.MustCompile(`Cap:\s+unlimited`).MatchString(out) {
		t.Errorf("accounts enable = %d, stdout %q, stderr %q; want the active account", code, out, errOut)
	}

	code, out, _ = h.runCLI(t, "status")
	if code != 0 || !regexp.MustCompile(`Accounts:\s+2 active\n`).MatchString(out) ||
		!regexp.MustCompile(`Credentials:\s+1 active, 1 disabled, 1 removed\n`).MatchString(out) {
		t.Errorf("status = %d %q, want account and credential counts", code, out)
	}
}

func TestCLIPoolUsageErrors(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name string
		args []string
	}{
		{"accounts without subcommand", []string{"accounts"}},
		{"unknown accounts subcommand", []string{"accounts", "drain", "acct-a"}},
		{"unknown credentials subcommand", []string{"credentials", "revoke", "cred-1"}},
		{"show without id", []string{"credentials", "show"}},
		{"enable with two ids", []string{"accounts", "enable", "a", "b"}},
		{"force on drain", []string{"credentials", "drain", "cred-1", "--force"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := h.runCLI(t, tt.args...)
			if code != 2 || out != "" || errOut == "" {
				t.Errorf("RunCLI(%q) = %d, stdout %q, stderr %q; want exit 2 with a message on stderr", tt.args, code, out, errOut)
			}
		})
	}
	if got := h.pool.gotRemoves(); len(got) != 0 {
		t.Errorf("a usage error reached the pool: removes %v", got)
	}
}
