package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/store"
)

var _ admin.AccountSuspender = (*pool)(nil)

// SuspendAccount disables the account with the operator's reason: the
// shared status every replica follows, so no replica gives it a new claim
// and its running work finishes. SetAccount's "enable" resumes it.
func (p *pool) SuspendAccount(ctx context.Context, id, reason string) (admin.AccountState, error) {
	if _, ok := p.live.Load().Accounts[id]; !ok {
		return admin.AccountState{}, fmt.Errorf("account %s: %w", id, catalog.ErrNotFound)
	}
	if err := p.statuses.Set(ctx, capacity.KindAccount, id, store.Status{State: sluice.UpstreamDisabled, Reason: reason}); err != nil {
		return admin.AccountState{}, err
	}
	all, err := p.Accounts(ctx)
	if err != nil {
		return admin.AccountState{}, err
	}
	return all[slices.IndexFunc(all, func(a admin.AccountState) bool { return a.ID == id })], nil
}
