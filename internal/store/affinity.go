package store

import (
	"context"
	"time"
)

// Affinity holds the session-affinity bindings of every replica: a seed
// (a hash naming one conversation) → the account its requests run on, so
// that each turn finds the upstream prompt cache the previous one left
// there. A binding has an idle TTL: it lapses ttl after its last use, and
// every use (Touch, Bind) pushes that back. Bindings are soft state: losing
// one costs a cache miss, never a wrong answer. Each binding belongs to
// the virtual key whose request bound it (owner), and a domain keeps at
// most MaxKeyBindings of one key's and MaxTenantBindings of one tenant's:
// binding one more forgets that key's (or tenant's) least recently used,
// never another tenant's, so no tenant's flood of new conversations costs
// another its bindings. Implementations are safe for concurrent use by
// many replicas; errors of the store itself wrap ErrUnavailable. Seeds,
// accounts, tenants and keys are IDs: no 0x00 bytes.
type Affinity interface {
	// Touch returns the account seed is bound to in domain ("" when none,
	// or lapsed) and pushes its expiry to now+ttl; it is owner's most
	// recently used binding now.
	Touch(ctx context.Context, domain string, owner SeedOwner, seed string, ttl time.Duration) (string, error)
	// Bind binds seed to account to for ttl, provided it is still bound to
	// from or not bound at all (from "" = the request saw no binding): a
	// request that saw from and ran on to moves the seed; when another
	// request bound or moved it meanwhile, that binding stands,
	// so concurrent requests never bounce a seed back and forth. It
	// returns the account the seed is bound to afterwards (to, or the
	// other's), whose expiry is pushed to now+ttl either way. A new
	// binding is owner's; past owner's bounds, its least recently used
	// binding is forgotten.
	Bind(ctx context.Context, domain string, owner SeedOwner, seed, from, to string, ttl time.Duration) (string, error)
	// Binding returns seed's binding without using it (its expiry stays):
	// for operators. ok is false when there is none.
	Binding(ctx context.Context, domain, seed string) (b Binding, ok bool, err error)
}

// SeedOwner is whose conversation a seed names: the virtual key whose
// requests bind it, and the key's tenant.
type SeedOwner struct{ Tenant, Key string }

// The bounds of one owner's bindings in a domain (see Affinity). A
// binding costs about 100 bytes.
const (
	MaxKeyBindings    = 10_000
	MaxTenantBindings = 20_000
)

// Binding is a seed's binding as an operator sees it.
type Binding struct {
	Account string
	TTL     time.Duration // left before it lapses, unless used again
}
