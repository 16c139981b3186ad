package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// The balance view admission reads is refreshed from the ledger store
// every billingRefresh; a view not refreshed within billingStale refuses
// billed requests (fail closed) until a read succeeds again.
const (
	billingRefresh = time.Second
	billingStale   = 5 * time.Second
)

// ledgerTotals reads the balance view's totals from the ledger store, in
// its one query for admission, and with them the billing accounts and
// price versions of the admin API, which it hands to live (compiled into
// the serving snapshot only when they changed). So one refresh every
// second keeps both fresh on every replica, and a view that is fresh was
// read with the stored accounts: a key bound to one this gateway has not
// read yet is refused as stale (503), not as unbound.
type ledgerTotals struct {
	store ledger.Billing
	live  *pipeline.Live
}

func (l ledgerTotals) Totals(ctx context.Context, now time.Time) (billing.Totals, error) {
	accounts, err := l.store.BillingAccounts(ctx)
	if err != nil {
		return billing.Totals{}, err
	}
	prices, err := l.store.Prices(ctx)
	if err != nil {
		return billing.Totals{}, err
	}
	l.live.SetStoredBilling(pipeline.StoredBilling{Accounts: accounts, Prices: prices})
	b, err := l.store.Balances(ctx, now)
	if err != nil {
		return billing.Totals{}, err
	}
	t := billing.Totals{At: b.At, Balances: make(map[string]billing.Micros, len(b.Accounts)), Spent: map[billing.Subject]billing.Spent{}}
	for id, a := range b.Accounts {
		t.Balances[id] = a.Balance
		t.Spent[billing.Subject{Kind: billing.Account, ID: id}] = billing.Spent{Day: a.Day.Price, Month: a.Month.Price}
	}
	for kind, spent := range map[billing.SubjectKind]map[string]ledger.Spent{billing.Key: b.Keys, billing.Tenant: b.Tenants} {
		for id, s := range spent {
			t.Spent[billing.Subject{Kind: kind, ID: id}] = billing.Spent{Day: s.Day.Price, Month: s.Month.Price}
		}
	}
	// Pools and task types have budgets for what they cost the platform.
	for kind, spent := range map[billing.SubjectKind]map[string]ledger.Spent{billing.Pool: b.Pools, billing.Task: b.Tasks} {
		for id, s := range spent {
			t.Spent[billing.Subject{Kind: kind, ID: id}] = billing.Spent{Day: s.Day.Cost, Month: s.Month.Cost}
		}
	}
	return t, nil
}

// startBilling keeps the balance view (and the stored billing accounts and
// prices) fresh while the catalog serving has a billing section: it reads
// them at once, so that billed
// requests are admitted from the start when the store answers, then every
// billingRefresh in the background. Every failed read is logged.
func (g *Gateway) startBilling(ctx, run context.Context) {
	refresh := func(ctx context.Context) {
		if !g.live.Load().Billing() {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, billingStale)
		defer cancel()
		if err := g.view.Refresh(rctx); err != nil && ctx.Err() == nil {
			g.log.LogAttrs(ctx, slog.LevelWarn, "billing balances not read: billed requests are refused once they are stale",
				slog.Duration("stale_after", billingStale), slog.Any("err", err))
		}
	}
	refresh(ctx)
	g.background(run, func(ctx context.Context) {
		t := time.NewTicker(billingRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				refresh(ctx)
			}
		}
	})
}
