package store

import (
	"context"
	"time"
)

// Entitlement gives an end user of a tenant a quota profile for a period:
// while it is valid, the user's requests run under Profile (its limits,
// priority bonus and pool) instead of the tenant's default profile.
type Entitlement struct {
	EndUser
	Profile string // the catalog's profiles[].id
	Pool    string // overrides the profile's pool; "" = the profile's
	// ValidFrom and ValidUntil bound when it applies: from ValidFrom
	// (inclusive) until ValidUntil (exclusive); zero = open on that side.
	ValidFrom, ValidUntil time.Time
	UpdatedAt             time.Time // when it was last written; set by the store
}

// EndUser names an end user within a tenant (as requests name it: user,
// X-Sluice-User). Two tenants' users of the same name are different users.
type EndUser struct {
	Tenant, User string
}

// ValidAt reports whether e applies at t.
func (e *Entitlement) ValidAt(t time.Time) bool {
	return !t.Before(e.ValidFrom) && (e.ValidUntil.IsZero() || t.Before(e.ValidUntil))
}

// EntitlementFilter selects entitlements for List; zero fields select all.
type EntitlementFilter struct {
	Tenant  string
	User    string
	Profile string
}

// Entitlements hold the end users' entitlements, shared by every replica
// (a database). There is at most one per end user: Put replaces it.
// Implementations must be safe for concurrent use, also by several
// processes sharing one backend. Times are kept to the microsecond, UTC.
//
// Version is cheap enough to poll several times a second: it changes with
// every Put or Delete that changed something (and only grows), so a
// replica that keeps the entitlements in memory reads them again with
// List only when it changed. A write and its version change are atomic:
// a List after Version returned v sees every write up to v.
type Entitlements interface {
	// PutEntitlements stores every entitlement of es (replacing the one
	// of each end user) in one atomic step, stamped with now as UpdatedAt.
	PutEntitlements(ctx context.Context, es []Entitlement, now time.Time) error
	// DeleteEntitlements removes the entitlements of users in one atomic
	// step and returns how many there were.
	DeleteEntitlements(ctx context.Context, users []EndUser) (int, error)
	// ListEntitlements returns the entitlements f selects, ordered by
	// tenant then user.
	ListEntitlements(ctx context.Context, f EntitlementFilter) ([]Entitlement, error)
	// EntitlementsVersion returns the current version.
	EntitlementsVersion(ctx context.Context) (int64, error)
}

// Select reports whether f selects e.
func (f EntitlementFilter) Select(e *Entitlement) bool {
	return (f.Tenant == "" || f.Tenant == e.Tenant) && (f.User == "" || f.User == e.User) && (f.Profile == "" || f.Profile == e.Profile)
}
