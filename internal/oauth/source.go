package oauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/sqldb"
)

// Source is the access token of one oauth credential: a
// sluice.TokenSource. Its token is read without locks; refreshes and
// reseeds of one credential take turns within the process (mu) and across
// replicas (the row's lock).
type Source struct {
	m    *Manager
	id   string
	spec atomic.Pointer[Spec]
	cur  atomic.Pointer[token] // nil: none yet

	mu       sync.Mutex // held by a seed or a refresh; guards the fields below
	seeded   string     // seed hash of the file's token last reconciled with the row
	dead     bool       // the grant was refused: only a new seed (a new refresh token in the file) helps
	failures int        // failed refreshes in a row
	retryAt  time.Time  // no refresh before this, after a failure
}

// token is an access token and its lifetime.
type token struct {
	access          string
	issued, expires time.Time
}

// due reports whether t should be refreshed at now.
func (t *token) due(now time.Time) bool {
	return !now.Before(t.expires.Add(-refreshMargin(t.expires.Sub(t.issued))))
}

// Token returns the access token while it is valid.
func (s *Source) Token() (string, bool) {
	t := s.cur.Load()
	if t == nil || !s.m.o.Now().Before(t.expires) {
		return "", false
	}
	return t.access, true
}

// Refused refreshes at once after the upstream refused token (a 401),
// unless a token issued since is at hand (here, or stored by another
// replica), the refresh token was refused, or a failed refresh's backoff
// runs. It returns the token to send instead.
func (s *Source) Refused(ctx context.Context, refused string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok, ok := s.Token(); ok && tok != refused {
		return tok, true
	}
	if s.dead || s.m.o.Now().Before(s.retryAt) {
		return "", false
	}
	s.refresh(ctx, refused)
	tok, ok := s.Token()
	return tok, ok && tok != refused
}

// refreshIfDue refreshes when there is no token or it is near its expiry.
func (s *Source) refreshIfDue(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.m.o.Now()
	if s.dead || now.Before(s.retryAt) {
		return
	}
	if t := s.cur.Load(); t != nil && !t.due(now) {
		return
	}
	s.refresh(ctx, "")
}

// refresh refreshes (s.mu held) and acts on the outcome: an invalid_grant
// disables the credential; another failure backs off.
func (s *Source) refresh(ctx context.Context, refused string) {
	err := s.refreshRow(ctx, refused)
	switch {
	case err == nil:
		s.failures, s.retryAt = 0, time.Time{}
	case errors.Is(err, errInvalidGrant):
		s.dead = true
		s.m.o.Log.LogAttrs(ctx, slog.LevelError, "oauth: the token endpoint refused the credential's grant; it is disabled until its seed (refresh token file, client secret or service account key) is replaced and it is enabled",
			slog.String("credential_id", s.id), slog.String("grant", s.spec.Load().GrantType()))
		s.m.o.Disable(ctx, s.id, "auth: the OAuth token endpoint refused the credential's "+s.spec.Load().GrantType()+" grant (invalid_grant or invalid_client)")
	default:
		s.failures++
		wait := backoff(s.failures)
		s.retryAt = s.m.o.Now().Add(wait)
		_, valid := s.Token()
		s.m.o.Log.LogAttrs(ctx, slog.LevelWarn, "oauth: refresh failed; retrying", slog.String("credential_id", s.id),
			slog.Any("err", err), slog.Duration("retry_in", wait), slog.Bool("access_token_valid", valid))
	}
}

// Markers of the failure column.
const failInvalidGrant = "invalid_grant"

// refreshRow refreshes under the row's lock: a token another replica
// stored meanwhile (not the refused one, not due) is taken as it is;
// otherwise the stored refresh token is exchanged and the answer stored,
// a rotated refresh token included, before the lock is released. A
// refresh token already refused is not spent again.
func (s *Source) refreshRow(ctx context.Context, refused string) error {
	m := s.m
	sp := s.spec.Load()
	var outcome error
	err := m.o.DB.InTx(ctx, func(tx *sqldb.Tx) error {
		if err := s.lock(ctx, tx); err != nil {
			return err
		}
		r, err := s.read(ctx, tx)
		if err != nil {
			return err
		}
		now := m.o.Now()
		if t := r.token; t != nil && t.access != refused && !t.due(now) {
			s.cur.Store(t)
			return nil
		}
		if r.failure == failInvalidGrant {
			outcome = errInvalidGrant
			return nil
		}
		g, err := m.exchange(ctx, sp, r.refresh)
		if err != nil {
			outcome = err
			failure := err.Error()
			if errors.Is(err, errInvalidGrant) {
				failure = failInvalidGrant
			}
			_, err = tx.Exec(ctx, `UPDATE oauth_tokens SET failure = ? WHERE credential_id = ?`, failure, s.id)
			return err
		}
		t := &token{access: g.access, issued: now, expires: now.Add(g.expires)}
		// The access token is good whatever happens to the row: use it.
		s.cur.Store(t)
		if g.expires < minLifetime {
			// Stored all the same (a rotated refresh token is spent), but
			// counted as a failure, so the next refresh waits for the
			// backoff instead of following the token's own short expiry.
			outcome = fmt.Errorf("the token endpoint issued an access token that expires in %s: %w", g.expires, errShortLived)
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_tokens SET access_token = ?, issued_at = ?, expires_at = ?, refresh_token = ?, failure = '' WHERE credential_id = ?`,
			m.vault.seal(s.id, "access_token", t.access), t.issued.UnixMicro(), t.expires.UnixMicro(),
			m.vault.seal(s.id, "refresh_token", cmp.Or(g.refresh, r.refresh)), s.id); err != nil {
			// A rotated refresh token not stored is lost: the old one is spent.
			return fmt.Errorf("storing the refreshed tokens: %w", err)
		}
		m.o.Log.LogAttrs(ctx, slog.LevelInfo, "oauth: access token refreshed", slog.String("credential_id", s.id),
			slog.Time("expires_at", t.expires), slog.Bool("refresh_token_rotated", g.refresh != "" && g.refresh != r.refresh))
		return nil
	})
	if err != nil {
		return describe(s.id, err)
	}
	return outcome
}

// seed reconciles the row with the refresh token file: it creates the row
// from the file's token, or, when the file holds another token than the
// one that seeded the row, replaces the row's tokens with it (the file
// wins). Then it takes the stored access token if that is valid.
func (s *Source) seed(ctx context.Context) error {
	m := s.m
	sp := s.spec.Load()
	seed, err := sp.Seed(m.o.LookupEnv)
	if err != nil {
		return describe(s.id, err)
	}
	hash := m.vault.seedHash(seedMaterial(sp, seed))
	rt := storedSeed(sp, seed)
	s.mu.Lock()
	defer s.mu.Unlock()
	if hash == s.seeded {
		return nil
	}
	reseeded := false
	var stored *token
	err = m.o.DB.InTx(ctx, func(tx *sqldb.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO oauth_tokens (credential_id, seed_hash, refresh_token, access_token, issued_at, expires_at, failure, locked_at)
			VALUES (?, ?, ?, NULL, 0, 0, '', 0) ON CONFLICT (credential_id) DO NOTHING`,
			s.id, hash, m.vault.seal(s.id, "refresh_token", rt)); err != nil {
			return err
		}
		if err := s.lock(ctx, tx); err != nil {
			return err
		}
		var was string
		if err := tx.QueryRow(ctx, `SELECT seed_hash FROM oauth_tokens WHERE credential_id = ?`, s.id).Scan(&was); err != nil {
			return err
		}
		if was != hash {
			reseeded = true
			if _, err := tx.Exec(ctx, `UPDATE oauth_tokens SET seed_hash = ?, refresh_token = ?, access_token = NULL, issued_at = 0, expires_at = 0, failure = '' WHERE credential_id = ?`,
				hash, m.vault.seal(s.id, "refresh_token", rt), s.id); err != nil {
				return err
			}
			return nil
		}
		r, err := s.read(ctx, tx)
		stored = r.token
		return err
	})
	if err != nil {
		return describe(s.id, err)
	}
	if s.seeded != "" && reseeded {
		m.o.Log.LogAttrs(ctx, slog.LevelInfo, "oauth: a new refresh token was found in the file; it replaces the one held", slog.String("credential_id", s.id))
	}
	s.seeded = hash
	if reseeded {
		s.dead, s.failures, s.retryAt = false, 0, time.Time{}
		s.cur.Store(nil)
		return nil
	}
	if cur := s.cur.Load(); stored != nil && (cur == nil || stored.expires.After(cur.expires)) {
		s.cur.Store(stored)
	}
	return nil
}

// lock takes the credential's row for the transaction: an UPDATE holds
// PostgreSQL's row lock until the transaction ends (as SELECT … FOR UPDATE
// would); SQLite's transactions hold the database's write lock from their
// start (sqldb).
func (s *Source) lock(ctx context.Context, tx *sqldb.Tx) error {
	res, err := tx.Exec(ctx, `UPDATE oauth_tokens SET locked_at = ? WHERE credential_id = ?`, s.m.o.Now().UnixMicro(), s.id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return errNotSeeded
	}
	return err
}

// row is a credential's stored state, opened.
type row struct {
	refresh string
	token   *token // nil: none, or one that does not open
	failure string
}

// read reads the credential's row; a refresh token that does not open is
// an error (errUnsealable), an access token that does not open is none.
func (s *Source) read(ctx context.Context, tx *sqldb.Tx) (row, error) {
	var r row
	var refresh, access []byte
	var issued, expires int64
	if err := tx.QueryRow(ctx, `SELECT refresh_token, access_token, issued_at, expires_at, failure FROM oauth_tokens WHERE credential_id = ?`, s.id).
		Scan(&refresh, &access, &issued, &expires, &r.failure); err != nil {
		return r, err
	}
	var err error
	if r.refresh, err = s.m.vault.open(s.id, "refresh_token", refresh); err != nil {
		return r, err
	}
	if access != nil && expires > 0 {
		if tok, err := s.m.vault.open(s.id, "access_token", access); err == nil {
			r.token = &token{access: tok, issued: time.UnixMicro(issued), expires: time.UnixMicro(expires)}
		}
	}
	return r, nil
}
