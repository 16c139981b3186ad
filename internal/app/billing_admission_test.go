package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// billingTemplate is catalogTemplate's layout (fastOnEpA) billed: every
// request of "fast" costs 1.00 under plan standard; "unpriced" has no
// price. Key web is bound to acme (its concurrency and on_limit are
// ACCOUNT), key scoped to no account. BUDGETS is web's.
const billingTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 10s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
` + fastOnEpA + `  - alias: unpriced
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB, billing_account: acme BUDGETS}
  - {id: scoped, tenant: web, secret_env: KEY_SCOPED}
billing:
  plans:
    - id: standard
      prices:
        - {alias: fast, request: "1.00", effective_from: "2020-01-01T00:00:00Z"}
PRICES  costs:
    - {model: gpt-4o-mini, request: "0.25", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: acme, plan: standard, ACCOUNT}
`

// billingDoc is billingTemplate with acme's settings account (e.g.
// "max_inflight: 1"), web's budgets (", budgets: {…}" or ""), and further
// prices of plan standard (YAML list items, or "").
func billingDoc(account, budgets, prices string) string {
	return strings.NewReplacer("ACCOUNT", account, " BUDGETS", budgets, "PRICES", prices).Replace(billingTemplate)
}

// billed starts a gateway on billingDoc(account, budgets, prices).
func billed(t *testing.T, account, budgets, prices string, sim simulator.Options) *harness {
	t.Helper()
	return newHarnessWith(t, billingDoc(account, budgets, prices), "{backend: memory}", sim)
}

// ledgerOf opens the gateway's ledger store on a handle of its own.
func ledgerOf(t *testing.T, h *harness) *sqlledger.Store {
	t.Helper()
	db, err := sqldb.Open(t.Context(), "sqlite://"+h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return sqlledger.New(db)
}

// topUp pays amount into account and waits until the gateway's view has
// read it (it refreshes every second).
func topUp(t *testing.T, h *harness, l *sqlledger.Store, account, amount string) {
	t.Helper()
	m, err := billing.ParseMoney(amount)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Post(t.Context(), ledger.Entry{Account: account, RequestID: "topup-" + amount, Kind: ledger.EntryTopUp, Amount: m, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
}

// sdkErr sends one chat request through the official SDK and returns its
// API error (nil on success).
func sdkErr(t *testing.T, h *harness, key, model string) *openai.Error {
	t.Helper()
	_, err := h.sdk(key).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	if err == nil {
		return nil
	}
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %v, want an API error", model, err)
	}
	return e
}

// startStream starts a long stream of key's through h in the background,
// waits until it is upstream, and returns where its error will arrive.
func startStream(t *testing.T, h *harness, key string) <-chan error {
	t.Helper()
	stream := make(chan error)
	go func() {
		s := h.sdk(key).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: "fast", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a long story")},
		})
		for s.Next() {
		}
		stream <- s.Err()
	}()
	eventually(t, 2*time.Second, "the stream upstream", func() bool { return h.simA.InFlight() == 1 })
	return stream
}

func wantCode(t *testing.T, what string, e *openai.Error, status int, code string) {
	t.Helper()
	if e == nil || e.StatusCode != status || e.Code != code {
		t.Errorf("%s = %v, want %d %s", what, e, status, code)
	}
}

// With account concurrency 1 and a balance worth 3 requests, 20 concurrent
// requests: 3 run (each waiting one sees the charges, or the worst cases
// held, of those before it), the balance ends at 0, and every other
// request is refused with billing_quota_exhausted.
func TestBillingBalanceBoundsConcurrentRequests(t *testing.T) {
	h := billed(t, "max_inflight: 1", "", "", simulator.Options{Default: simulator.Behavior{Latency: 20 * time.Millisecond}})
	l := ledgerOf(t, h)
	topUp(t, h, l, "acme", "3.00")

	codes := parallelOutcomes(t, h, 20)
	if codes["ok"] != 3 || codes["429 billing_quota_exhausted"] != 17 {
		t.Errorf("outcomes = %v, want 3 ok and the rest 429 billing_quota_exhausted", codes)
	}
	eventually(t, 5*time.Second, "the charges in the ledger", func() bool {
		b, err := l.Balances(t.Context(), time.Now())
		return err == nil && b.Accounts["acme"].Balance == billing.Micros(3-codes["ok"])*billing.Unit
	})
}

// Each refusal of admission has its code, reached through the SDK: an
// unbound key, an alias without a price (refused before any claim: the
// upstream never sees it), a spent budget, the account's own concurrency
// with on_limit refuse.
func TestBillingRefusals(t *testing.T) {
	h := billed(t, "max_inflight: 1, on_limit: refuse", `, budgets: {day: "1.50"}`, "",
		simulator.Options{Default: simulator.Behavior{Latency: 300 * time.Millisecond}})
	l := ledgerOf(t, h)
	topUp(t, h, l, "acme", "100.00")

	wantCode(t, "an unbound key", sdkErr(t, h, keyScoped, "fast"), http.StatusForbidden, "access_key_unbound")
	wantCode(t, "an alias without a price", sdkErr(t, h, keyWeb, "unpriced"), http.StatusServiceUnavailable, "billing_price_unavailable")
	if n := len(h.simA.Requests()); n != 0 {
		t.Errorf("the upstream saw %d requests, want none", n)
	}

	// One request holds acme's only slot; the next is refused at once.
	first := make(chan *openai.Error)
	go func() { first <- sdkErr(t, h, keyWeb, "fast") }()
	eventually(t, 2*time.Second, "the first request upstream", func() bool { return h.simA.InFlight() == 1 })
	wantCode(t, "a request beyond acme's concurrency", sdkErr(t, h, keyWeb, "fast"), http.StatusTooManyRequests, "access_concurrency_exceeded")
	if e := <-first; e != nil {
		t.Fatalf("first request: %v", e)
	}
	if e := sdkErr(t, h, keyWeb, "fast"); e != nil { // 1.00 spent of 1.50
		t.Fatalf("second request: %v", e)
	}
	wantCode(t, "a request past web's daily budget", sdkErr(t, h, keyWeb, "fast"), http.StatusTooManyRequests, "billing_quota_exhausted")
}

// A price changed while a long stream runs: that request is charged the
// price in force when it arrived, the next one the new price.
func TestBillingPriceFixedAtAdmission(t *testing.T) {
	h := billed(t, "max_inflight: 2", "", "", simulator.Options{Default: simulator.Behavior{ChunkDelay: 100 * time.Millisecond}})
	l := ledgerOf(t, h)
	topUp(t, h, l, "acme", "100.00")

	stream := startStream(t, h, keyWeb)
	from := time.Now().Add(time.Second).Truncate(time.Second)
	version := h.gw.Live().Load().Version
	h.template = billingDoc("max_inflight: 2", "",
		fmt.Sprintf("        - {alias: fast, request: \"2.00\", effective_from: %q}\n", from.Format(time.RFC3339)))
	h.writeCatalog(h.catalog())
	eventually(t, 3*time.Second, "the new price serving", func() bool { return h.gw.Live().Load().Version > version })
	if err := <-stream; err != nil {
		t.Fatalf("stream: %v", err)
	}
	time.Sleep(time.Until(from))
	if e := sdkErr(t, h, keyWeb, "fast"); e != nil {
		t.Fatal(e)
	}
	var prices []int64
	eventually(t, 5*time.Second, "both records", func() bool {
		recs, err := l.ListUsage(t.Context(), ledger.UsageFilter{})
		prices = prices[:0]
		for _, r := range recs {
			if r.Billing != nil {
				prices = append(prices, r.Billing.Price)
			}
		}
		return err == nil && len(prices) == 2
	})
	if prices[0] != int64(billing.Unit) || prices[1] != 2*int64(billing.Unit) {
		t.Errorf("charged %v, want the stream 1.00 (its price when it began) and the next 2.00", prices)
	}
}

// With the ledger store out of reach for longer than the staleness bound,
// billed requests are refused (fail closed), counted in the metrics, and
// an unbilled gateway on the same store goes on serving.
func TestBillingStoreUnreachable(t *testing.T) {
	url := testenv.Postgres(t)
	dir := t.TempDir()
	h := newHarnessWith(t, onPostgres(billingDoc("max_inflight: 4", "", ""), url, dir+"/spool-billed"), "{backend: memory}", simulator.Options{})
	plain := newHarnessWith(t, onPostgres(catalogTemplate, url, dir+"/spool-plain"), "{backend: memory}", simulator.Options{})

	db, err := sqldb.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l := sqlledger.New(db)
	topUp(t, h, l, "acme", "100.00")
	if e := sdkErr(t, h, keyWeb, "fast"); e != nil {
		t.Fatalf("before the outage: %v", e)
	}

	schema := url[strings.Index(url, "search_path=")+len("search_path="):]
	schema = schema[:strings.IndexAny(schema+"&", "&")]
	if _, err := db.Exec(t.Context(), "ALTER SCHEMA "+schema+" RENAME TO "+schema+"_away"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(context.Background(), "ALTER SCHEMA "+schema+"_away RENAME TO "+schema) })
	time.Sleep(6500 * time.Millisecond) // past the 5s staleness bound
	wantCode(t, "a billed request with the store away", sdkErr(t, h, keyWeb, "fast"), http.StatusServiceUnavailable, "state_unavailable")
	if e := sdkErr(t, plain, keyWeb, "fast"); e != nil {
		t.Errorf("an unbilled request with the store away: %v", e)
	}
	if _, body := h.adminGet("/metrics"); !strings.Contains(body, "sluice_billing_unavailable_refusals_total 1") {
		t.Error("the refusal is not counted in sluice_billing_unavailable_refusals_total")
	}
	if _, err := db.Exec(t.Context(), "ALTER SCHEMA "+schema+"_away RENAME TO "+schema); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "billed requests served again", func() bool { return sdkErr(t, h, keyWeb, "fast") == nil })
}

// A key made through the admin API carries its billing account: bound, it
// is billed like a catalog key; an unknown account is refused with 400.
func TestBillingAPIKeyBinding(t *testing.T) {
	h := billed(t, "max_inflight: 1", "", "", simulator.Options{})
	l := ledgerOf(t, h)
	topUp(t, h, l, "acme", "1.00")
	c := h.adminClient()
	_, err := c.CreateKey(t.Context(), admin.KeySpec{ID: "api", Name: "API", Tenant: "web", KeySettings: admin.KeySettings{BillingAccount: "acne"}})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), `unknown billing account "acne"`) {
		t.Errorf("CreateKey with an unknown billing account = %v, want a 400 naming it", err)
	}
	created, err := c.CreateKey(t.Context(), admin.KeySpec{ID: "api", Name: "API", Tenant: "web", KeySettings: admin.KeySettings{BillingAccount: "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the key usable", func() bool { return sdkErr(t, h, created.Key, "fast") == nil })
	wantCode(t, "a second request on a spent balance", sdkErr(t, h, created.Key, "fast"), http.StatusTooManyRequests, "billing_quota_exhausted")
}

// parallelOutcomes sends n requests for "fast" with keyWeb at once and
// counts their outcomes: "ok", or the status and code of a refusal.
func parallelOutcomes(t *testing.T, h *harness, n int) map[string]int {
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			code := "ok"
			if e := sdkErr(t, h, keyWeb, "fast"); e != nil {
				code = fmt.Sprintf("%d %s", e.StatusCode, e.Code)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}
