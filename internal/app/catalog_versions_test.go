package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The stored catalog's versions, as every replica on one database follows
// them. versionedCatalog is a catalog stored through the admin API: %s is
// the state section, then the simulator's URL; models follow it.
const versionedCatalog = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 2s
database: {spool_dir: %q}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
credentials:
  - {id: cred-a1, secret_env: UP_A1, endpoints: [ep-a]}
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
models:
  - alias: fast
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
`

// withSmart adds the alias smart; withBeta adds beta on a credential whose
// secret is in UP_B1, which a replica may lack.
const (
	withSmart = `  - alias: smart
    deployments: [{model: gpt-4o, endpoints: [ep-a]}]
`
	withBeta = `  - alias: beta
    deployments: [{model: gpt-4o-beta, endpoints: [ep-a]}]
`
	credB1 = `  - {id: cred-b1, secret_env: UP_B1, endpoints: [ep-a]}
`
)

// fleet is gateways sharing one database, started from its stored catalog.
type fleet struct {
	t     *testing.T
	base  string // versionedCatalog filled in, without further models
	gws   []*app.Gateway
	names []string
}

// newFleet stores base as version 1 on the database at dbURL, then starts
// one gateway per environment in envs (testEnv less the names listed),
// each following the store.
func newFleet(t *testing.T, dbURL, state string, without ...[]string) *fleet {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	f := &fleet{t: t, base: fmt.Sprintf(versionedCatalog, t.TempDir(), state, srv.URL)}

	db, err := sqldb.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlcatalog.New(db).SaveCatalog(t.Context(), catalog.CatalogVersion{Doc: []byte(f.base), By: "seed"}, 0)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i, drop := range without {
		env := maps.Clone(testEnv)
		for _, name := range drop {
			delete(env, name)
		}
		name := string(rune('A' + i))
		logs := &syncBuffer{}
		gw, err := app.Start(t.Context(), app.Options{
			Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", DatabaseURL: dbURL,
			Log:       slog.New(slog.NewJSONHandler(logs, nil)),
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() {
			if err := gw.Close(); err != nil {
				t.Errorf("close %s: %v", name, err)
			}
			if strings.Contains(logs.String(), secretB1) || strings.Contains(logs.String(), testEnv["ADMIN_TOKEN"]) {
				t.Errorf("a secret reached %s's log", name)
			}
		})
		f.gws, f.names = append(f.gws, gw), append(f.names, name)
	}
	return f
}

func (f *fleet) client(i int) *adminclient.Client {
	return adminclient.NewClient("http://"+f.gws[i].AdminAddr(), testEnv["ADMIN_TOKEN"])
}

// status is replica i's GET /admin/status.
func (f *fleet) status(i int) *admin.Status {
	f.t.Helper()
	st, err := f.client(i).Status(f.t.Context())
	if err != nil {
		f.t.Fatalf("status of %s: %v", f.names[i], err)
	}
	return st
}

// serves reports whether replica i answers a chat request for alias.
func (f *fleet) serves(i int, alias string) bool {
	req, _ := http.NewRequestWithContext(f.t.Context(), http.MethodPost, "http://"+f.gws[i].Addr()+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+alias+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Errorf("chat with %s on %s: %v", alias, f.names[i], err)
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// apply stores base with the models and credentials more adds through
// replica i, and returns the stored version.
func (f *fleet) apply(i int, doc string) int64 {
	f.t.Helper()
	st, err := f.client(i).ApplyCatalog(f.t.Context(), []byte(doc), 0, false)
	if err != nil {
		f.t.Fatalf("apply through %s: %v", f.names[i], err)
	}
	return st.StoredVersion
}

// within waits up to 2 s, from since, until every replica of which passes.
func (f *fleet) within(since time.Time, what string, which []int, cond func(i int) bool) {
	f.t.Helper()
	for _, i := range which {
		eventually(f.t, 2*time.Second-time.Since(since), f.names[i]+": "+what, func() bool { return cond(i) })
	}
}

// withCredential adds a credential to doc's credentials.
func withCredential(doc, cred string) string {
	return strings.Replace(doc, "keys:\n", cred+"keys:\n", 1)
}

// TestCatalogVersionsOnPostgres: three gateways on one PostgreSQL and one
// Redis follow what is applied through any of them within 2 s; a version
// that does not load on one (its environment lacks a secret) leaves that
// one serving its last good version with the error in its status; the
// replica taking an apply refuses what does not load there; a rollback
// restores everywhere; every status lists the three with their versions.
func TestCatalogVersionsOnPostgres(t *testing.T) {
	dbURL, redisURL := testenv.Postgres(t), testenv.Redis(t)
	f := newFleet(t, dbURL, redisState(redisURL, testenv.RedisPrefix(t, redisURL)), nil, nil, []string{"UP_B1"})
	all := []int{0, 1, 2}

	f.within(time.Now().Add(3*time.Second), "three replicas at version 1 in the status", []int{0}, func(int) bool {
		st := f.status(0)
		return len(st.Replicas) == 3 && !slices.ContainsFunc(st.Replicas, func(r admin.ReplicaStatus) bool { return r.Version != 1 })
	})

	// Applied through A: all three serve the new alias within 2 s.
	start := time.Now()
	if v := f.apply(0, f.base+withSmart); v != 2 {
		t.Fatalf("apply stored version %d, want 2", v)
	}
	f.within(start, "serves smart", all, func(i int) bool { return f.serves(i, "smart") })

	// Valid on A and B, not on C, which lacks UP_B1: C keeps version 2.
	beta := withCredential(f.base+withSmart+withBeta, credB1)
	start = time.Now()
	f.apply(0, beta)
	f.within(start, "serves beta", []int{0, 1}, func(i int) bool { return f.serves(i, "beta") })
	f.within(start, "reports version 3 failing", []int{2}, func(i int) bool { return f.status(i).LastError != "" })
	if st := f.status(2); st.StoredVersion != 2 || !strings.Contains(st.LastError, "UP_B1") || !f.serves(2, "smart") || f.serves(2, "beta") {
		t.Errorf("C after version 3 = stored version %d, error %q; want version 2 serving smart, not beta, and the error naming UP_B1",
			st.StoredVersion, st.LastError)
	}
	if _, _, body := adminSend(t, f.gws[2], http.MethodGet, "/metrics", "", ""); !strings.Contains(body, "sluice_catalog_reload_failing 1") {
		t.Error("C's sluice_catalog_reload_failing is not 1")
	}
	f.within(time.Now(), "lists C at version 2 with its error", []int{1}, func(i int) bool {
		return slices.ContainsFunc(f.status(i).Replicas, func(r admin.ReplicaStatus) bool {
			return r.Version == 2 && strings.Contains(r.LastError, "UP_B1")
		})
	})

	// C refuses to take what does not load there, and nothing is stored.
	code, _, body := adminSend(t, f.gws[2], http.MethodPut, "/admin/catalog", testEnv["ADMIN_TOKEN"], beta)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "catalog_invalid") || !strings.Contains(body, "UP_B1") {
		t.Errorf("apply through C = %d %s, want 422 catalog_invalid naming UP_B1", code, body)
	}
	if vs, err := f.client(1).CatalogVersions(t.Context(), 0); err != nil || len(vs) != 3 {
		t.Fatalf("history = %+v, %v; want 3 versions", vs, err)
	}

	// Rolled back to 2 through B: everyone serves version 2's aliases as
	// version 4, and C's alarm clears.
	start = time.Now()
	st, err := f.client(1).RollbackCatalog(t.Context(), 2)
	if err != nil || st.StoredVersion != 4 {
		t.Fatalf("rollback to 2 = %+v, %v; want stored version 4", st, err)
	}
	f.within(start, "stops serving beta", all, func(i int) bool { return !f.serves(i, "beta") })
	f.within(start, "serves version 4 without an error", all, func(i int) bool {
		st := f.status(i)
		return st.StoredVersion == 4 && st.LastError == ""
	})
	for _, i := range all {
		if !f.serves(i, "smart") {
			t.Errorf("%s does not serve smart after the rollback", f.names[i])
		}
	}
	f.within(time.Now().Add(time.Second), "lists the three at version 4", []int{2}, func(i int) bool {
		st := f.status(i)
		return len(st.Replicas) == 3 && !slices.ContainsFunc(st.Replicas, func(r admin.ReplicaStatus) bool {
			return r.Version != 4 || r.LastError != "" || r.Source != "store"
		})
	})

	vs, err := f.client(2).CatalogVersions(t.Context(), 0)
	if err != nil || len(vs) != 4 || vs[0].RollbackOf != 2 || vs[0].By != "admin" || vs[3].By != "seed" {
		t.Errorf("history = %+v, %v; want 4 versions, the newest a rollback of 2 by admin", vs, err)
	}
	entries, err := f.client(0).Audit(t.Context(), adminclient.AuditQuery{Target: "catalog"})
	if err != nil || len(entries) != 4 || entries[0].Action != "catalog.rollback" || entries[1].Error != "catalog_invalid" {
		t.Errorf("catalog audit = %+v, %v; want the rollback, the refused apply and the two applies", entries, err)
	}
}

// TestCatalogVersionsOnSQLite: two gateways sharing one SQLite file follow
// each other's applies and rollbacks within 2 s.
func TestCatalogVersionsOnSQLite(t *testing.T) {
	f := newFleet(t, "sqlite://"+filepath.Join(t.TempDir(), "sluice.db"), "{backend: memory}", nil, nil)
	start := time.Now()
	f.apply(1, f.base+withSmart)
	f.within(start, "serves smart", []int{0, 1}, func(i int) bool { return f.serves(i, "smart") })

	start = time.Now()
	if _, err := f.client(0).RollbackCatalog(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.within(start, "stops serving smart", []int{0, 1}, func(i int) bool { return !f.serves(i, "smart") })
	for i := range 2 {
		if st := f.status(i); st.StoredVersion != 3 || !f.serves(i, "fast") {
			t.Errorf("%s after the rollback: stored version %d, want 3 serving fast", f.names[i], st.StoredVersion)
		}
	}
	f.within(time.Now().Add(time.Second), "lists both", []int{0}, func(i int) bool { return len(f.status(i).Replicas) == 2 })

	// If-Match names the stored version, which both replicas number
	// alike: what was read from one cannot overwrite an apply made through
	// the other.
	_, seen, err := f.client(0).Catalog(t.Context())
	if err != nil || seen != 3 {
		t.Fatalf("catalog ETag = %d, %v; want the stored version 3", seen, err)
	}
	f.apply(1, f.base+withSmart) // version 4, through the other replica
	_, err = f.client(0).ApplyCatalog(t.Context(), []byte(f.base), seen, false)
	if apiErr, ok := errors.AsType[*adminclient.APIError](err); !ok || apiErr.Code != "catalog_version_conflict" {
		t.Errorf("apply with If-Match %d after version 4 = %v, want 412 catalog_version_conflict", seen, err)
	}
	f.within(time.Now(), "serves version 4", []int{0}, func(i int) bool { return f.status(i).StoredVersion == 4 })
	if _, err := f.client(0).ApplyCatalog(t.Context(), []byte(f.base), 4, false); err != nil {
		t.Errorf("apply with If-Match 4 = %v, want it stored", err)
	}
}

// TestFileCatalogWinsOverTheStore: a gateway whose catalog is a file does
// not follow the store, refuses applies and rollbacks, and is listed with
// its source.
func TestFileCatalogWinsOverTheStore(t *testing.T) {
	h := newHarness(t)
	db, err := sqldb.Open(t.Context(), "sqlite://"+h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlcatalog.New(db).SaveCatalog(context.Background(), catalog.CatalogVersion{Doc: []byte("version: 1\nmodels: []\n")}, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * app.CatalogPoll) // time to follow, if it did
	cl := adminclient.NewClient("http://"+h.gw.AdminAddr(), testEnv["ADMIN_TOKEN"])
	st, err := cl.Status(t.Context())
	if err != nil || st.StoredVersion != 0 || !strings.HasPrefix(st.Source, "file:") || !slices.Contains(st.Aliases, "fast") {
		t.Fatalf("status = %+v, %v; want the file's catalog serving", st, err)
	}
	if _, err := cl.RollbackCatalog(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "catalog_read_only") {
		t.Errorf("rollback on a file catalog = %v, want catalog_read_only", err)
	}
	eventually(t, 3*time.Second, "the file replica listed", func() bool {
		st, err := cl.Status(t.Context())
		return err == nil && len(st.Replicas) == 1 && st.Replicas[0].Source == st.Source && st.Replicas[0].Version == 0
	})
}
