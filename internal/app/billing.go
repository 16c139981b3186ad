package app

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/periodic"
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
//
// Each read also closes the allowance cycles that ended (closeCycles)
// before it reads the balances, so that the balance view has the new
// cycle's allowance as soon as it has the new cycle's charges.
type ledgerTotals struct {
	store ledger.Billing
	live  *pipeline.Live
	// serving is, per billing account with an allowance, the cycle this
	// process last saw it in and the allowance it had then. The view
	// reads the totals under a lock: one read at a time.
	serving map[string]servedCycle
	// skew moves the clock cycles are closed by forward (nanoseconds):
	// tests take a gateway across a cycle's end without waiting for it.
	skew atomic.Int64
}

// servedCycle is an allowance as a process saw it during one cycle.
type servedCycle struct {
	start time.Time
	pipeline.Allowance
}

func newLedgerTotals(store ledger.Billing, live *pipeline.Live) *ledgerTotals {
	return &ledgerTotals{store: store, live: live, serving: map[string]servedCycle{}}
}

func (l *ledgerTotals) Totals(ctx context.Context, now time.Time) (billing.Totals, error) {
	accounts, err := l.store.BillingAccounts(ctx)
	if err != nil {
		return billing.Totals{}, err
	}
	prices, err := l.store.Prices(ctx)
	if err != nil {
		return billing.Totals{}, err
	}
	l.live.SetStoredBilling(pipeline.StoredBilling{Accounts: accounts, Prices: prices})
	if err := l.closeCycles(ctx, now); err != nil {
		return billing.Totals{}, err
	}
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

// closeCycles posts the entry that closes each ended allowance cycle
// (ledger.EntryAllowance): what the account spent in it, up to its
// allowance, given back. Admission counts the allowance besides the
// balance, which bears the cycle's charges in full; until the closing
// entry is posted, the balance still bears the ended cycle's, and the
// account may spend less than it should — never more.
//
// A cycle is closed by a process that served the account with an
// allowance during it, at the allowance it had then: an allowance given
// during a cycle counts for that cycle, never for the one before. A
// process that did not (it started since) closes the cycle before now
// only if the one before that was closed: the account had its allowance
// across it. Every replica posts the same entries; Post keeps one.
//
// A charge recorded after its cycle was closed (a request that ran across
// the cycle's end, a record replayed late from the spool) is borne by the
// balance: the closing entry is not revised.
func (l *ledgerTotals) closeCycles(ctx context.Context, now time.Time) error {
	now = now.Add(time.Duration(l.skew.Load())).UTC()
	spent := map[time.Time]ledger.Balances{} // by the last instant of a cycle: that day's and month's spend
	closeCycle := func(c servedCycle) error {
		end := ledger.CycleEnd(c.Cycle, c.start)
		last := end.Add(-time.Nanosecond)
		b, ok := spent[last]
		if !ok {
			var err error
			if b, err = l.store.Balances(ctx, last); err != nil {
				return err
			}
			spent[last] = b
		}
		used := b.Accounts[c.Account].InCycle(c.Cycle).Price
		_, err := l.store.Post(ctx, ledger.Entry{Account: c.Account, RequestID: ledger.AllowanceRequestID(c.Account, c.start),
			Kind: ledger.EntryAllowance, Amount: max(min(used, c.Amount), 0), At: end})
		return err
	}
	current := map[string]bool{}
	for _, a := range l.live.Load().Allowances() {
		current[a.Account] = true
		start := ledger.CycleStart(a.Cycle, now)
		served, seen := l.serving[a.Account]
		switch {
		case seen && served.start.Before(start):
			if err := closeCycle(served); err != nil {
				return err
			}
		case !seen:
			prev := ledger.CycleStart(a.Cycle, start.Add(-time.Nanosecond))
			before := ledger.CycleStart(a.Cycle, prev.Add(-time.Nanosecond))
			closed, err := l.store.Entries(ctx, ledger.AllowanceRequestID(a.Account, before))
			if err != nil {
				return err
			}
			if slices.ContainsFunc(closed, func(e ledger.Entry) bool { return e.Kind == ledger.EntryAllowance }) {
				if err := closeCycle(servedCycle{prev, a}); err != nil {
					return err
				}
			}
		}
		l.serving[a.Account] = servedCycle{start, a}
	}
	for id, served := range l.serving {
		if current[id] {
			continue
		}
		// Its allowance is gone: from the current cycle on. A cycle that
		// ended with it is still closed.
		if served.start.Before(ledger.CycleStart(served.Cycle, now)) {
			if err := closeCycle(served); err != nil {
				return err
			}
		}
		delete(l.serving, id)
	}
	return nil
}

// startBilling keeps the balance view (and the stored billing accounts and
// prices) fresh while the catalog serving has a billing section: it reads
// them at once, so that billed requests are admitted from the start when
// the store answers, then every billingRefresh in the background. Every
// failed read is logged.
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
	g.background(run, func(ctx context.Context) { periodic.Run(ctx, billingRefresh, refresh) })
}
