package app_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/simulator"
)

// entitlementsTemplate is catalogTemplate's layout (fastOnEpA) with two
// quota profiles, open (the tenant's default, no limits) and capped (one
// request a minute per end user), and a key that speaks for its end users.
const entitlementsTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 2s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
` + fastOnEpA + `profiles:
  - {id: open}
  - {id: capped, user_limits: {rpm: 1}}
tenants: [{id: web, default_profile: open}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, assert: [user]}
`

// userResponse sends one chat request of end user as keyWeb that may not
// wait for capacity; header adds headers (name, value, …). The caller
// closes the body.
func userResponse(t *testing.T, h *harness, user string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url("/v1/chat/completions"),
		strings.NewReader(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	req.Header.Set("X-Sluice-User", user)
	req.Header.Set("X-Sluice-Max-Wait", "0")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// asUser is userResponse's status and body.
func asUser(t *testing.T, h *harness, user string, header ...string) (int, string) {
	t.Helper()
	resp := userResponse(t, h, user, header...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEntitlementsReachEveryReplicaWithinASecond: two gateways on one
// PostgreSQL; a bulk change of entitlements through one's admin API is
// enforced by both within a second (bob's second request in the minute is
// refused once bob is capped), and so is its deletion (bob back on the
// tenant's default profile, which has no limit). The key may not assert
// a profile itself.
func TestEntitlementsReachEveryReplicaWithinASecond(t *testing.T) {
	a, b := replicasOnPostgres(t, entitlementsTemplate, simulator.Options{})
	replicas := map[string]*harness{"a": a, "b": b}
	for name, h := range replicas {
		for i := range 3 {
			if code, body := asUser(t, h, "bob"); code != http.StatusOK {
				t.Fatalf("replica %s, request %d of bob on the open profile = %d %s", name, i, code, body)
			}
		}
	}

	// within waits until every replica answers bob's requests as want
	// says, within a second of since.
	within := func(what string, since time.Time, want func(code int, body string) bool) {
		t.Helper()
		for name, h := range replicas {
			for {
				code, body := asUser(t, h, "bob")
				if want(code, body) {
					t.Logf("replica %s: %s after %s", name, what, time.Since(since).Round(time.Millisecond))
					break
				}
				if time.Since(since) > time.Second {
					t.Fatalf("replica %s: %s not seen within a second (last answer %d %s)", name, what, code, body)
				}
				time.Sleep(20 * time.Millisecond) // poll: the next refresh is at most 200ms away
			}
		}
	}

	put := admin.EntitlementsPut{}
	for i := range 200 {
		put.Entitlements = append(put.Entitlements, admin.Entitlement{Tenant: "web", User: fmt.Sprintf("user-%03d", i), Profile: "capped"})
	}
	put.Entitlements = append(put.Entitlements, admin.Entitlement{Tenant: "web", User: "bob", Profile: "capped"})
	if res, err := a.adminClient().PutEntitlements(t.Context(), put); err != nil || res.Created != 201 {
		t.Fatalf("PutEntitlements = %+v, %v; want 201 created", res, err)
	}
	start := time.Now() // the change is committed: the second starts
	within("bob capped", start, func(code int, body string) bool {
		return code == http.StatusTooManyRequests && strings.Contains(body, "capacity_wait_timeout")
	})

	del := admin.EntitlementsDelete{Users: []admin.EndUserRef{{Tenant: "web", User: "bob"}}}
	if res, err := b.adminClient().DeleteEntitlements(t.Context(), del); err != nil || res.Deleted != 1 {
		t.Fatalf("DeleteEntitlements = %+v, %v; want 1 deleted", res, err)
	}
	start = time.Now()
	within("bob back on the open profile", start, func(code int, _ string) bool { return code == http.StatusOK })

	// The key speaks for its users, not for their profiles.
	if code, body := asUser(t, a, "bob", "X-Sluice-Profile", "open"); code != http.StatusForbidden || !strings.Contains(body, "access_profile_denied") {
		t.Errorf("X-Sluice-Profile from a key without assert [profile] = %d %s, want 403 access_profile_denied", code, body)
	}
}
