package app

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// adminBilling is the money side as the admin API sees it: the ledger
// store, the serving catalog's billing section, and the balance view,
// which reads the store again after every entry an operator posts.
type adminBilling struct {
	ledger.Billing
	g *Gateway
}

// Declared is the serving catalog's billing accounts and prices.
func (a adminBilling) Declared() admin.DeclaredBilling {
	snap := a.g.live.Load()
	b := &snap.Catalog.Billing
	d := admin.DeclaredBilling{Currency: b.Currency, Billed: b.Billed(), Prices: snap.Prices()}
	for _, acc := range b.Accounts {
		d.Accounts = append(d.Accounts, acc.Ledger())
	}
	return d
}

// BillingChanged reads the store now — balances, stored accounts and
// prices — so that a top-up admits this gateway's requests, and a new
// account or price version takes effect, at once rather than at the next
// refresh (other replicas read it within billingRefresh).
func (a adminBilling) BillingChanged(ctx context.Context) {
	if !a.g.live.Load().Billing() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), billingStale)
	defer cancel()
	if err := a.g.view.Refresh(ctx); err != nil {
		a.g.log.LogAttrs(ctx, slog.LevelWarn, "billing not read after an admin change; the periodic refresh reads it", slog.Any("err", err))
	}
}

// spendMetered counts each settled request's price and cost in the spend
// metric as its record is handed to the recorder: once per request, since
// records replayed from the spool do not pass here.
type spendMetered struct {
	pipeline.Recorder
	m *metrics.Metrics
}

func (s spendMetered) Record(ctx context.Context, rec sluice.UsageRecord) {
	if c := rec.Billing; c != nil && !c.Unmeasured {
		s.m.Spent(c.Account, rec.Alias, c.Price, c.Cost)
	}
	s.Recorder.Record(ctx, rec)
}
