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
// one costs a cache miss, never a wrong answer. Implementations are safe
// for concurrent use by many replicas; errors of the store itself wrap
// ErrUnavailable. Seeds and accounts are IDs: no 0x00 bytes.
type Affinity interface {
	// Touch returns the account seed is bound to in domain ("" when none,
	// or lapsed) and pushes its expiry to now+ttl.
	Touch(ctx context.Context, domain, seed string, ttl time.Duration) (string, error)
	// Bind binds seed to account to for ttl, provided it is still bound to
	// from or not bound at all (from "" = the request saw no binding): a
	// request that saw from and ran on to moves the seed; when another
	// request bound or moved it meanwhile, that binding stands,
	// so concurrent requests never bounce a seed back and forth. It
	// returns the account the seed is bound to afterwards (to, or the
	// other's), whose expiry is pushed to now+ttl either way.
	Bind(ctx context.Context, domain, seed, from, to string, ttl time.Duration) (string, error)
	// Binding returns seed's binding without using it (its expiry stays):
	// for operators. ok is false when there is none.
	Binding(ctx context.Context, domain, seed string) (b Binding, ok bool, err error)
}

// Binding is a seed's binding as an operator sees it.
type Binding struct {
	Account string
	TTL     time.Duration // left before it lapses, unless used again
}
