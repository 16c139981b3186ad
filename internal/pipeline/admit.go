package pipeline

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/validate"
)

// Admission. A request is resolved once, when it arrives, into an
// admission: who it runs as and what the catalog makes of it. Every later
// stage (route, call, settle, a job's binding) reads the admission and
// none looks any of it up again. A catalog reload while the request waits
// rebases it on the new catalog: what the caller, the key and billing
// fixed stays; what the catalog derives from them is derived again, by
// the same code (derive).

// admission is a request as admitted. Nothing changes it once made but a
// rebase, on a copy of its own.
type admission struct {
	snap      *Snapshot   // the catalog it was admitted (or rebased) under
	principal *sluice.Key // the key as ingress authenticated it
	kp        keyPolicy   // the key as snap knows it now (its scopes, tenant, budgets) and its policy

	// Fixed when it arrives.
	model    string // its alias
	user     string // its end user; "" = none
	task     string // its task type ("" until its scopes passed)
	profile  string // the quota profile it runs under; "" = none
	entitled string // the pool its end user's entitlement routes it through; "" = none
	class    int    // its priority class: its index in sluice.Priorities
	charging *charging
	// image is its first image part, found when its alias has a
	// deployment that takes no images (validate.go); zero for none.
	// scanned says it was looked for.
	image   validate.Image
	scanned bool

	// Derived from the catalog (again on a rebase).
	alias  *sluice.Alias
	policy *routePolicy // its key's route policy for it: the accounts it may use, the pool whose limits it claims
	// follow is the policy call follows: policy, but the default for a
	// preferred key's request that runs on its owner's own credentials
	// only — a preferred policy's accounts, wait and fallback order the
	// platform's accounts, so such a request neither waits for them nor
	// is recorded as falling back from them.
	follow *routePolicy
	owner  owner
	own    int // the ownership of the credentials it runs on (owner.go)
	// ownLimits are Sluice's own limits it must fit in (Snapshot.limitsOf);
	// limits are those with its billing account's, placed in their
	// capacity domains, and fallbackLimits what it claims on its fallback.
	ownLimits, limits, fallbackLimits []store.Unit
}

// admit admits a request of key k (as ingress authenticated it) under
// snap: its scopes and profile (Snapshot.admit), then billing (charge). A
// key whose billing account or tenant is suspended is refused before
// anything else, so a suspended customer learns that first. On an error
// the admission is still returned, as far as it got, for the request's
// record.
func (h *Handler) admit(snap *Snapshot, k *sluice.Key, req *sluice.Request) (admission, error) {
	a, err := snap.admit(k, req, h.entitlements)
	if a.alias != nil {
		req.Estimate = a.alias.Estimate
	}
	if serr := h.suspended(k); serr != nil {
		return a, serr
	}
	if err != nil {
		return a, err
	}
	if a.charging, err = h.charge(&a, req); err != nil {
		return a, err
	}
	a.claim()
	return a, nil
}

// admit checks, in this order, after ingress authenticated the key from
// the headers: that the key is still what authenticated (the snapshot's
// keys follow every change to them, so one disabled, revoked, expired or
// rotated since is access_credential_inactive); that the alias exists and
// answers the request's protocol (model_not_found, with the same message
// for every key, so a key learns nothing of aliases outside its scope);
// its scopes — the alias, the API path, the service tier, the task type
// (access_scope_denied); that its policy is bound to accounts or a pool
// the catalog still has (access_key_unbound); and its quota profile
// (resolveProfile). Then it derives the rest. Billing is the Handler's
// (charge): it reads the balances.
func (s *Snapshot) admit(k *sluice.Key, req *sluice.Request, ents *Entitlements) (admission, error) {
	a := admission{snap: s, principal: k, model: req.Model, user: req.User, profile: req.Profile}
	err := a.scope(req)
	if err == nil {
		err = a.resolveProfile(ents, req.Received)
	}
	// The class is known, and recorded, also for a request its scopes
	// refused (which left a.task unset).
	task := a.task
	if a.kp.key == nil {
		task, _ = s.Task(k, req.Task)
	}
	a.class = s.class(k, task, a.profile, req.Priority)
	if err != nil {
		return a, err
	}
	a.derive()
	return a, nil
}

// scope checks the key and its scopes (see Snapshot.admit) and fixes the
// key as the snapshot knows it and the request's task type.
func (a *admission) scope(req *sluice.Request) error {
	s := a.snap
	kp, ok := s.keyActive(a.principal, req.Received)
	if !ok {
		return errKeyInactive
	}
	k := kp.key // the scopes of the key as it is now
	if alias := s.Routes.Alias(req.Model); alias == nil || !alias.Answers(req.Protocol) {
		return modelNotFound(req.Model)
	}
	if !k.Allows(req.Model) {
		return &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not use model " + req.Model}
	}
	if path, ok := k.MayCall(req.Protocol, req.Compact); !ok {
		return &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not call " + path}
	}
	if req.ServiceTier != "" && len(k.ServiceTiers) > 0 && !slices.Contains(k.ServiceTiers, req.ServiceTier) {
		return &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not use service tier " + req.ServiceTier}
	}
	task, ok := s.Task(k, req.Task)
	if !ok {
		return &sluice.Error{Code: sluice.CodeScopeDenied, Msg: "this key may not declare task type " + req.Task}
	}
	if kp.unbound {
		return errKeyUnbound
	}
	a.kp, a.task = kp, task
	return nil
}

// key is the request's key as its snapshot knows it now.
func (a *admission) key() *sluice.Key { return a.kp.key }

// derive sets what the catalog makes of the request: its alias, route
// policy, ownership and own limits.
func (a *admission) derive() {
	s := a.snap
	a.alias = s.Routes.Alias(a.model)
	a.policy = s.policy(&a.kp, a.task, a.profile, a.entitled)
	a.owner = s.ownerOf(&a.kp, a.user)
	a.own = s.ownLevel(a.model, a.policy, a.owner)
	a.follow = a.policy
	if a.policy.mode == sluice.PolicyPreferred && a.own != platformOwn {
		a.follow = &defaultPolicy
	}
	a.ownLimits = s.limitsOf(a)
}

// claim sets the limits the request claims: its own, with its billing
// account's, placed; and those of its fallback.
func (a *admission) claim() {
	a.limits = a.snap.placeLimits(a.charging.limits(a.ownLimits))
	a.fallbackLimits = a.snap.fallbackLimits(a.follow, a.limits)
}

// ownsRoute reports whether the request runs on its owner's own
// credentials only: it costs the platform nothing, so the platform's cost
// budgets do not hold it back.
func (a *admission) ownsRoute() bool { return a.own != platformOwn }

// rebase makes a the request's admission under snap, a catalog that
// replaced a's while the request waited: its key, as it authenticated,
// must still be active there (else access_credential_inactive, and a is
// left as it was); its task type, profile, class and charge stay as
// admitted; the rest is derived again.
func (a *admission) rebase(snap *Snapshot, now time.Time) error {
	kp, ok := snap.keyActive(a.principal, now)
	if !ok {
		return errKeyInactive
	}
	a.snap, a.kp = snap, kp
	a.derive()
	a.claim()
	return nil
}

// Suspensions tells admission which billing accounts and tenants an
// operator suspended. It is read on every request: it must answer from
// memory. Safe for concurrent use.
type Suspensions interface {
	Suspended(kind catalog.SuspensionKind, id string) (catalog.Suspension, bool)
}

// suspended refuses a request of key k when its billing account or its
// tenant is suspended. The reason is the operator's, not the caller's: it
// stays in the admin API.
func (h *Handler) suspended(k *sluice.Key) error {
	if h.suspensions == nil {
		return nil
	}
	if _, ok := h.suspensions.Suspended(catalog.SuspendedBillingAccount, k.BillingAccount); ok {
		return errBillingAccountSuspended
	}
	if _, ok := h.suspensions.Suspended(catalog.SuspendedTenant, k.Tenant); ok {
		return errTenantSuspended
	}
	return nil
}

var (
	errBillingAccountSuspended = &sluice.Error{Code: sluice.CodeBillingAccountSuspended,
		Msg: "the billing account of this API key is suspended; contact the operator"}
	errTenantSuspended = &sluice.Error{Code: sluice.CodeTenantSuspended,
		Msg: "the tenant of this API key is suspended; contact the operator"}
	errKeyInactive = &sluice.Error{Code: sluice.CodeCredentialInactive, Msg: "this API key is no longer active"}
	errKeyUnbound  = &sluice.Error{Code: sluice.CodeKeyUnbound, Msg: "this key's route policy names accounts or a pool that no longer exist"}
)

// modelNotFound is the answer for an alias that does not exist or does
// not speak the request's protocol.
func modelNotFound(model string) error {
	return &sluice.Error{Code: sluice.CodeModelNotFound, Msg: "the model " + model + " does not exist or does not support this endpoint"}
}
