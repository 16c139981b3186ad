package admin_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/memcatalog"
	"github.com/sluicehq/sluice/internal/ledger"
)

const (
	testToken     = "admin-token-for-tests-0123456789" // the write token "admin"
	testReadToken = "admin-read-token-for-tests-4242"  // the read token "dashboard"
)

// testTokens are the harness's admin tokens.
var testTokens = []admin.Token{
	{ID: "admin", Secret: testToken, Role: admin.RoleWrite},
	{ID: "dashboard", Secret: testReadToken, Role: admin.RoleRead},
}

// fakeCatalog is an admin.Catalog: a document is invalid when it contains
// "invalid", and Apply is refused while readOnly.
type fakeCatalog struct {
	mu       sync.Mutex
	st       admin.CatalogStatus
	readOnly bool
	versions memcatalog.Store // every applied document (see catalog_versions_test.go)
	replicas []catalog.Replica
}

func newFakeCatalog() *fakeCatalog {
	return &fakeCatalog{st: admin.CatalogStatus{
		Version: 1, Source: "store", LoadedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Document: []byte("version: 1\nmodels: []\n"), Aliases: []string{"fast"},
	}}
}

func (f *fakeCatalog) Status() admin.CatalogStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *fakeCatalog) Apply(ctx context.Context, doc []byte, ifVersion int64, _ bool, by string) (admin.CatalogStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(ctx, catalog.CatalogVersion{Doc: doc, By: by}, ifVersion)
}

// apply is Apply of next.Doc (f.mu held), stored with next's author and
// rollback.
func (f *fakeCatalog) apply(ctx context.Context, next catalog.CatalogVersion, ifVersion int64) (admin.CatalogStatus, error) {
	doc := next.Doc
	switch {
	case f.readOnly:
		return admin.CatalogStatus{}, fmt.Errorf("catalog is managed by /etc/sluice.yaml: %w", admin.ErrCatalogReadOnly)
	case ifVersion != 0 && ifVersion != f.st.Tag():
		return admin.CatalogStatus{}, fmt.Errorf("catalog version is %d, not %d: %w", f.st.Tag(), ifVersion, catalog.ErrConflict)
	case bytes.Contains(doc, []byte("invalid")):
		return admin.CatalogStatus{}, &admin.InvalidCatalogError{Err: errors.Join(
			errors.New("models[0].alias: required"),
			errors.New("endpoints[1].base_url: not a URL"),
		)}
	}
	v, err := f.versions.SaveCatalog(ctx, next, 0)
	if err != nil {
		return admin.CatalogStatus{}, err
	}
	f.st.Version++
	f.st.StoredVersion = v.Version
	f.st.Document = bytes.Clone(doc)
	f.st.LoadedAt = time.Now()
	return f.st, nil
}

func (f *fakeCatalog) setReadOnly(ro bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readOnly = ro
}

// fakeUsage is a ledger.Usage holding fixed records and fixed execution
// counts.
type fakeUsage struct {
	mu        sync.Mutex
	recs      []sluice.UsageRecord
	counts    []ledger.PolicyCount
	gotUsage  ledger.UsageFilter
	gotBucket ledger.Bucket
	gotFilter ledger.PolicyFilter
	cacheRows []ledger.CacheRow // what CacheReport returns
	gotCache  ledger.CacheFilter
	// upstream is what UpstreamReport returns, by the filter's span
	// (To - From); upstreamErr, its error.
	upstream    map[time.Duration][]ledger.UpstreamRow
	upstreamErr error
	gotUpstream []ledger.UpstreamFilter
}

func (f *fakeUsage) RecordUsage(_ context.Context, recs []sluice.UsageRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs = append(f.recs, recs...)
	return nil
}

func (f *fakeUsage) ListUsage(_ context.Context, filter ledger.UsageFilter) ([]sluice.UsageRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotUsage = filter
	var out []sluice.UsageRecord
	for _, r := range f.recs {
		if filter.Selects(&r) && (filter.Limit <= 0 || len(out) < filter.Limit) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeUsage) SummarizeUsage(_ context.Context, filter ledger.UsageFilter, bucket ledger.Bucket) (ledger.UsageSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotUsage, f.gotBucket = filter, bucket
	sum := ledger.NewSummarizer(bucket)
	for _, r := range f.recs {
		if filter.Selects(&r) {
			sum.Add(&r)
		}
	}
	return sum.Summary(), nil
}

func (f *fakeUsage) CountExecutions(_ context.Context, filter ledger.PolicyFilter) ([]ledger.PolicyCount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotFilter = filter
	return f.counts, nil
}

func (f *fakeUsage) CacheReport(_ context.Context, filter ledger.CacheFilter) ([]ledger.CacheRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotCache = filter
	return f.cacheRows, nil
}

func (f *fakeUsage) UpstreamReport(_ context.Context, filter ledger.UpstreamFilter) ([]ledger.UpstreamRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotUpstream = append(f.gotUpstream, filter)
	return f.upstream[filter.To.Sub(filter.From)], f.upstreamErr
}

// setCacheRows sets what CacheReport returns.
func (f *fakeUsage) setCacheRows(rows ...ledger.CacheRow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cacheRows = rows
}

// cacheFilter returns the argument of the last CacheReport.
func (f *fakeUsage) cacheFilter() ledger.CacheFilter {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gotCache
}

// setCounts sets what CountExecutions returns.
func (f *fakeUsage) setCounts(counts ...ledger.PolicyCount) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = counts
}

// filter returns the argument of the last CountExecutions.
func (f *fakeUsage) filter() ledger.PolicyFilter {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gotFilter
}

// got returns the filter of the last ListUsage or SummarizeUsage, and the
// bucket of the last SummarizeUsage.
func (f *fakeUsage) got() (ledger.UsageFilter, ledger.Bucket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gotUsage, f.gotBucket
}

// syncBuffer collects log output written by server goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness is an admin API on a real HTTP server, over a real keyring on
// the in-memory catalog store.
type harness struct {
	url     string
	handler http.Handler // what admin.New returned
	keys    *authn.Keyring
	audit   *memcatalog.Store // the store of keys and the audit log
	catalog *fakeCatalog
	usage   *fakeUsage
	pool    *fakePool
	billing *fakeBilling
	logs    *syncBuffer
	client  *adminclient.Client
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	store := new(memcatalog.Store)
	h := &harness{
		keys:    authn.NewKeyring(store),
		audit:   store,
		catalog: newFakeCatalog(),
		usage:   &fakeUsage{},
		pool:    newFakePool(),
		billing: newFakeBilling(t),
		logs:    &syncBuffer{},
	}
	h.keys.TrackSuspensions(store)
	h.handler = admin.New(admin.Options{
		Tokens:  testTokens,
		Audit:   store,
		Keys:    h.keys,
		Usage:   h.usage,
		Catalog: h.catalog,
		Pool:    h.pool,
		Billing: h.billing,
		// The end user web/alice is entitled to free.
		Entitlements: harnessEntitlements(t),
		Metrics:      http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "sluice_up 1\n") }),
		Log:          slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	srv := httptest.NewServer(h.handler)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	h.client = adminclient.NewClient(srv.URL, testToken)
	return h
}

// do sends one raw request with the admin token (token "" sends none).
func (h *harness) do(t *testing.T, method, path, token, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
