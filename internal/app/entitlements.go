package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/store"
)

// entitlementPoll is how often each replica asks the database whether the
// entitlements changed: a bulk change through any replica's admin API is
// enforced by every replica within this plus one read (well under a
// second), and the request path never reads the database.
const entitlementPoll = 200 * time.Millisecond

// entitlements are the end users' entitlements in the gateway's database:
// what the admin API changes (checked against the serving catalog), and
// what the pipeline reads from memory (view), read again whenever their
// version changed.
type entitlements struct {
	store.Entitlements
	live *pipeline.Live
	view *pipeline.Entitlements
	log  *slog.Logger
	seen int64 // the version view holds; -1 before the first read
}

var _ admin.Entitlements = (*entitlements)(nil)

func newEntitlements(s store.Entitlements, live *pipeline.Live, log *slog.Logger) *entitlements {
	return &entitlements{Entitlements: s, live: live, view: &pipeline.Entitlements{}, log: log, seen: -1}
}

// CheckEntitlement says what the serving catalog lacks for e: its profile,
// or its pool.
func (e *entitlements) CheckEntitlement(x store.Entitlement) error {
	c := e.live.Load().Catalog
	var errs []error
	if !slices.ContainsFunc(c.Profiles, func(p config.Profile) bool { return p.ID == x.Profile }) {
		errs = append(errs, fmt.Errorf("profile: the catalog has no profile %q", x.Profile))
	}
	if x.Pool != "" && !slices.ContainsFunc(c.Pools, func(p config.Pool) bool { return p.ID == x.Pool }) {
		errs = append(errs, fmt.Errorf("pool: the catalog has no pool %q", x.Pool))
	}
	return errors.Join(errs...)
}

// refresh reads the entitlements into the view when their version moved
// since the last read.
func (e *entitlements) refresh(ctx context.Context) error {
	v, err := e.EntitlementsVersion(ctx)
	if err != nil || v == e.seen {
		return err
	}
	all, err := e.ListEntitlements(ctx, store.EntitlementFilter{})
	if err != nil {
		return err
	}
	e.view.Set(all)
	e.seen = v
	return nil
}

// run refreshes every entitlementPoll until ctx ends; a failed read keeps
// the last view, and is logged.
func (e *entitlements) run(ctx context.Context) {
	periodic.Run(ctx, entitlementPoll, func(ctx context.Context) {
		if err := e.refresh(ctx); err != nil && ctx.Err() == nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "entitlement refresh failed; keeping the last view", slog.Any("err", err))
		}
	})
}

// Profiles returns the serving catalog's quota profiles and tenants.
func (e *entitlements) Profiles() ([]config.Profile, []config.Tenant) {
	c := e.live.Load().Catalog
	return c.Profiles, c.Tenants
}
