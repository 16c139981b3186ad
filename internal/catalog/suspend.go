package catalog

import (
	"context"
	"time"
)

// SuspensionKind is what a suspension applies to.
type SuspensionKind string

// The subjects that can be suspended in the catalog store. (Upstream
// accounts are suspended through their shared status, which every replica
// already follows.)
const (
	SuspendedBillingAccount SuspensionKind = "billing_account"
	SuspendedTenant         SuspensionKind = "tenant"
)

// Suspension is an operator's decision that nothing is served for a billing
// account or a tenant until it is resumed.
type Suspension struct {
	Kind   SuspensionKind
	ID     string    // the billing account's or the tenant's ID
	Reason string    // why, as the operator wrote it
	Since  time.Time // when it was suspended (UTC)
	By     string    // the admin token's ID, never its secret
}

// Suspensions is the durable store of suspensions, read by every replica.
// A subject is suspended while a suspension of it is stored. Safe for
// concurrent use.
type Suspensions interface {
	// Suspend stores s, replacing a suspension of the same subject (its
	// reason, since and by then are s's).
	Suspend(ctx context.Context, s Suspension) error
	// Resume removes the suspension of the subject. It reports whether
	// there was one; resuming a subject not suspended is not an error.
	Resume(ctx context.Context, kind SuspensionKind, id string) (bool, error)
	// ListSuspensions returns every suspension, ordered by kind then ID.
	ListSuspensions(ctx context.Context) ([]Suspension, error)
}
