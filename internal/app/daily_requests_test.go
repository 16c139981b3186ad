package app_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// dailyRequestsTemplate is catalogTemplate's layout (fastOnEpA) with a
// profile whose end users may start two parse requests per UTC day, and a
// key that speaks for its end users.
const dailyRequestsTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  wait_timeout: 2s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
` + fastOnEpA + `task_types:
  - {id: chat}
  - {id: parse}
profiles:
  - {id: free, task_limits: {parse: {daily_requests: 2}}}
tenants: [{id: web, default_profile: free}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, assert: [user], task: chat, tasks: [parse]}
`

// TestTaskDailyRequests: an end user whose profile allows two parse
// requests a UTC day gets two answers, then 429 capacity_wait_timeout with
// a Retry-After until about the next UTC midnight, as past a daily token
// budget; the same user's other task type, and another user's parse, are
// unaffected.
func TestTaskDailyRequests(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newHarnessWith(t, dailyRequestsTemplate, state, simulator.Options{})
		for i := range 2 {
			if code, body := asUser(t, h, "alice", "X-Sluice-Task", "parse"); code != http.StatusOK {
				t.Fatalf("alice's parse %d of 2 = %d %s", i+1, code, body)
			}
		}
		resp := userResponse(t, h, "alice", "X-Sluice-Task", "parse")
		var env struct {
			Error struct{ Code string } `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		untilMidnight := time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour))
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || env.Error.Code != string(sluice.CodeCapacityWaitTimeout) ||
			time.Duration(retry)*time.Second < untilMidnight-time.Minute {
			t.Errorf("alice's third parse = %d %+v (%v), Retry-After %ds; want 429 capacity_wait_timeout until about midnight UTC (%v)",
				resp.StatusCode, env, err, retry, untilMidnight.Round(time.Second))
		}
		if code, body := asUser(t, h, "alice", "X-Sluice-Task", "chat"); code != http.StatusOK {
			t.Errorf("alice's chat after her parses ran out = %d %s, want 200", code, body)
		}
		if code, body := asUser(t, h, "bob", "X-Sluice-Task", "parse"); code != http.StatusOK {
			t.Errorf("bob's parse after alice's ran out = %d %s, want 200", code, body)
		}
		if got := len(h.simA.Requests()); got != 4 {
			t.Errorf("upstream calls = %d, want 4 (alice's refused parse never reaches it)", got)
		}
	})
}
