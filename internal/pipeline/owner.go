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

// ownerOf is the owner a request of key kp for end user user runs as.
func (s *Snapshot) ownerOf(kp *keyPolicy, user string) owner {
	o := owner{tenant: kp.key.Tenant}
	if kp.assertUser {
		o.user = user
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

// ownUnavailable answers a request (a) that may run only on its owner's
// credentials when none of them is in service, naming why the first is
// not (an owner's key disabled by an upstream auth failure says so, with
// the reason): 503 upstream_binding_unavailable. It returns nil when the
// request is not limited to its owner's credentials, or when one of them
// is in service (the request failed on it for another reason).
func (h *Handler) ownUnavailable(a *admission) error {
	if !a.ownsRoute() {
		return nil
	}
	why := ""
	for _, e := range a.snap.owned[a.model] {
		if ownership(e.Credential, a.owner) != a.own || !a.policy.allows(e.Account.ID) {
			continue
		}
		out := h.outOfService(a.snap, e)
		if out == "" {
			return nil
		}
		if why == "" {
			why = h.outOfServiceReason(e, out)
		}
	}
	return &sluice.Error{Code: sluice.CodeBindingUnavailable,
		Msg: fmt.Sprintf("model %s may use only your own credentials, and none is in service: %s", a.model, why)}
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
