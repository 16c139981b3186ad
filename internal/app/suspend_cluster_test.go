package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// suspendTemplate is fastOnEpA billed: key web (tenant web) is charged to
// the billing account acme, key scoped (tenant other) to globex; both may
// overdraw, so no top-up is needed.
const suspendTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
` + fastOnEpA + `keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, billing_account: acme}
  - {id: scoped, tenant: other, secret_env: KEY_SCOPED, billing_account: globex}
billing:
  plans:
    - id: standard
      prices:
        - {alias: fast, request: "0.01", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: acme, plan: standard, overdraft: "1000.00"}
    - {id: globex, plan: standard, overdraft: "1000.00"}
`

// threeReplicas starts three gateways on suspendTemplate sharing one
// PostgreSQL database and one Redis.
func threeReplicas(t *testing.T) []*harness {
	t.Helper()
	pg, rd := testenv.Postgres(t), testenv.Redis(t)
	state := redisState(rd, testenv.RedisPrefix(t, rd))
	dir := t.TempDir()
	var out []*harness
	for _, name := range []string{"a", "b", "c"} {
		out = append(out, newHarnessWith(t, onPostgres(suspendTemplate, pg, dir+"/spool-"+name), state, simulator.Options{}))
	}
	return out
}

// adminWrite POSTs body to the admin API of h with the test token and
// returns the status and answer.
func (h *harness) adminWrite(path, body string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.gw.AdminAddr()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testEnv["ADMIN_TOKEN"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// upstreamRequests counts the requests every replica's simulators received.
func upstreamRequests(hs []*harness) int {
	n := 0
	for _, h := range hs {
		n += len(h.simA.Requests()) + len(h.simB.Requests())
	}
	return n
}

// chatAs sends one chat request of key to h and returns its status and error code.
func chatAs(t *testing.T, h *harness, key string) (int, string) {
	t.Helper()
	status, _, body := h.post(t.Context(), "/v1/chat/completions", key, chatBody)
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	return status, e.Error.Code
}

// TestClusterSuspensionReachesEveryReplica checks, on three gateways that
// share one PostgreSQL and one Redis, that a billing account (then a
// tenant) suspended through one is refused on all three within 2 s, with
// the suspension's code and before anything goes upstream, while a key of
// another billing account (tenant) is served; that a resume serves it
// again on all three within 2 s; and that both are in the audit log with
// the reason.
func TestClusterSuspensionReachesEveryReplica(t *testing.T) {
	hs := threeReplicas(t)
	for _, h := range hs {
		if status, code := chatAs(t, h, keyWeb); status != http.StatusOK {
			t.Fatalf("before any suspension: %d %s, want 200", status, code)
		}
	}
	tests := []struct {
		name, path, reason, code, action string
	}{
		{"billing account", "/admin/billing/accounts/acme", "unpaid invoice 2026-04", "billing_account_suspended", "billing"},
		{"tenant", "/admin/tenants/web", "abuse report 7", "tenant_suspended", "tenants"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			through := hs[i%len(hs)]
			if status, body := through.adminWrite(tt.path+"/suspend", `{"reason":"`+tt.reason+`"}`); status != http.StatusOK {
				t.Fatalf("suspend = %d %s", status, body)
			}
			start := time.Now()
			for _, h := range hs {
				eventually(t, 2*time.Second-time.Since(start), "suspension seen on every replica", func() bool {
					status, code := chatAs(t, h, keyWeb)
					return status == http.StatusForbidden && code == tt.code
				})
			}
			seen := upstreamRequests(hs)
			for _, h := range hs {
				if status, code := chatAs(t, h, keyWeb); status != http.StatusForbidden || code != tt.code {
					t.Errorf("suspended key: %d %s, want 403 %s", status, code, tt.code)
				}
			}
			if n := upstreamRequests(hs); n != seen {
				t.Errorf("the upstream received %d requests of the suspended key, want none", n-seen)
			}
			for _, h := range hs {
				if status, code := chatAs(t, h, keyScoped); status != http.StatusOK {
					t.Errorf("a key of another %s: %d %s, want 200", tt.name, status, code)
				}
			}

			if status, body := hs[(i+1)%len(hs)].adminWrite(tt.path+"/resume", ""); status != http.StatusOK {
				t.Fatalf("resume = %d %s", status, body)
			}
			start = time.Now()
			for _, h := range hs {
				eventually(t, 2*time.Second-time.Since(start), "resume seen on every replica", func() bool {
					status, _ := chatAs(t, h, keyWeb)
					return status == http.StatusOK
				})
			}

			status, body := hs[2].adminGet("/admin/audit?target=" + tt.path[strings.LastIndex(tt.path, "/")+1:])
			var log []admin.AuditEntry
			if status != http.StatusOK || json.Unmarshal([]byte(body), &log) != nil || len(log) < 2 {
				t.Fatalf("audit = %d %s", status, body)
			}
			if log[0].Action != tt.action+".resume" || log[1].Action != tt.action+".suspend" || log[1].TokenID != "admin" ||
				!strings.Contains(string(log[1].After), tt.reason) || !strings.Contains(string(log[0].Before), tt.reason) {
				t.Errorf("audit log = %+v; want %s.suspend by admin with the reason after, then %s.resume with it before", log[:2], tt.action, tt.action)
			}
		})
	}
}
