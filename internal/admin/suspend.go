package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
)

// Suspending. A billing account or a tenant is suspended in the catalog
// store, through the Keyring, which every replica's refresh reads each
// second: admission then refuses its keys (403 billing_account_suspended,
// tenant_suspended). An upstream account is suspended through its shared
// status, the one disable sets — suspend is disable with the operator's
// reason recorded, resume is enable — so it takes no new claims on any
// replica and its running work finishes.

// SuspendRequest is the body of every …/suspend route.
type SuspendRequest struct {
	Reason string `json:"reason"` // required: why, for the operators who come next
}

// maxReasonBytes bounds a suspension's reason.
const maxReasonBytes = 500

// Suspension is a billing account's or tenant's suspension as the admin
// API shows it.
type Suspension struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	By     string    `json:"by"` // the admin token's ID
}

// Tenant is a tenant as GET /admin/tenants shows it: how many keys it has
// (stored and the catalog's) and its suspension, if any.
type Tenant struct {
	ID         string      `json:"id"`
	Keys       int         `json:"keys"`
	Suspension *Suspension `json:"suspension,omitempty"`
}

// AccountSuspender is what a Pool implements to suspend an upstream
// account with a reason: the account is disabled, as SetAccount's
// "disable" does, with the reason in its status. Resume is SetAccount's
// "enable". Unknown id → wraps catalog.ErrNotFound.
type AccountSuspender interface {
	SuspendAccount(ctx context.Context, id, reason string) (AccountState, error)
}

// suspensionState is a suspended subject's state in the audit log.
type suspensionState struct {
	Suspended bool `json:"suspended"`
	*Suspension
}

// suspensionOf is the subject's suspension as this replica's view holds it, or nil.
func (s *server) suspensionOf(kind catalog.SuspensionKind, id string) *Suspension {
	sp, ok := s.keys.Suspended(kind, id)
	if !ok {
		return nil
	}
	return &Suspension{Reason: sp.Reason, Since: utc(sp.Since), By: sp.By}
}

// suspendedByPath is the billing account or tenant {id}: whether it is
// suspended, and why.
func suspendedByPath(kind catalog.SuspensionKind) subject {
	return subject{targets: pathID, view: func(s *server, _ context.Context, id string) (any, error) {
		sp := s.suspensionOf(kind, id)
		return suspensionState{Suspended: sp != nil, Suspension: sp}, nil
	}}
}

// registerSuspensions adds the routes that suspend and resume billing
// accounts, tenants and upstream accounts, and list tenants.
func (s *server) registerSuspensions() {
	billingSubject, tenantSubject := suspendedByPath(catalog.SuspendedBillingAccount), suspendedByPath(catalog.SuspendedTenant)
	s.write("POST /admin/billing/accounts/{id}/suspend", "billing.suspend", billingSubject, s.suspendBilling(true))
	s.write("POST /admin/billing/accounts/{id}/resume", "billing.resume", billingSubject, s.suspendBilling(false))
	s.read("GET /admin/tenants", s.listTenants)
	s.read("GET /admin/tenants/{id}", s.showTenant)
	s.write("POST /admin/tenants/{id}/suspend", "tenants.suspend", tenantSubject, s.suspendTenant(true))
	s.write("POST /admin/tenants/{id}/resume", "tenants.resume", tenantSubject, s.suspendTenant(false))
	s.write("POST /admin/accounts/{id}/suspend", "accounts.suspend", accountByPath, s.suspendAccount)
	s.write("POST /admin/accounts/{id}/resume", "accounts.resume", accountByPath, s.setAccount("enable"))
}

// suspendReason reads a suspend's body: its reason is required.
func suspendReason(w http.ResponseWriter, r *http.Request) (string, error) {
	var body SuspendRequest
	if err := decodeJSON(w, r, &body, true); err != nil {
		return "", err
	}
	why := strings.TrimSpace(body.Reason)
	switch {
	case why == "":
		return "", invalid(`a suspension needs a reason: {"reason": "…"}`)
	case len(why) > maxReasonBytes || !utf8.ValidString(why):
		return "", invalid("the reason must be UTF-8 text of at most %d bytes", maxReasonBytes)
	}
	return why, nil
}

// change suspends (with the body's reason, by the request's admin token)
// or resumes the subject.
func (s *server) change(w http.ResponseWriter, r *http.Request, kind catalog.SuspensionKind, id string, suspend bool) error {
	if !suspend {
		_, err := s.keys.Resume(r.Context(), kind, id)
		return err
	}
	why, err := suspendReason(w, r)
	if err != nil {
		return err
	}
	var by string
	if rec := recorderOf(w); rec != nil {
		by = rec.entry.TokenID
	}
	return s.keys.Suspend(r.Context(), catalog.Suspension{Kind: kind, ID: id, Reason: why, Since: s.now().UTC(), By: by})
}

// suspendBilling handles POST /admin/billing/accounts/{id}/suspend and
// resume: the account must exist (in the catalog or the ledger).
func (s *server) suspendBilling(suspend bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		b, err := s.ledger()
		if err != nil {
			return err
		}
		id := r.PathValue("id")
		if _, err := s.findAccount(r.Context(), b, id); err != nil {
			return err
		}
		if err := s.change(w, r, catalog.SuspendedBillingAccount, id, suspend); err != nil {
			return err
		}
		a, err := s.findAccount(r.Context(), b, id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, a)
		return nil
	}
}

// tenants counts the keys of every tenant, and lists the suspended ones
// that have none.
func (s *server) tenants(ctx context.Context) ([]Tenant, error) {
	keys, err := s.keys.List(ctx)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, k := range keys {
		count[k.Tenant]++
	}
	for _, sp := range s.keys.Suspensions(catalog.SuspendedTenant) {
		if _, ok := count[sp.ID]; !ok {
			count[sp.ID] = 0 // suspended before it had a key
		}
	}
	out := make([]Tenant, 0, len(count))
	for id, n := range count {
		out = append(out, Tenant{ID: id, Keys: n, Suspension: s.suspensionOf(catalog.SuspendedTenant, id)})
	}
	slices.SortFunc(out, func(a, b Tenant) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// listTenants handles GET /admin/tenants.
func (s *server) listTenants(w http.ResponseWriter, r *http.Request) error {
	all, err := s.tenants(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, all)
	return nil
}

// tenant is the tenant id; one without keys or a suspension is unknown (404).
func (s *server) tenant(ctx context.Context, id string) (Tenant, error) {
	all, err := s.tenants(ctx)
	if err != nil {
		return Tenant{}, err
	}
	i := slices.IndexFunc(all, func(t Tenant) bool { return t.ID == id })
	if i < 0 {
		return Tenant{}, notFound("tenant", id, nil)
	}
	return all[i], nil
}

// showTenant handles GET /admin/tenants/{id}.
func (s *server) showTenant(w http.ResponseWriter, r *http.Request) error {
	t, err := s.tenant(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// suspendTenant handles POST /admin/tenants/{id}/suspend and resume. A
// tenant is only a name on keys: one may be suspended before it has any,
// so that keys made for it later are refused too.
func (s *server) suspendTenant(suspend bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		if strings.TrimSpace(id) == "" {
			return invalid("a tenant needs an ID")
		}
		if err := s.change(w, r, catalog.SuspendedTenant, id, suspend); err != nil {
			return err
		}
		t, err := s.tenant(r.Context(), id)
		if _, unknown := errors.AsType[*sluice.Error](err); unknown {
			t, err = Tenant{ID: id}, nil // resumed, and without keys
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, t)
		return nil
	}
}

// suspendAccount handles POST /admin/accounts/{id}/suspend.
func (s *server) suspendAccount(w http.ResponseWriter, r *http.Request) error {
	if err := s.needPool(); err != nil {
		return err
	}
	sus, ok := s.pool.(AccountSuspender)
	if !ok {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway cannot suspend upstream accounts")
	}
	why, err := suspendReason(w, r)
	if err != nil {
		return err
	}
	by := "an admin"
	if rec := recorderOf(w); rec != nil {
		by = rec.entry.TokenID
	}
	id := r.PathValue("id")
	a, err := sus.SuspendAccount(r.Context(), id, "suspended by "+by+": "+why)
	return poolAnswer(s, w, r, accountKind, "suspend", id, a, err)
}
