package oauth

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

var testKey = bytes.Repeat([]byte{7}, config.SecretKeySize)

// clock is a settable clock shared by a test's managers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a log destination shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// world is a simulated provider with a token endpoint, a refresh token file
// and what the managers of one test share.
type world struct {
	t         *testing.T
	sim       *simulator.Simulator
	url       string
	file      string
	clock     *clock
	logs      *syncBuffer
	requests  atomic.Int64 // requests to the token endpoint
	mediaType atomic.Value // string: the Content-Type of the token endpoint's last request

	mu       sync.Mutex
	disabled []string // credential IDs Disable was called with, once per call
	reasons  []string
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, sim: simulator.New(simulator.Options{}), clock: &clock{t: time.Now()}, logs: &syncBuffer{}}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == simulator.OAuthTokenPath {
			w.requests.Add(1)
			w.mediaType.Store(r.Header.Get("Content-Type"))
		}
		w.sim.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	w.file = filepath.Join(t.TempDir(), "refresh-token")
	w.writeToken(w.sim.NewRefreshToken(simulator.Behavior{}, time.Hour))
	t.Cleanup(w.checkLogs)
	return w
}

func (w *world) writeToken(rt string) {
	w.t.Helper()
	if err := os.WriteFile(w.file, []byte(rt+"\n"), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// manager is a replica's Manager on db, told of the credential "max-1".
func (w *world) manager(db *sqldb.DB) *Manager {
	w.t.Helper()
	return w.managerSending(db, "")
}

// managerSending is manager with the credential's oauth.body set to body.
func (w *world) managerSending(db *sqldb.DB, body string) *Manager {
	w.t.Helper()
	m, err := New(Options{
		DB: db, Key: testKey, Now: w.clock.Now,
		Log: slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Disable: func(_ context.Context, id, reason string) {
			w.mu.Lock()
			w.disabled, w.reasons = append(w.disabled, id), append(w.reasons, reason)
			w.mu.Unlock()
		},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	m.Sync(w.t.Context(), []Spec{{CredentialID: "max-1", OAuth: config.OAuth{
		TokenURL: w.url + simulator.OAuthTokenPath, ClientID: "client-1", RefreshTokenFile: w.file, Scopes: []string{"user:inference"}, Body: body,
	}}})
	return m
}

func (w *world) disables() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.disabled...)
}

// simTokens are the simulator's tokens: no log line may hold one.
var simTokens = regexp.MustCompile(`sim-o(r|a)t-[0-9a-f]+`)

func (w *world) checkLogs() {
	if tok := simTokens.FindString(w.logs.String()); tok != "" {
		w.t.Errorf("a token reached the log: %s\n%s", tok, w.logs.String())
	}
}

func sqliteFile(t *testing.T, path string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Open(t.Context(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func accessToken(t *testing.T, m *Manager) string {
	t.Helper()
	tok, ok := m.Source("max-1").Token()
	if !ok {
		t.Fatal("no valid access token")
	}
	return tok
}

func TestRefreshBeforeExpiry(t *testing.T) {
	w := newWorld(t)
	m := w.manager(sqliteFile(t, filepath.Join(t.TempDir(), "s.db")))
	if _, ok := m.Source("max-1").Token(); ok {
		t.Fatal("a token before any refresh")
	}
	m.Tick(t.Context())
	first := accessToken(t, m)
	if got := w.sim.LastTokenRequest(); got.Get("grant_type") != "refresh_token" || got.Get("client_id") != "client-1" || got.Get("scope") != "user:inference" {
		t.Errorf("token request form = %v", got)
	}
	// A one-hour token is refreshed when less than 6 minutes (a tenth) remain.
	w.clock.Add(53 * time.Minute)
	m.Tick(t.Context())
	if n := w.sim.Refreshes(); n != 1 || accessToken(t, m) != first {
		t.Fatalf("at 53 minutes: %d refreshes, want 1 and the same token", n)
	}
	w.clock.Add(2 * time.Minute)
	m.Tick(t.Context())
	if n := w.sim.Refreshes(); n != 2 || accessToken(t, m) == first {
		t.Fatalf("at 55 minutes: %d refreshes, want 2 and a new token", n)
	}
}

func TestTheRefreshRequestIsAFormOrJSON(t *testing.T) {
	for body, want := range map[string]string{"": "application/x-www-form-urlencoded", config.OAuthBodyForm: "application/x-www-form-urlencoded", config.OAuthBodyJSON: "application/json"} {
		t.Run(cmp.Or(body, "default"), func(t *testing.T) {
			w := newWorld(t)
			m := w.managerSending(sqliteFile(t, filepath.Join(t.TempDir(), "s.db")), body)
			m.Tick(t.Context())
			accessToken(t, m)
			if got, _ := w.mediaType.Load().(string); got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			if got := w.sim.LastTokenRequest(); got.Get("grant_type") != "refresh_token" || got.Get("client_id") != "client-1" || got.Get("scope") != "user:inference" {
				t.Errorf("token request = %v", got)
			}
		})
	}
}

func TestRotatedRefreshTokenSurvivesARestart(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "s.db")
	db := sqliteFile(t, path)
	m := w.manager(db)
	m.Tick(t.Context())
	before := accessToken(t, m)
	db.Close()

	// The file's refresh token is spent now: only the rotated one, stored
	// in the database, still works.
	m = w.manager(sqliteFile(t, path))
	if got := accessToken(t, m); got != before || w.sim.Refreshes() != 1 {
		t.Fatalf("after the restart: token changed or refreshed (%d refreshes); want the stored one", w.sim.Refreshes())
	}
	w.clock.Add(58 * time.Minute)
	m.Tick(t.Context())
	if n := w.sim.Refreshes(); n != 2 || accessToken(t, m) == before || len(w.disables()) != 0 {
		t.Fatalf("refresh after the restart: %d refreshes, disabled %v; want 2 and a new token", n, w.disables())
	}
	var sealed []byte
	if err := sqliteFile(t, path).QueryRow(t.Context(), `SELECT refresh_token FROM oauth_tokens`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("sim-o")) {
		t.Error("the refresh token is stored in plaintext")
	}
}

func TestInvalidGrantDisablesAndANewFileRevives(t *testing.T) {
	w := newWorld(t)
	w.writeToken("spent-or-revoked")
	path := filepath.Join(t.TempDir(), "s.db")
	m := w.manager(sqliteFile(t, path))
	m.Tick(t.Context())
	m.Tick(t.Context())
	if got := w.disables(); len(got) != 1 || got[0] != "max-1" || !strings.Contains(w.reasons[0], "invalid_grant") {
		t.Fatalf("disabled %v %v, want max-1 once, for invalid_grant", got, w.reasons)
	}
	if _, ok := m.Source("max-1").Token(); ok {
		t.Fatal("a token after invalid_grant")
	}
	if n := w.requests.Load(); n != 1 {
		t.Fatalf("%d token requests, want 1: a refused refresh token is not sent again", n)
	}
	// Another replica learns it from the row, without spending the token.
	other := w.manager(sqliteFile(t, path))
	other.Tick(t.Context())
	if n := w.requests.Load(); n != 1 || len(w.disables()) != 2 {
		t.Fatalf("the other replica: %d token requests, %d disables; want 1 and 2", n, len(w.disables()))
	}

	w.writeToken(w.sim.NewRefreshToken(simulator.Behavior{}, time.Hour))
	m.Tick(t.Context())
	if _, ok := m.Source("max-1").Token(); !ok || w.sim.Refreshes() != 1 {
		t.Fatalf("after a new token in the file: no token (%d refreshes)", w.sim.Refreshes())
	}
}

func TestAFailingTokenEndpointBacksOffAndTheTokenServesUntilItExpires(t *testing.T) {
	w := newWorld(t)
	m := w.manager(sqliteFile(t, filepath.Join(t.TempDir(), "s.db")))
	m.Tick(t.Context())
	first := accessToken(t, m)
	w.sim.FailTokenEndpoint(http.StatusServiceUnavailable)
	w.clock.Add(55 * time.Minute)
	m.Tick(t.Context())
	m.Tick(t.Context()) // within the backoff: not sent
	if n := w.requests.Load(); n != 2 || accessToken(t, m) != first {
		t.Fatalf("%d token requests, want 2; the token still valid serves", n)
	}
	w.clock.Add(3 * time.Second)
	m.Tick(t.Context())
	if n := w.requests.Load(); n != 3 {
		t.Fatalf("%d token requests after the backoff, want 3", n)
	}
	w.clock.Add(5 * time.Minute) // expired
	if _, ok := m.Source("max-1").Token(); ok {
		t.Fatal("an expired token still served")
	}
	w.sim.FailTokenEndpoint(0)
	w.clock.Add(5 * time.Minute)
	m.Tick(t.Context())
	if tok := accessToken(t, m); tok == first || len(w.disables()) != 0 {
		t.Fatalf("after the endpoint recovered: same token, or disabled %v", w.disables())
	}
}

func TestRefusedRefreshesOnceForEveryReplica(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "s.db")
	a, b := w.manager(sqliteFile(t, path)), w.manager(sqliteFile(t, path))
	a.Tick(t.Context())
	b.Tick(t.Context())
	old := accessToken(t, a)
	if accessToken(t, b) != old || w.sim.Refreshes() != 1 {
		t.Fatalf("replicas hold different tokens, or %d refreshes", w.sim.Refreshes())
	}
	fresh, ok := a.Source("max-1").Refused(t.Context(), old)
	if !ok || fresh == old || w.sim.Refreshes() != 2 {
		t.Fatalf("Refused = %v; %d refreshes, want a new token from one refresh", ok, w.sim.Refreshes())
	}
	// The other replica, refused the same old token, takes the stored one.
	if got, ok := b.Source("max-1").Refused(t.Context(), old); !ok || got != fresh || w.sim.Refreshes() != 2 {
		t.Fatalf("the other replica's Refused = %v, same token %v, %d refreshes; want the stored token", ok, got == fresh, w.sim.Refreshes())
	}
}

func TestConcurrentReplicasRefreshOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (*sqldb.DB, *sqldb.DB)
	}{
		{"postgres", func(t *testing.T) (*sqldb.DB, *sqldb.DB) {
			u := testenv.Postgres(t)
			open := func() *sqldb.DB {
				db, err := sqldb.Open(t.Context(), u)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			return open(), open()
		}},
		{"sqlite", func(t *testing.T) (*sqldb.DB, *sqldb.DB) {
			path := filepath.Join(t.TempDir(), "s.db")
			return sqliteFile(t, path), sqliteFile(t, path)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			dbA, dbB := tc.open(t)
			managers := []*Manager{w.manager(dbA), w.manager(dbB), w.manager(dbA), w.manager(dbB)}
			for round := range 3 {
				var wg sync.WaitGroup
				for _, m := range managers {
					wg.Go(func() { m.Tick(t.Context()) })
				}
				wg.Wait()
				if n := w.sim.Refreshes(); n != round+1 {
					t.Fatalf("round %d: %d refreshes at the token endpoint, want %d", round, n, round+1)
				}
				for _, m := range managers[1:] {
					if accessToken(t, m) != accessToken(t, managers[0]) {
						t.Fatalf("round %d: replicas hold different tokens", round)
					}
				}
				w.clock.Add(56 * time.Minute)
			}
			if len(w.disables()) != 0 {
				t.Errorf("disabled %v: a rotated refresh token was spent twice", w.disables())
			}
		})
	}
}

// TestAbsurdLifetimesAreCappedAndBackedOff runs ten minutes of one tick a
// second against a token endpoint whose expires_in is absurd. A huge one
// (10000000000 seconds overflowed the expiry into 1759: refreshed every
// tick, rotating the refresh token, and never served) is capped at a day;
// one that is zero, negative or shorter than a minute backs off as a
// failed refresh would.
func TestAbsurdLifetimesAreCappedAndBackedOff(t *testing.T) {
	const backedOff = 9 // refreshes at 0, 2, 6, 14, 30, 62, 126, 254 and 510 seconds
	tests := []struct {
		expiresIn string
		valid     bool // a token serves after the first refresh
		lifetime  time.Duration
		refreshes int64
	}{
		{`10000000000`, true, maxLifetime, 1},
		{`1e10`, true, maxLifetime, 1},
		{`"1e400"`, true, maxLifetime, 1},
		{`"3600.5"`, true, 3600*time.Second + 500*time.Millisecond, 1},
		{`1.5`, true, 1500 * time.Millisecond, backedOff},
		{`0`, false, 0, backedOff},
		{`-5`, false, 0, backedOff},
		{`"soon"`, true, defaultLifetime, 1},
	}
	for _, tt := range tests {
		t.Run(tt.expiresIn, func(t *testing.T) {
			w := newWorld(t)
			var n atomic.Int64
			endpoint := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				i := n.Add(1)
				rw.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(rw, `{"access_token":"at-%d","refresh_token":"rt-%d","token_type":"bearer","expires_in":%s}`, i, i, tt.expiresIn)
			}))
			t.Cleanup(endpoint.Close)
			m, err := New(Options{DB: sqliteFile(t, filepath.Join(t.TempDir(), "s.db")), Key: testKey, Now: w.clock.Now,
				Log: slog.New(slog.NewJSONHandler(w.logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			m.Sync(t.Context(), []Spec{{CredentialID: "max-1", OAuth: config.OAuth{TokenURL: endpoint.URL, ClientID: "c", RefreshTokenFile: w.file}}})
			m.Tick(t.Context())
			s := m.Source("max-1")
			if _, ok := s.Token(); ok != tt.valid {
				t.Errorf("token valid after the first refresh = %t, want %t", ok, tt.valid)
			}
			if cur := s.cur.Load(); cur == nil || cur.expires.Sub(cur.issued) != tt.lifetime {
				t.Errorf("token lifetime = %v, want %s", cur.expires.Sub(cur.issued), tt.lifetime)
			}
			for range 600 {
				w.clock.Add(time.Second)
				m.Tick(t.Context())
			}
			if got := n.Load(); got != tt.refreshes {
				t.Errorf("%d refreshes in ten minutes, want %d", got, tt.refreshes)
			}
		})
	}
}
