package pipeline

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/routing"
	"github.com/sluicehq/sluice/internal/store"
)

// routePolicy is a key's route policy, compiled by compilePolicy: which
// accounts its requests may use, which first, and in which strategy's
// order. It filters and orders the candidates the capacity engine waits
// for; it never bypasses the engine. A zero routePolicy is mode default.
type routePolicy struct {
	mode sluice.PolicyMode
	// accounts are the bound accounts (strict, preferred) or the pool's
	// (pool); nil for default.
	accounts []string
	pool     string           // pool: the pool whose limits every request claims
	strategy routing.Strategy // pool: the pool's; nil = the alias's own
	// fallback are the accounts a preferred request may fall back to: the
	// fallback pool's, or every account when fallbackAny.
	fallback     []string
	fallbackAny  bool
	fallbackPool string        // the fallback pool, whose limits a fallback claims; "" with any
	wait         time.Duration // preferred: how long to wait for room on the bound accounts
}

// defaultPolicy is the route policy of a key the snapshot does not know.
var defaultPolicy = routePolicy{mode: sluice.PolicyDefault}

// compiledPool is a pool as keys route through it.
type compiledPool struct {
	accounts []string
	strategy routing.Strategy
}

// compilePolicy compiles a route policy against the snapshot's pools and
// accounts, for a key of the catalog or of the admin API alike. It fails
// when the policy names a pool, an account or a strategy the snapshot does
// not have (the catalog's own keys are validated against it beforehand).
func (s *Snapshot) compilePolicy(p config.Policy) (routePolicy, error) {
	rp := routePolicy{mode: p.Mode, wait: p.Wait.D()}
	switch rp.mode {
	case "", sluice.PolicyDefault:
		rp.mode = sluice.PolicyDefault
	case sluice.PolicyPool:
		pl, ok := s.pools[p.Pool]
		if !ok {
			return routePolicy{}, fmt.Errorf("unknown pool %q", p.Pool)
		}
		rp.pool, rp.accounts, rp.strategy = p.Pool, pl.accounts, pl.strategy
	case sluice.PolicyStrict, sluice.PolicyPreferred:
		for _, id := range p.Accounts {
			if s.Accounts[id] == nil {
				return routePolicy{}, fmt.Errorf("unknown account %q", id)
			}
		}
		rp.accounts = p.Accounts
		if rp.mode == sluice.PolicyStrict {
			break
		}
		if p.Fallback == config.FallbackAny {
			rp.fallbackAny = true
			break
		}
		pl, ok := s.pools[p.Fallback]
		if !ok {
			return routePolicy{}, fmt.Errorf("unknown fallback pool %q", p.Fallback)
		}
		rp.fallback, rp.fallbackPool = pl.accounts, p.Fallback
	default:
		return routePolicy{}, fmt.Errorf("unknown policy mode %q", p.Mode)
	}
	return rp, nil
}

// binds reports whether the policy names accounts of its own (strict,
// preferred): its requests go to those first, or only.
func (rp *routePolicy) binds() bool {
	return rp.mode == sluice.PolicyStrict || rp.mode == sluice.PolicyPreferred
}

// bound reports whether account is one the policy binds or pools.
func (rp *routePolicy) bound(account string) bool { return slices.Contains(rp.accounts, account) }

// rank sorts a preferred policy's edges: its bound accounts' first.
func (rp *routePolicy) rank(e *sluice.Edge) int {
	if rp.bound(e.Account.ID) {
		return 0
	}
	return 1
}

// allows reports whether a request of the policy may run on account at all.
func (rp *routePolicy) allows(account string) bool {
	switch rp.mode {
	case sluice.PolicyStrict, sluice.PolicyPool:
		return rp.bound(account)
	case sluice.PolicyPreferred:
		return rp.fallbackAny || rp.bound(account) || slices.Contains(rp.fallback, account)
	}
	return true
}

// fallbackLimits are the limits a preferred request claims when it falls
// back: its own limits (placed already, see placeLimits), and its fallback
// pool's, placed, when that pool has any. Other policies' requests claim
// limits alone.
func (s *Snapshot) fallbackLimits(rp *routePolicy, limits []store.Unit) []store.Unit {
	if rp.fallbackPool == "" {
		return limits
	}
	u, ok := s.limits["pool:"+rp.fallbackPool]
	if !ok {
		return limits
	}
	if s.domains.split {
		u.Domain = s.limitDomain(u.ID)
	}
	return append(limits[:len(limits):len(limits)], u)
}
