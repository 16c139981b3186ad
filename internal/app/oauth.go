package app

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/oauth"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/store"
)

// credentialTokens gives the oauth credentials of each compiled catalog
// their token sources. The token manager starts with the first catalog
// that has one, under that catalog's secret key (a later change of the key
// takes a restart).
type credentialTokens struct {
	db        *sqldb.DB
	dbURL     string
	lookupEnv func(string) (string, bool)
	log       *slog.Logger
	run       func(*oauth.Manager) // keeps the manager's tokens fresh in the background
	m         *oauth.Manager

	// The manager starts refreshing with the first catalog, before the
	// shared state is open: a grant refused meanwhile is held in pending
	// and recorded once statuses is set (see setStatuses).
	mu       sync.Mutex
	statuses *capacity.Statuses // nil until the shared state is open
	pending  map[string]string  // credential ID → why it is to be disabled
}

// attach tells the manager c's oauth credentials and sets their token
// sources on snap's credentials, before snap serves.
func (t *credentialTokens) attach(c *config.Catalog, snap *pipeline.Snapshot) error {
	var specs []oauth.Spec
	for _, cc := range c.Credentials {
		if cc.OAuth.Set() {
			specs = append(specs, oauth.Spec{CredentialID: cc.ID, OAuth: cc.OAuth})
		}
	}
	if len(specs) == 0 && t.m == nil {
		return nil
	}
	if t.m == nil {
		key, err := c.Server.SecretKey(t.lookupEnv)
		if err != nil {
			return err
		}
		if key == nil {
			if !strings.HasPrefix(t.dbURL, "sqlite://") || sqldb.File(t.dbURL) != "" {
				return errors.New("server.secret_key_env or server.secret_key_file is required: oauth credentials keep their tokens in the database, encrypted with it")
			}
			// The tokens die with this database in memory: a key of the
			// process's own will do.
			key = make([]byte, config.SecretKeySize)
			rand.Read(key)
		}
		if t.m, err = oauth.New(oauth.Options{DB: t.db, Key: key, Log: t.log, Disable: t.disable, LookupEnv: t.lookupEnv}); err != nil {
			return err
		}
		t.run(t.m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t.m.Sync(ctx, specs)
	for _, sp := range specs {
		snap.Credentials[sp.CredentialID].Tokens = t.m.Source(sp.CredentialID)
	}
	return nil
}

// disable disables a credential whose refresh token was refused, as an
// upstream auth failure does: every replica stops using it, the reason
// shows in /admin/status, and an operator enables it again.
func (t *credentialTokens) disable(ctx context.Context, id, reason string) {
	t.mu.Lock()
	statuses := t.statuses
	if statuses == nil {
		if t.pending == nil {
			t.pending = map[string]string{}
		}
		t.pending[id] = reason
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.record(ctx, statuses, id, reason)
}

// setStatuses gives the credentials their shared statuses, once the shared
// state is open, and records the disables made before.
func (t *credentialTokens) setStatuses(ctx context.Context, statuses *capacity.Statuses) {
	t.mu.Lock()
	t.statuses = statuses
	pending := t.pending
	t.pending = nil
	t.mu.Unlock()
	for id, reason := range pending {
		t.record(ctx, statuses, id, reason)
	}
}

func (t *credentialTokens) record(ctx context.Context, statuses *capacity.Statuses, id, reason string) {
	if err := statuses.Set(context.WithoutCancel(ctx), capacity.KindCredential, id, store.Status{State: sluice.UpstreamDisabled, Reason: reason}); err != nil {
		t.log.LogAttrs(ctx, slog.LevelError, "recording a disabled credential failed", slog.String("credential_id", id), slog.Any("err", err))
		return
	}
	t.log.LogAttrs(ctx, slog.LevelWarn, "credential disabled by its OAuth refresh", slog.String("credential_id", id), slog.String("reason", reason))
}
