package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/sqlstore"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The scale of TestConsoleDataCallsAtScale: a year of usage ending
// yesterday, 2,740 records a day (1,000,100 in all), over 10,000 keys of
// 100 tenants billed to 100 accounts.
const (
	scaleKeys    = 10000
	scaleTenants = 100
	scalePerDay  = 2740
	scaleJobs    = 1000
	scaleAudit   = 20000
	scaleCalls   = 20
	// consoleBudget is what a console page may wait for one data call.
	consoleBudget = 50 * time.Millisecond
)

// TestConsoleDataCallsAtScale times every admin call the console's pages
// make, over HTTP against a gateway on PostgreSQL holding a year of usage
// (one execution per record, half of them billed), 10,000 keys, 100 billing
// accounts, 1,000 jobs and 20,000 audit entries: scaleCalls calls each,
// whose median must be under consoleBudget. Loading takes minutes, so it
// runs only with SLUICE_CONSOLE_SCALE=1:
//
//	SLUICE_CONSOLE_SCALE=1 go test ./internal/app/ -run TestConsoleDataCallsAtScale -v -timeout 30m
func TestConsoleDataCallsAtScale(t *testing.T) {
	if os.Getenv("SLUICE_CONSOLE_SCALE") == "" {
		t.Skip("set SLUICE_CONSOLE_SCALE=1 to load a year of usage on PostgreSQL and time the console's data calls")
	}
	pg := testenv.Postgres(t)
	db := sqldbtest.Open(t, pg)
	t.Cleanup(func() { sqldbtest.DropPartitions(t, db) })
	now := time.Now().UTC()
	loadStarted := time.Now()
	sqldbtest.LoadYear(t, db, sqldbtest.Year{Start: ledger.Day(now).AddDate(0, 0, -365), Days: 365, PerDay: scalePerDay,
		Keys: scaleKeys, Tenants: scaleTenants, UnbilledEvery: 2, Executions: true})
	loadConsoleState(t, db, now)
	t.Logf("loaded in %v", time.Since(loadStarted).Round(time.Second))
	// The history job rolls up each day once it has ended: the year's
	// days all have.
	rollStarted := time.Now()
	if err := sqlledger.New(db).RollUp(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	t.Logf("365 days rolled up in %v", time.Since(rollStarted).Round(time.Millisecond))

	h := newHarnessWith(t, onPostgres(storedBillingTemplate, pg, t.TempDir()), "{backend: memory}", simulator.Options{})
	month := url.QueryEscape(now.AddDate(0, 0, -30).Format(time.RFC3339))
	for _, c := range []struct {
		name, path string
		check      func(body string) error // the answer holds what the page shows
	}{
		{"keys list page of 100", "/admin/keys?limit=100", wantItems(100)},
		{"usage page of 100", "/admin/usage?limit=100", wantItems(100)},
		{"usage page of 100, one tenant", "/admin/usage?limit=100&tenant=tenant-7", wantItems(1)},
		{"usage page of 100, one key, 30 days", "/admin/usage?limit=100&key=key-4321&since=" + month, wantItems(1)},
		{"summary 24 h by minute", "/admin/usage/summary?bucket=minute", wantSummary(2)},
		{"summary 24 h by hour", "/admin/usage/summary?bucket=hour", wantSummary(2)},
		{"summary 30 d by day", "/admin/usage/summary?bucket=day&since=" + month, wantSummary(29)},
		{"spend by account and day, 30 d", "/admin/billing/spend?by=account,day&from=" + month, wantRows(100 * 29)},
		{"jobs list", "/admin/jobs", wantItems(100)},
		{"accounts list", "/admin/accounts", wantItems(1)},
		{"billing accounts list", "/admin/billing/accounts", wantItems(scaleTenants)},
		{"audit list", "/admin/audit", wantItems(100)},
	} {
		var took []time.Duration
		for range scaleCalls {
			start := time.Now()
			code, body := h.adminGet(c.path)
			took = append(took, time.Since(start))
			if code != http.StatusOK {
				t.Fatalf("%s: GET %s = %d %s", c.name, c.path, code, body)
			}
			if err := c.check(body); err != nil {
				t.Fatalf("%s: GET %s: %v", c.name, c.path, err)
			}
		}
		slices.Sort(took)
		p50, most := took[len(took)/2], took[len(took)-1]
		t.Logf("| %s | `%s` | %.1f | %.1f |", c.name, c.path, ms(p50), ms(most))
		if p50 >= consoleBudget {
			t.Errorf("%s: median %v of %d calls, want under %v", c.name, p50, scaleCalls, consoleBudget)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// loadConsoleState adds to db what the console lists besides usage: the
// stored keys key-0 … of LoadYear's records, the billing accounts they
// bill, async jobs of the last days, and audit entries of the last month.
func loadConsoleState(t *testing.T, db *sqldb.DB, now time.Time) {
	ctx := t.Context()
	created := now.AddDate(-1, 0, 0).UnixMicro()
	if _, err := db.Exec(ctx, `INSERT INTO keys (id, name, tenant, hash, prefix, status, models, priority, expires_at, created_at,
			updated_at, static, labels, settings)
		SELECT 'key-' || g, 'Key ' || g, 'tenant-' || (g / ?), 'hash-' || g, 'sk-sluice-k' || g, 'active', '[]', '', NULL,
			?::bigint + g::bigint * 1000000, ?::bigint + g::bigint * 1000000, FALSE, '{"team":"team-' || (g % 10) || '"}', '{}'
		FROM generate_series(0, ? - 1) g`, scaleKeys/scaleTenants, created, created, scaleKeys); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO billing_accounts (id, plan, max_inflight, on_limit, allowance_micros, cycle,
			budget_day_micros, budget_month_micros, updated_at, overdraft_micros)
		SELECT 'acct-' || g, 'standard', 4, 'wait', 0, 'month', 0, 0, ?, 0 FROM generate_series(0, ? - 1) g`,
		created, scaleTenants); err != nil {
		t.Fatal(err)
	}
	jobs := sqlstore.New(db)
	for i := range scaleJobs {
		queued := now.Add(-time.Duration(i) * 5 * time.Minute)
		j := store.Job{ID: fmt.Sprintf("job-%d", i), RequestID: fmt.Sprintf("req-job-%d", i), KeyID: fmt.Sprintf("key-%d", i%scaleKeys),
			Tenant: fmt.Sprintf("tenant-%d", i%scaleTenants), Protocol: "openai.videos", Alias: "video", EdgeID: "cred-1/ep-a/sora-2",
			CredentialID: "cred-1", EndpointID: "ep-a", AccountID: "org-1", Model: "sora-2", UpstreamID: fmt.Sprintf("video_%d", i),
			State: sluice.JobCompleted, Queued: queued, Submitted: queued, Ended: queued.Add(time.Minute), Expires: now.AddDate(0, 0, 7)}
		if err := jobs.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO audit_log (id, at, token_id, remote, method, path, action, targets, status, error)
		SELECT g, ?::bigint - g::bigint * 120000000, 'ops', '127.0.0.1', 'POST', '/admin/keys/key-' || g || '/disable', 'keys.disable',
			'["key-' || g || '"]', 200, ''
		FROM generate_series(1, ?) g`, now.UnixMicro(), scaleAudit); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO audit_targets (entry_id, target) SELECT g, 'key-' || g FROM generate_series(1, ?) g`, scaleAudit); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE audit_next SET id = ?`, scaleAudit); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"keys", "billing_accounts", "job_bindings", "audit_log", "audit_targets"} {
		if _, err := db.Exec(ctx, `ANALYZE `+table); err != nil {
			t.Fatal(err)
		}
	}
}

// wantItems checks that an answer is a JSON array of at least n items.
func wantItems(n int) func(string) error {
	return func(body string) error {
		var items []json.RawMessage
		if err := json.Unmarshal([]byte(body), &items); err != nil {
			return err
		}
		if len(items) < n {
			return fmt.Errorf("%d items, want at least %d", len(items), n)
		}
		return nil
	}
}

// wantSummary checks that a usage summary has at least n buckets.
func wantSummary(n int) func(string) error {
	return func(body string) error {
		var sum struct {
			Buckets []json.RawMessage `json:"buckets"`
			Total   struct{ Requests int64 }
		}
		if err := json.Unmarshal([]byte(body), &sum); err != nil {
			return err
		}
		if len(sum.Buckets) < n || sum.Total.Requests == 0 {
			return fmt.Errorf("%d buckets, %d requests; want at least %d buckets", len(sum.Buckets), sum.Total.Requests, n)
		}
		return nil
	}
}

// wantRows checks that a spend report has at least n rows.
func wantRows(n int) func(string) error {
	return func(body string) error {
		var rep struct{ Rows []json.RawMessage }
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			return err
		}
		if len(rep.Rows) < n {
			return fmt.Errorf("%d rows, want at least %d", len(rep.Rows), n)
		}
		return nil
	}
}
