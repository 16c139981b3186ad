package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// catalogSource is where the serving catalog comes from — a file (reloaded on
// SIGHUP and on change), the store (changed through the admin API on any
// replica, and followed by every replica: see catalogfollow.go), or the
// demo — and the one path every change takes: Load → Compile → Swap. A bad
// new catalog never replaces the last good one; the failure stays visible in
// Status and in the sluice_catalog_reload_failing metric until a good one
// loads. Safe for concurrent use.
type catalogSource struct {
	path      string
	origin    string // "file:…", "store", "demo"
	lookupEnv func(string) (string, bool)
	live      *pipeline.Live
	keys      *authn.Keyring
	docs      catalog.Documents
	replicas  catalog.Replicas // the heartbeats of every replica on the database
	replica   string           // this process's ID among them
	metrics   *metrics.Metrics
	log       *slog.Logger
	tokens    *credentialTokens // nil: oauth credentials get no tokens (no database yet)
	tracing   *config.Telemetry // the section tracing started with; nil until it has
	// capacity moves the claims in flight to their accounts' new capacity
	// domains after an edit (capacity.Engine.Rehome); nil until it exists,
	// after the first catalog.
	capacity atomic.Pointer[capacity.Engine]

	mu        sync.Mutex // serialises changes; guards the fields below
	doc       []byte     // the document serving now
	stored    int64      // its stored version; 0 = not a stored one (a file, the demo)
	refused   int64      // the latest stored version that did not load here, reported once
	lastErr   error
	lastErrAt time.Time
}

var _ admin.Catalog = (*catalogSource)(nil)

// initial reads the catalog file when there is one. With no file it returns
// defaults only, enough to open the database; the caller then looks for a
// stored catalog or starts the demo.
func (s *catalogSource) initial() (*config.Catalog, []byte, error) {
	if s.path == "" {
		c := &config.Catalog{Version: 1}
		config.ApplyDefaults(c)
		return c, nil, nil
	}
	s.origin = "file:" + s.path
	doc, err := os.ReadFile(s.path)
	if err != nil {
		return nil, nil, fmt.Errorf("read catalog: %w", err)
	}
	c, err := config.LoadServing(doc, s.lookupEnv, dialects.CanServe)
	if err != nil {
		return nil, nil, fmt.Errorf("catalog %s:\n%w", s.path, err)
	}
	return c, doc, nil
}

// install compiles c and makes it serve (s.mu held, or at startup): doc is
// its document, from origin, stored as version stored (0 = not stored).
func (s *catalogSource) install(c *config.Catalog, doc []byte, origin string, stored int64) error {
	snap, err := pipeline.CompileServing(c, s.lookupEnv, origin, dialects.CanServe)
	if err != nil {
		return err
	}
	if s.tokens != nil {
		if err := s.tokens.attach(c, snap); err != nil {
			return err
		}
	}
	s.live.Swap(snap)
	if e := s.capacity.Load(); e != nil {
		e.Rehome(context.Background(), snap.UnitDomain)
	}
	s.keys.SetStatic(snap.StaticKeys)
	s.doc, s.origin, s.stored = doc, origin, stored
	s.metrics.CatalogVersion.Set(float64(snap.Version))
	return nil
}

// reload loads doc as the next catalog (s.mu held), or records why it
// could not.
func (s *catalogSource) reload(doc []byte, origin string, stored int64) error {
	c, err := config.LoadServing(doc, s.lookupEnv, dialects.CanServe)
	if err == nil {
		err = s.install(c, doc, origin, stored)
	}
	if err != nil {
		s.failed(err, "catalog rejected; the last good catalog keeps serving")
		return err
	}
	s.lastErr = nil
	s.warnTracingChange(c)
	s.metrics.CatalogReloads.WithLabelValues("ok").Inc()
	s.metrics.CatalogFailing.Set(0)
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "catalog loaded",
		slog.String("source", s.origin), slog.Int64("stored_version", stored), slog.Int64("version", s.live.Load().Version))
	return nil
}

// failed records a failed reload (s.mu held): the alarm goes on until the
// file holds a catalog that serves.
func (s *catalogSource) failed(err error, msg string) {
	s.lastErr, s.lastErrAt = err, time.Now()
	s.metrics.CatalogReloads.WithLabelValues("error").Inc()
	s.metrics.CatalogFailing.Set(1)
	s.log.LogAttrs(context.Background(), slog.LevelError, msg,
		slog.String("source", s.origin), slog.Int64("version", s.live.Load().Version), slog.Any("err", err))
}

// watch reloads the file on SIGHUP and whenever its content changes. Each
// state of the file is reported once, not every tick: a document rejected,
// the file unreadable (deleted, say), and, clearing the alarm, the file
// back to the document serving now.
func (s *catalogSource) watch(ctx context.Context, every time.Duration) {
	hup := hangups(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	var rejected []byte // the document last rejected, reported already
	unreadable := false // the file's last read failed, reported already
	for {
		force := false
		select {
		case <-ctx.Done():
			return
		case <-hup:
			force = true
		case <-t.C:
		}
		doc, err := os.ReadFile(s.path)
		s.mu.Lock()
		switch {
		case err != nil:
			if force || !unreadable {
				s.failed(fmt.Errorf("read catalog: %w", err), "catalog unreadable; the last good catalog keeps serving")
			}
			unreadable, rejected = true, nil
		case force || !bytes.Equal(doc, s.doc) && !bytes.Equal(doc, rejected):
			unreadable, rejected = false, nil
			if s.reload(doc, s.origin, 0) != nil {
				rejected = doc
			}
		case bytes.Equal(doc, s.doc):
			unreadable, rejected = false, nil
			if s.lastErr != nil {
				s.lastErr = nil
				s.metrics.CatalogFailing.Set(0)
				s.log.LogAttrs(ctx, slog.LevelInfo, "catalog file holds the serving catalog again",
					slog.String("source", s.origin), slog.Int64("version", s.live.Load().Version))
			}
		}
		s.mu.Unlock()
	}
}

// Status reports what is serving and the last failed change.
func (s *catalogSource) Status() admin.CatalogStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.live.Load()
	st := admin.CatalogStatus{Version: snap.Version, Source: s.origin, LoadedAt: snap.Compiled, Document: s.doc,
		Aliases: snap.Routes.Names(), StoredVersion: s.stored, Replica: s.replica}
	if s.lastErr != nil {
		st.LastError, st.LastErrorAt = s.lastErr.Error(), s.lastErrAt
	}
	return st
}

// Apply validates doc and makes it serve, storing it as the next version
// (by the admin token by) for every replica to follow and to outlive a
// restart. A catalog managed by a file cannot be changed this way, and
// one that would drop every alias or every key only with force.
func (s *catalogSource) Apply(ctx context.Context, doc []byte, ifVersion int64, force bool, by string) (admin.CatalogStatus, error) {
	return s.save(ctx, catalog.CatalogVersion{Doc: doc, By: by}, ifVersion, force)
}

// Rollback stores the document of the stored version as the next version
// and makes it serve, as Apply does. It needs no force: the operator
// named the version it restores.
func (s *catalogSource) Rollback(ctx context.Context, version int64, by string) (admin.CatalogStatus, error) {
	if err := s.writable(); err != nil {
		return admin.CatalogStatus{}, err
	}
	v, err := s.docs.LoadCatalogVersion(ctx, version)
	if err != nil {
		return admin.CatalogStatus{}, err
	}
	return s.save(ctx, catalog.CatalogVersion{Doc: v.Doc, By: by, RollbackOf: version}, 0, true)
}

// writable refuses a change through the admin API to a catalog a file manages.
func (s *catalogSource) writable() error {
	if s.path != "" {
		return fmt.Errorf("catalog is managed by %s: %w", s.path, admin.ErrCatalogReadOnly)
	}
	return nil
}

// save checks next.Doc against this replica (its environment, the serving
// catalog), stores it as the next version and makes it serve. ifVersion is
// the version the operator saw (0 = no check), as CatalogStatus.Tag gives
// it: while a stored version serves, the database checks it against its
// latest version as it saves, so an operator who read the catalog from one
// replica cannot overwrite an apply made through another.
func (s *catalogSource) save(ctx context.Context, next catalog.CatalogVersion, ifVersion int64, force bool) (admin.CatalogStatus, error) {
	if err := s.writable(); err != nil {
		return admin.CatalogStatus{}, err
	}
	s.mu.Lock()
	storedIf := int64(0)
	switch {
	case ifVersion == 0:
	case s.stored != 0:
		storedIf = ifVersion
	case ifVersion != s.live.Load().Version:
		s.mu.Unlock()
		return admin.CatalogStatus{}, fmt.Errorf("catalog version is %d, not %d: %w", s.live.Load().Version, ifVersion, catalog.ErrConflict)
	}
	c, err := config.LoadServing(next.Doc, s.lookupEnv, dialects.CanServe)
	if err == nil && !force {
		err = emptied(s.live.Load().Catalog, c)
	}
	var saved catalog.CatalogVersion
	if err == nil {
		saved, err = s.docs.SaveCatalog(ctx, next, storedIf)
	}
	if err == nil {
		if err = s.install(c, next.Doc, "store", saved.Version); err != nil {
			// Stored, and so followed by the other replicas, but not
			// serving here: say so until a later version loads.
			s.refused = saved.Version
			s.failed(err, "stored catalog version did not load here; the last good catalog keeps serving")
		}
	}
	if err == nil {
		s.lastErr = nil
		s.metrics.CatalogFailing.Set(0)
	}
	s.mu.Unlock()
	if err != nil {
		return admin.CatalogStatus{}, err
	}
	return s.Status(), nil
}

// Versions returns up to limit stored versions, newest first.
func (s *catalogSource) Versions(ctx context.Context, limit int) ([]catalog.CatalogVersion, error) {
	return s.docs.ListCatalogVersions(ctx, limit)
}

// LoadVersion returns a stored version with its document and diff.
func (s *catalogSource) LoadVersion(ctx context.Context, version int64) (catalog.CatalogVersion, error) {
	return s.docs.LoadCatalogVersion(ctx, version)
}

// emptied returns an error wrapping admin.ErrCatalogEmptied when next has
// no models or no keys while cur has some.
func emptied(cur, next *config.Catalog) error {
	switch {
	case len(next.Models) == 0 && len(cur.Models) > 0:
		return fmt.Errorf("the new catalog has no models: %w", admin.ErrCatalogEmptied)
	case len(next.Keys) == 0 && len(cur.Keys) > 0:
		return fmt.Errorf("the new catalog has no keys: %w", admin.ErrCatalogEmptied)
	}
	return nil
}
