package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// adminPost sends body to the admin API with the test token and, unless
// "", the Idempotency-Key idem; it returns the status and the body.
func adminPost(t *testing.T, h *harness, path, idem, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+h.gw.AdminAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testEnv["ADMIN_TOKEN"])
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set(admin.IdempotencyHeader, idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The overflow sequence of money amounts: a top-up of the largest int64
// amount, then a top-up to the bound and one micro-unit past it, then an
// adjustment to the negative end of int64. Each one past the bound is 400
// naming it, nothing is posted, and billing stays up: the accounts are
// listed and billed requests served.
func TestBillingAmountsAreBounded(t *testing.T) {
	h := billed(t, "max_inflight: 1", "", "", simulator.Options{})
	const bound = "±1000000000000.00"
	for _, step := range []struct {
		path, amount string
		status       int
	}{
		{"topup", "9223372036854.775807", http.StatusBadRequest},
		{"topup", "1000000000000.00", http.StatusOK},
		{"topup", "0.000001", http.StatusBadRequest},
		{"adjust", "-9223372036854.775808", http.StatusBadRequest},
		{"adjust", "-1000000000001.00", http.StatusBadRequest},
	} {
		status, body := adminPost(t, h, "/admin/billing/accounts/acme/"+step.path, "",
			fmt.Sprintf(`{"amount": %q, "reason": "probe"}`, step.amount))
		if status != step.status || status == http.StatusBadRequest && !strings.Contains(body, bound) {
			t.Errorf("%s of %s = %d %s; want %d (a 400 naming the bound %s)", step.path, step.amount, status, body, step.status, bound)
		}
	}
	status, body := h.adminGet("/admin/billing/accounts/acme")
	if status != http.StatusOK || !strings.Contains(body, `"balance":"1000000000000.00"`) {
		t.Errorf("GET the account = %d %s; want 200, balance 1000000000000.00", status, body)
	}
	for range 3 {
		if e := sdkErr(t, h, keyWeb, "fast"); e != nil {
			t.Fatalf("a billed request after the refused top-ups: %v", e)
		}
	}
	c := h.adminClient()
	if _, err := c.PutBillingAccount(t.Context(), "vip", admin.BillingAccountSpec{Plan: "standard", Allowance: billing.MaxAmount + 1}); err == nil ||
		!strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), bound) {
		t.Errorf("PUT of an account with an allowance past the bound = %v; want a 400 naming the bound", err)
	}
}

// One Idempotency-Key is one change: reused for an adjustment after a
// top-up it is 409 idempotency_key_reused and nothing is posted, as it is
// with the same kind and another amount; the same top-up again answers
// the first entry, applied false.
func TestBillingIdempotencyKeyAcrossKinds(t *testing.T) {
	h := billed(t, "max_inflight: 1", "", "", simulator.Options{})
	for _, step := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"topup", `{"amount": "5.00"}`, http.StatusOK, `"applied":true`},
		{"adjust", `{"amount": "5.00", "reason": "the same key"}`, http.StatusConflict, "idempotency_key_reused"},
		{"adjust", `{"amount": "-5.00", "reason": "the same key"}`, http.StatusConflict, "idempotency_key_reused"},
		{"topup", `{"amount": "6.00"}`, http.StatusConflict, "idempotency_key_reused"},
		{"topup", `{"amount": "5.00"}`, http.StatusOK, `"applied":false`},
	} {
		status, body := adminPost(t, h, "/admin/billing/accounts/acme/"+step.path, "inv-1", step.body)
		if status != step.status || !strings.Contains(body, step.want) {
			t.Errorf("%s %s with key inv-1 = %d %s; want %d %s", step.path, step.body, status, body, step.status, step.want)
		}
	}
	if status, body := h.adminGet("/admin/billing/accounts/acme"); !strings.Contains(body, `"balance":"5.00"`) {
		t.Errorf("GET the account = %d %s; want balance 5.00: the key made one change", status, body)
	}
}

// 50 requests at once on a balance of 5.00, 1.00 each, with max_inflight
// 50: each request's worst case is held while it runs, so 5 run and the
// balance ends at 0, not −45.00; with overdraft 2.00, 7 run and it ends at
// −2.00.
func TestBillingOverdraftBoundsParallelRequests(t *testing.T) {
	for _, tt := range []struct {
		account string
		ok      int
		balance billing.Micros
	}{
		{"max_inflight: 50", 5, 0},
		{`max_inflight: 50, overdraft: "2.00"`, 7, -2 * billing.Unit},
	} {
		t.Run(tt.account, func(t *testing.T) {
			h := billed(t, tt.account, "", "", simulator.Options{Default: simulator.Behavior{Latency: 300 * time.Millisecond}})
			l := ledgerOf(t, h)
			topUp(t, h, l, "acme", "5.00")
			codes := parallelOutcomes(t, h, 50)
			if codes["ok"] != tt.ok || codes["429 billing_quota_exhausted"] != 50-tt.ok {
				t.Errorf("outcomes = %v; want %d ok, the rest 429 billing_quota_exhausted", codes, tt.ok)
			}
			var got billing.Micros
			eventually(t, 5*time.Second, "the charges in the ledger", func() bool {
				b, err := l.Balances(t.Context(), time.Now())
				got = b.Accounts["acme"].Balance
				return err == nil && got == tt.balance
			})
		})
	}
}

// A record the database refuses for what it holds — here a rule the test
// adds to the database, refusing the end user "poison" (a CHECK constraint
// on PostgreSQL, a trigger on SQLite) — does not stop usage recording: it
// is set aside (counted, and kept in the spool's set-aside file), and the
// records of the 48 requests after it are all written, on both databases.
func TestUsageWriterSetsAsideARefusedRecord(t *testing.T) {
	t.Run("PostgreSQL", func(t *testing.T) {
		url, dir := testenv.Postgres(t), t.TempDir()
		h := newHarnessWith(t, onPostgres(catalogTemplate, url, filepath.Join(dir, "spool")), "{backend: memory}", simulator.Options{})
		setAsideOne(t, h, url, filepath.Join(dir, "spool"),
			`ALTER TABLE usage_records ADD CONSTRAINT no_poison CHECK (end_user <> 'poison')`)
	})
	t.Run("SQLite", func(t *testing.T) {
		h := newHarness(t)
		setAsideOne(t, h, "sqlite://"+h.dbPath, h.dbPath+"-spool",
			`CREATE TRIGGER no_poison BEFORE INSERT ON usage_records WHEN NEW.end_user = 'poison' BEGIN SELECT RAISE(ABORT, 'poison'); END`)
	})
}

// setAsideOne makes the database at url refuse records by rule, sends one
// request it refuses and 48 it takes through h, and checks that the 48 are
// written and the one set aside in spool.
func setAsideOne(t *testing.T, h *harness, url, spool, rule string) {
	t.Helper()
	db, err := sqldb.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(t.Context(), rule); err != nil {
		t.Fatal(err)
	}
	l := sqlledger.New(db)
	if status, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb,
		`{"model":"fast","user":"poison","messages":[{"role":"user","content":"hello"}]}`); status != http.StatusOK {
		t.Fatalf("the request of end user poison = %d %s; want 200", status, body)
	}
	for range 48 {
		if status, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); status != http.StatusOK {
			t.Fatalf("chat = %d %s", status, body)
		}
	}
	eventually(t, 10*time.Second, "the 48 other records written", func() bool {
		recs, err := l.ListUsage(context.Background(), ledger.UsageFilter{})
		return err == nil && len(recs) == 48
	})
	if _, metrics := h.adminGet("/metrics"); !strings.Contains(metrics, "sluice_usage_records_set_aside_total 1") {
		t.Error("the set-aside record is not counted in sluice_usage_records_set_aside_total")
	}
	if b, err := os.ReadFile(filepath.Join(spool, "set-aside.seg")); err != nil || !strings.Contains(string(b), "poison") {
		t.Errorf("set-aside file = %q, %v; want the refused record in it", b, err)
	}
}
