package pipeline

import (
	"fmt"

	"github.com/sluicehq/sluice"
)

// Owned credentials (BYOK). A credential with an owner serves only the
// requests of that owner: of a key of its tenant and, when the owner names
// an end user, of requests naming that user from a key that may assert
// users (see owner). The rule for a request is
// "own keys only, when it has any": among the alias's edges its key's route
// policy allows, the request runs on those of its most specific owner —
// its end user's own credentials, else its tenant's, else the platform's —
// and on no others. So an owner's request never moves to the platform's
// credentials (and the platform's bill) because its own key is cooling,
// full or disabled — it waits, or is told its own credentials are
// unavailable — and nobody else's request ever sees an owned credential,
// whatever its policy, failover or the platform accounts' state. Every
// candidate list goes through route, also when a waiting request plans
// again after a reload, so the filter holds on every path.

// owner is whom a request may own credentials as: its key's tenant, and
// the end user it names when its key may assert users (keys[].assert:
// [user], the rule that gives an end user their entitlements too). Any
// other key's X-Sluice-User names the user for limits and the record
// only: the user's own credentials are not its to run on.
type owner struct{ tenant, user string }

// ownerOf is the owner a request req of key k runs as.
func (s *Snapshot) ownerOf(k *sluice.Key, req *sluice.Request) owner {
	o := owner{tenant: k.Tenant}
	if s.keys[k.ID].assertUser {
		o.user = req.User
	}
	return o
}

// Ownership of a credential, as a request sees it; higher is more its own.
const (
	notOwn      = -1 // someone else's: never usable
	platformOwn = 0  // the platform's
	tenantOwn   = 1  // the request's tenant's
	userOwn     = 2  // the request's end user's (within its tenant)
)

// ownership says whose credential cr is to a request of owner r (user ""
// = none).
func ownership(cr *sluice.Credential, r owner) int {
	switch o := cr.Owner; {
	case o.Platform():
		return platformOwn
	case o.Tenant != r.tenant:
		return notOwn
	case o.User == "":
		return tenantOwn
	case o.User == r.user:
		return userOwn
	}
	return notOwn
}

// own records the edges on owned credentials among an alias's.
func (s *Snapshot) own(alias string, edges []*sluice.Edge) {
	for _, e := range edges {
		if !e.Credential.Owner.Platform() {
			s.owned[alias] = append(s.owned[alias], e)
		}
	}
}

// ownLevel is the ownership whose edges a request of owner r on alias
// runs on: the highest among the alias's edges that rp allows, in service
// or not — an owner's disabled key must not send its requests to the
// platform. Only owned edges can raise it, so an alias without any costs
// nothing.
func (s *Snapshot) ownLevel(alias string, rp *routePolicy, r owner) int {
	level := platformOwn
	for _, e := range s.owned[alias] {
		if o := ownership(e.Credential, r); o > level && rp.allows(e.Account.ID) {
			level = o
		}
	}
	return level
}

// ownUnavailable answers a request that may run only on its owner's
// credentials when none of them is in service, naming why the first is
// not (an owner's key disabled by an upstream auth failure says so, with
// the reason): 503 upstream_binding_unavailable. It returns nil when the
// request is not limited to its owner's credentials, or when one of them
// is in service (the request failed on it for another reason).
func (h *Handler) ownUnavailable(snap *Snapshot, key *sluice.Key, req *sluice.Request) error {
	rp, r := snap.policy(key, req), snap.ownerOf(key, req)
	level := snap.ownLevel(req.Model, rp, r)
	if level == platformOwn {
		return nil
	}
	why := ""
	for _, e := range snap.owned[req.Model] {
		if ownership(e.Credential, r) != level || !rp.allows(e.Account.ID) {
			continue
		}
		out := h.outOfService(snap, e)
		if out == "" {
			return nil
		}
		if why == "" {
			why = h.outOfServiceReason(e, out)
		}
	}
	return &sluice.Error{Code: sluice.CodeBindingUnavailable,
		Msg: fmt.Sprintf("model %s may use only your own credentials, and none is in service: %s", req.Model, why)}
}

// outOfServiceReason says why e is out of service (outOfService said
// out), for its owner: the status and reason of its credential or account,
// which never hold a secret.
func (h *Handler) outOfServiceReason(e *sluice.Edge, out string) string {
	if out == "breaker_open" {
		return "endpoint " + e.Endpoint.ID + " is failing"
	}
	if st := h.statuses.Credential(e.Credential.ID); st.State != sluice.UpstreamActive {
		return fmt.Sprintf("credential %s is %s (%s)", e.Credential.ID, st.State, st.Reason)
	}
	if st := h.statuses.Account(e.Account.ID); st.State == sluice.UpstreamDisabled {
		return fmt.Sprintf("account %s is disabled (%s)", e.Account.ID, st.Reason)
	}
	return "credential " + e.Credential.ID + " has no valid access token"
}

// ownsRoute reports whether a request of key k runs on its owner's own
// credentials only: it costs the platform nothing, so the platform's cost
// budgets do not hold it back.
func (s *Snapshot) ownsRoute(k *sluice.Key, req *sluice.Request) bool {
	return s.ownLevel(req.Model, s.policy(k, req), s.ownerOf(k, req)) != platformOwn
}

// callPolicy is the route policy call follows for a request of key k: its
// key's, but for a preferred key's request that runs on its owner's own
// credentials only (route kept no others), the default: a preferred
// policy's accounts, wait and fallback order the platform's accounts, so
// its BYOK requests are neither made to wait for them nor recorded as
// fallbacks from them. (A strict or pool policy lets such a request run
// only on owned accounts it lists, which it then expects.)
func (s *Snapshot) callPolicy(k *sluice.Key, req *sluice.Request) *routePolicy {
	rp := s.policy(k, req)
	if rp.mode == "preferred" && s.ownsRoute(k, req) {
		return &defaultPolicy
	}
	return rp
}
