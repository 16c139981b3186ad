package authn

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/internal/catalog"
)

// suspensionView is the suspensions published last, by subject: what
// admission reads on every request, from memory.
type suspensionView map[subject]catalog.Suspension

type subject struct {
	kind catalog.SuspensionKind
	id   string
}

// TrackSuspensions makes the keyring keep the suspended billing accounts
// and tenants of s in its view, read with the keys by every Refresh (so a
// suspension made on another replica is seen within one refresh). Call it
// once, before the first Refresh; without it nothing is suspended.
func (kr *Keyring) TrackSuspensions(s catalog.Suspensions) { kr.suspensions = s }

// Suspended returns the suspension of the billing account or tenant id as
// the last refresh saw it. It reads memory only.
func (kr *Keyring) Suspended(kind catalog.SuspensionKind, id string) (catalog.Suspension, bool) {
	view := *kr.suspended.Load()
	if len(view) == 0 || id == "" {
		return catalog.Suspension{}, false
	}
	sp, ok := view[subject{kind, id}]
	return sp, ok
}

// Suspensions returns the suspensions of kind as the last refresh saw
// them, ordered by ID.
func (kr *Keyring) Suspensions(kind catalog.SuspensionKind) []catalog.Suspension {
	var out []catalog.Suspension
	for s, sp := range *kr.suspended.Load() {
		if s.kind == kind {
			out = append(out, sp)
		}
	}
	slices.SortFunc(out, func(a, b catalog.Suspension) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Suspend stores sp and publishes it at once on this replica (the others
// see it at their next refresh). Suspending a suspended subject replaces
// its reason, time and author.
func (kr *Keyring) Suspend(ctx context.Context, sp catalog.Suspension) error {
	if kr.suspensions == nil {
		return fmt.Errorf("suspend %s %s: no suspension store", sp.Kind, sp.ID)
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if err := kr.suspensions.Suspend(ctx, sp); err != nil {
		return err
	}
	return kr.refreshLocked(ctx)
}

// Resume removes the subject's suspension, at once on this replica, and
// reports whether there was one.
func (kr *Keyring) Resume(ctx context.Context, kind catalog.SuspensionKind, id string) (bool, error) {
	if kr.suspensions == nil {
		return false, fmt.Errorf("resume %s %s: no suspension store", kind, id)
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	had, err := kr.suspensions.Resume(ctx, kind, id)
	if err != nil {
		return false, err
	}
	return had, kr.refreshLocked(ctx)
}

// readSuspensions reads every suspension from the store into a view.
func (kr *Keyring) readSuspensions(ctx context.Context) (suspensionView, error) {
	view := suspensionView{}
	if kr.suspensions == nil {
		return view, nil
	}
	all, err := kr.suspensions.ListSuspensions(ctx)
	if err != nil {
		return nil, fmt.Errorf("refresh suspensions: %w", err)
	}
	for _, sp := range all {
		view[subject{sp.Kind, sp.ID}] = sp
	}
	return view, nil
}
