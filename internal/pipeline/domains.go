package pipeline

import (
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// domains splits the catalog's capacity state into capacity domains, so
// that on a Redis Cluster independent accounts land on different slots
// (every key of a domain carries its {d:<domain>} hash tag) while one
// claim stays one atomic decision over one domain.
//
// A domain is a connected component of accounts: two accounts are in one
// when a model alias has edges on both, since one claim may choose
// between the candidates of its alias and its queue orders them all (FIFO
// and priority hold within a domain). An account no alias shares is a
// domain of its own. Each component is named after the smallest ID among
// its accounts ("a:<account>"), so an edit that leaves a component's
// smallest account in it keeps its name, and with it its leases, queues
// and cooldowns. An edit that merges components keeps the name of the one
// holding the smallest ID; the others' accounts, like those of a part split
// off, move to another name: leases granted before the edit are renewed
// and released in the domain they were granted in, and counted in the
// account's new domain too by a copy each replica makes as it loads the
// edit (capacity.Engine.Rehome, with UnitDomain); waiting requests leave
// the old domain's queue and queue again in the new one at their next try
// (see capacity.Engine.Wait).
//
// Limits that span accounts (Candidate.Limits: key, tenant, end user,
// task type, pool, billing account) stay in the claim's domain when the
// catalog is one domain — today's single atomic claim, one round trip —
// or when every account the limit can touch is in one domain (an alias's
// own limit, a per-model unit, a pool whose accounts share a domain).
// Otherwise the limit is held in a domain of its own, "l:<limit ID>" (an
// end user's in "l:user:<key>", so that per-user limits do not grow the
// number of domains), and the capacity engine takes its token there before
// it claims the account (store.Unit.Domain).
type domains struct {
	split   bool              // more than one domain
	only    string            // the domain, when there is one: no lookup on the hot path
	byUnit  map[string]string // unit ID (account, credential, per-model unit) → its domain
	byAlias map[string]string // alias → the domain of its accounts
	inPool  map[string]bool   // pool ID → its accounts share one domain (its limit is held there)
}

// noDomain is the domain of an alias without any edge: nothing is ever
// granted in it, and a request for the alias fails before it waits.
const noDomain = "a:"

// compileDomains computes the domains of s from its accounts, its units
// and the edges of every alias (by alias, as Compile builds them). It
// runs before the limits are compiled, which it places.
func (s *Snapshot) compileDomains(edges map[string][][]*sluice.Edge) {
	parent := make(map[string]string, len(s.Accounts))
	var find func(string) string
	find = func(a string) string {
		p, ok := parent[a]
		if !ok || p == a {
			parent[a] = a
			return a
		}
		r := find(p)
		parent[a] = r
		return r
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra < rb { // the root is the smallest ID: the component's name
			parent[rb] = ra
		} else if rb < ra {
			parent[ra] = rb
		}
	}
	for id := range s.Accounts {
		find(id)
	}
	for _, byDeployment := range edges {
		first := ""
		for _, es := range byDeployment {
			for _, e := range es {
				if first == "" {
					first = e.Account.ID
				}
				union(first, e.Account.ID)
			}
		}
	}
	d := domains{byUnit: map[string]string{}, byAlias: make(map[string]string, len(edges)), inPool: map[string]bool{}}
	roots := map[string]bool{}
	for id := range s.Accounts {
		r := find(id)
		roots[r] = true
		d.byUnit["account:"+id] = "a:" + r
	}
	d.split = len(roots) > 1
	for r := range roots {
		d.only = "a:" + r // read only when there is one root
	}
	for _, cr := range s.Credentials {
		d.byUnit["credential:"+cr.ID] = d.byUnit["account:"+cr.AccountID]
	}
	for alias, byDeployment := range edges {
		d.byAlias[alias] = noDomain
		for _, es := range byDeployment {
			if len(es) > 0 {
				d.byAlias[alias] = d.byUnit["account:"+es[0].Account.ID]
			}
		}
	}
	for _, byDeployment := range edges {
		for _, es := range byDeployment {
			for _, e := range es {
				if u, ok := s.modelUnits[e.ID]; ok {
					d.byUnit[u.ID] = d.byUnit["account:"+e.Account.ID]
				}
			}
		}
	}
	for _, p := range s.Catalog.Pools {
		one := ""
		d.inPool[p.ID] = true
		for _, a := range p.Accounts {
			if dom := d.byUnit["account:"+a]; one == "" {
				one = dom
			} else if dom != one {
				d.inPool[p.ID] = false
			}
		}
	}
	s.domains = d
}

// AliasDomain returns the capacity domain the requests for alias claim in.
func (s *Snapshot) AliasDomain(alias string) string {
	if !s.domains.split && s.domains.only != "" {
		return s.domains.only
	}
	if d, ok := s.domains.byAlias[alias]; ok {
		return d
	}
	return noDomain
}

// UnitDomain returns the capacity domain of a unit (an account's, a
// credential's acting as its own account, or a per-model unit), for the
// operator's view of it; "" for an ID the snapshot does not know.
func (s *Snapshot) UnitDomain(id string) string { return s.domains.byUnit[id] }

// limitDomain is where the limit id is held (see domains): "" in the
// claim's domain.
func (s *Snapshot) limitDomain(id string) string {
	switch {
	case !s.domains.split, strings.HasPrefix(id, "model:"), strings.HasPrefix(id, "account:"), strings.HasPrefix(id, "credential:"):
		return "" // one domain; an alias's own limit; a unit under an account or a credential
	case strings.HasPrefix(id, "pool:") && s.domains.inPool[id[len("pool:"):]]:
		return ""
	case strings.HasPrefix(id, "user:"):
		key, _, _ := strings.Cut(id[len("user:"):], ":")
		return "l:user:" + key
	}
	return "l:" + id
}

// placeLimits returns limits with the domain of each one that spans
// capacity domains set (store.Unit.Domain). A catalog of one domain has
// none: limits is returned as it is, at no cost. Otherwise it is copied,
// never changed, as it may be shared.
func (s *Snapshot) placeLimits(limits []store.Unit) []store.Unit {
	if !s.domains.split {
		return limits
	}
	var out []store.Unit
	for i, l := range limits {
		if l.Domain != "" {
			continue
		}
		d := s.limitDomain(l.ID)
		if d == "" {
			continue
		}
		if out == nil {
			out = append(make([]store.Unit, 0, len(limits)), limits...)
		}
		out[i].Domain = d
	}
	if out == nil {
		return limits
	}
	return out
}
