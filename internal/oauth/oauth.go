// Package oauth keeps the access tokens of OAuth2 credentials: each
// credential's access token is obtained by its grant (grant.go: the
// refresh_token grant of RFC 6749 §6 for subscription accounts,
// client_credentials for Microsoft Entra ID, RFC 7523's jwt_bearer for a
// Google service account) and refreshed before it expires, in the
// background, so no request waits for it.
//
// The tokens live in the database (table oauth_tokens), sealed with AES-GCM
// under the operator's key, so that every replica shares one: a refresh
// locks the credential's row (a row lock on PostgreSQL, the write lock on
// SQLite) and first looks whether another replica refreshed meanwhile, so
// a rotating refresh token is spent exactly once, and the replicas that
// lost the race adopt the winner's token. A refresh answered invalid_grant
// disables the credential (Options.Disable); any other failure, and an
// answer whose access token lives less than a minute, is retried with
// backoff, and the credential serves while its access token is valid.
//
// The operator's refresh_token_file (or client secret, or service account
// key) seeds the row; a token written there later (another than the one
// that seeded the row, compared by keyed hash) replaces the one held,
// however often that was rotated since.
//
// No token, and no answer of the token endpoint, ever reaches a log or an
// error: errors name the credential, the status and the OAuth error code.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// Spec is one oauth credential of the catalog.
type Spec struct {
	CredentialID string
	config.OAuth
}

// Options configure a Manager.
type Options struct {
	DB  *sqldb.DB
	Key []byte // config.SecretKeySize bytes: seals the tokens in the database
	Log *slog.Logger
	// Disable is called when the token endpoint refuses a credential's
	// refresh token (invalid_grant), with a reason that holds no secret:
	// the credential is disabled as after an upstream auth failure.
	Disable func(ctx context.Context, credentialID, reason string)
	// Client calls the token endpoints; nil means one that times out after
	// 10s and follows no redirect (a refresh token goes only where the
	// catalog says).
	Client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// LookupEnv reads the environment variables that hold client secrets;
	// nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Manager keeps the access tokens of the catalog's oauth credentials. Safe
// for concurrent use.
type Manager struct {
	o     Options
	vault vault

	mu      sync.Mutex
	sources map[string]*Source // by credential ID
}

// exchangeTimeout bounds one call of a token endpoint; the credential's
// row stays locked meanwhile.
const exchangeTimeout = 10 * time.Second

// New returns a Manager; Sync tells it the credentials, Run keeps their
// tokens fresh.
func New(o Options) (*Manager, error) {
	v, err := newVault(o.Key)
	if err != nil {
		return nil, err
	}
	if o.Client == nil {
		o.Client = &http.Client{
			Timeout:       exchangeTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Disable == nil {
		o.Disable = func(context.Context, string, string) {}
	}
	return &Manager{o: o, vault: v, sources: map[string]*Source{}}, nil
}

// Sync makes specs the credentials the Manager keeps: a new one is seeded
// from its refresh token file and takes the stored access token when that
// is still valid; one kept from before keeps its token and takes the new
// settings; one no longer listed is forgotten (its row stays, for a
// catalog that brings it back). Problems are logged and retried by Run.
func (m *Manager) Sync(ctx context.Context, specs []Spec) {
	m.mu.Lock()
	next := make(map[string]*Source, len(specs))
	var fresh []*Source
	for _, sp := range specs {
		s := m.sources[sp.CredentialID]
		if s == nil {
			s = &Source{m: m, id: sp.CredentialID}
			fresh = append(fresh, s)
		}
		s.spec.Store(&sp)
		next[sp.CredentialID] = s
	}
	m.sources = next
	m.mu.Unlock()
	for _, s := range fresh {
		if err := s.seed(ctx); err != nil {
			m.warn(ctx, s.id, "reading the refresh token file or the stored tokens failed; retrying", err)
		}
	}
}

// Source returns the token source of the oauth credential id, nil when Sync
// was not told of it.
func (m *Manager) Source(id string) *Source {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sources[id]
}

// Run refreshes tokens at once, then every interval until ctx ends (see
// Tick).
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	m.Tick(ctx)
	periodic.Run(ctx, interval, m.Tick)
}

// Tick does what is due for every credential, each on its own: it
// reseeds one whose refresh token file changed, and refreshes one whose
// access token is missing or near its expiry, unless a failed refresh's
// backoff is still running or its refresh token was refused.
func (m *Manager) Tick(ctx context.Context) {
	m.mu.Lock()
	sources := make([]*Source, 0, len(m.sources))
	for _, s := range m.sources {
		sources = append(sources, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Go(func() {
			if err := s.seed(ctx); err != nil {
				m.warn(ctx, s.id, "reading the refresh token file or the stored tokens failed; retrying", err)
				return
			}
			s.refreshIfDue(ctx)
		})
	}
	wg.Wait()
}

func (m *Manager) warn(ctx context.Context, id, msg string, err error) {
	m.o.Log.LogAttrs(ctx, slog.LevelWarn, "oauth: "+msg, slog.String("credential_id", id), slog.Any("err", err))
}

// errInvalidGrant is the token endpoint refusing the refresh token: spent
// (another client rotated it), revoked or expired. Only a new refresh
// token brings the credential back.
var errInvalidGrant = errors.New("the token endpoint refused the credential's grant (invalid_grant)")

// errShortLived is a refresh that gave an access token of less than
// minLifetime. Refreshing it at its own pace would call the token endpoint
// (and rotate the refresh token) every few seconds; it is backed off as a
// failure.
var errShortLived = errors.New("it is refreshed again after the backoff, not as it nears its expiry")

// minLifetime is the shortest access token lifetime that is refreshed as
// it nears its expiry; a shorter one is used while it lasts and refreshed
// after the failure backoff.
const minLifetime = time.Minute

// errNotSeeded is a refresh of a credential whose row is missing.
var errNotSeeded = errors.New("no stored tokens yet")

var _ sluice.TokenSource = (*Source)(nil)

// refreshMargin is how long before its expiry a token of lifetime is
// refreshed: a tenth of its lifetime, and at least five minutes, or half
// the lifetime when that is shorter.
func refreshMargin(lifetime time.Duration) time.Duration {
	return max(lifetime/10, min(5*time.Minute, lifetime/2))
}

// backoff is the wait after the nth failed refresh in a row: 2s doubling,
// at most 5 minutes.
func backoff(n int) time.Duration {
	d := 2 * time.Second
	for i := 1; i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// describe is an error for a log or a status: it names the credential.
func describe(id string, err error) error {
	return fmt.Errorf("credential %s: %w", id, err)
}
