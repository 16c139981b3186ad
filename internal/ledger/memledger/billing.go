package memledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// priceID is what identifies a stored price version.
type priceID struct {
	kind               billing.Kind
	plan, alias, model string
	from               int64 // unix µs
}

// entryID is what identifies a ledger entry.
type entryID struct {
	request string
	kind    ledger.EntryKind
}

// PutBillingAccount stores a copy of a, replacing the account of its ID.
func (s *Store) PutBillingAccount(_ context.Context, a ledger.BillingAccount) error {
	if err := a.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accounts == nil {
		s.accounts = make(map[string]ledger.BillingAccount)
	}
	s.accounts[a.ID] = a
	return nil
}

// BillingAccounts returns the accounts ordered by ID.
func (s *Store) BillingAccounts(context.Context) ([]ledger.BillingAccount, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ledger.BillingAccount, 0, len(s.accounts))
	for _, a := range s.accounts {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b ledger.BillingAccount) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// PutPrice stores the version, its effective time to the microsecond in
// UTC, unless it is stored already.
func (s *Store) PutPrice(_ context.Context, p billing.Price) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p.EffectiveFrom = p.EffectiveFrom.UTC().Truncate(time.Microsecond)
	id := priceID{p.Kind, p.Plan, p.Alias, p.Model, p.EffectiveFrom.UnixMicro()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.prices[id]; ok {
		if old.Rates != p.Rates {
			return fmt.Errorf("put %s %s: %w", p.Kind, p.Version(), ledger.ErrPriceConflict)
		}
		return nil
	}
	if s.prices == nil {
		s.prices = make(map[priceID]billing.Price)
	}
	s.prices[id] = p
	return nil
}

// Prices returns the stored versions in the order of billing.Table.All.
func (s *Store) Prices(context.Context) ([]billing.Price, error) {
	s.mu.Lock()
	all := make([]billing.Price, 0, len(s.prices))
	for _, p := range s.prices {
		all = append(all, p)
	}
	s.mu.Unlock()
	t, err := billing.NewTable(all) // stored versions are unique and valid: cannot fail
	if err != nil {
		return nil, err
	}
	return t.All(), nil
}

// Post stores the entry, its time to the microsecond in UTC, unless one of
// its request and kind is stored; it refuses what ledger.Billing's Post
// refuses.
func (s *Store) Post(_ context.Context, e ledger.Entry) (bool, error) {
	if err := e.Validate(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[entryID{e.RequestID, e.Kind}]; ok {
		return false, nil
	}
	if e.Kind.Keyed() {
		for _, k := range [...]ledger.EntryKind{ledger.EntryTopUp, ledger.EntryAdjustment} {
			if _, taken := s.entries[entryID{e.RequestID, k}]; taken {
				return false, fmt.Errorf("post %s %s: %w", e.Kind, e.RequestID, ledger.ErrKeyReused)
			}
		}
	}
	if e.PassesBound(s.balance(e.Account).Add(e.Amount)) {
		return false, fmt.Errorf("post %s %s: %w", e.Kind, e.RequestID, ledger.ErrBalanceBound)
	}
	return s.post(e), nil
}

// balance sums the account's entries, held at the ends of the range. The
// caller holds mu.
func (s *Store) balance(account string) billing.Micros {
	var b billing.Micros
	for _, e := range s.entries {
		if e.Account == account {
			b = b.Add(e.Amount)
		}
	}
	return b
}

// post stores e unless its ID is taken, and reports whether it did. The
// caller holds mu.
func (s *Store) post(e ledger.Entry) bool {
	id := entryID{e.RequestID, e.Kind}
	if _, ok := s.entries[id]; ok {
		return false
	}
	if s.entries == nil {
		s.entries = make(map[entryID]ledger.Entry)
	}
	e.At = e.At.UTC().Truncate(time.Microsecond)
	s.entries[id] = e
	return true
}

// Balances sums the entries and the billed records afresh on every call:
// slow, but an independent account of what sqlledger keeps running totals of.
func (s *Store) Balances(_ context.Context, at time.Time) (ledger.Balances, error) {
	b := ledger.Balances{At: at, Accounts: map[string]ledger.Balance{}, Keys: map[string]ledger.Spent{},
		Tenants: map[string]ledger.Spent{}, Pools: map[string]ledger.Spent{}, Tasks: map[string]ledger.Spent{}}
	day, month := ledger.Day(at), ledger.Month(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		a := b.Accounts[e.Account]
		a.Balance = a.Balance.Add(e.Amount)
		b.Accounts[e.Account] = a
	}
	for _, r := range s.recs {
		c := r.Billing
		if c == nil || (c.Price == 0 && c.Cost == 0) || ledger.Month(r.Started) != month {
			continue
		}
		amounts := ledger.Amounts{Price: billing.Micros(c.Price), Cost: billing.Micros(c.Cost)}
		today := ledger.Day(r.Started) == day
		if c.Account != "" {
			a := b.Accounts[c.Account]
			a.Spent = a.Spent.Plus(amounts, today)
			b.Accounts[c.Account] = a
		}
		for m, id := range map[*map[string]ledger.Spent]string{&b.Keys: r.KeyID, &b.Tenants: r.Tenant, &b.Pools: r.Pool, &b.Tasks: r.TaskType} {
			if id != "" {
				(*m)[id] = (*m)[id].Plus(amounts, today)
			}
		}
	}
	return b, nil
}

// Statement returns the account's entries in [from, to), in statement order.
func (s *Store) Statement(_ context.Context, account string, from, to time.Time, limit int) ([]ledger.Entry, error) {
	s.mu.Lock()
	var out []ledger.Entry
	for _, e := range s.entries {
		if e.Account == account && (from.IsZero() || !e.At.Before(from)) && (to.IsZero() || e.At.Before(to)) {
			out = append(out, e)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, ledger.CompareEntries)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Entries returns the request's entries, ordered by kind.
func (s *Store) Entries(_ context.Context, requestID string) ([]ledger.Entry, error) {
	s.mu.Lock()
	var out []ledger.Entry
	for id, e := range s.entries {
		if id.request == requestID {
			out = append(out, e)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ledger.Entry) int { return cmp.Compare(a.Kind, b.Kind) })
	return out, nil
}

// Spend groups the selected billed records.
func (s *Store) Spend(_ context.Context, f ledger.SpendFilter) ([]ledger.SpendRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	index := make(map[ledger.SpendRow]int) // the row's dimensions → position in out
	var out []ledger.SpendRow
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		c := r.Billing
		if c == nil || (f.Account != "" && c.Account != f.Account) || !f.Selects(r.KeyID, r.Tenant, r.Started) {
			continue
		}
		g := group(&r, f.By)
		i, ok := index[g]
		if !ok {
			i = len(out)
			index[g] = i
			out = append(out, g)
		}
		row := &out[i]
		row.Requests++
		if c.Unmeasured {
			row.Unmeasured++
		}
		if r.Usage.Measured {
			row.Tokens += r.Usage.TotalTokens
			row.CachedTokens += r.Usage.CachedTokens
		}
		row.Price = row.Price.Add(billing.Micros(c.Price))
		row.Cost = row.Cost.Add(billing.Micros(c.Cost))
	}
	slices.SortFunc(out, ledger.CompareSpendRows)
	return out, nil
}

// group is the row, without sums, that r falls in when grouped by dims.
func group(r *sluice.UsageRecord, dims []ledger.Dimension) ledger.SpendRow {
	var g ledger.SpendRow
	for _, d := range dims {
		switch d {
		case ledger.ByAccount:
			g.Account = r.Billing.Account
		case ledger.ByKey:
			g.KeyID = r.KeyID
		case ledger.ByTenant:
			g.Tenant = r.Tenant
		case ledger.ByEndUser:
			g.EndUser = r.EndUser
		case ledger.ByTaskType:
			g.TaskType = r.TaskType
		case ledger.ByPool:
			g.Pool = r.Pool
		case ledger.ByAlias:
			g.Alias = r.Alias
		case ledger.ByModel:
			g.Model = ledger.ModelOf(r)
		case ledger.ByDay:
			g.Day = ledger.Day(r.Started)
		}
	}
	return g
}
