package app

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/store"
)

// pool shows and maintains the upstream accounts and credentials of the
// serving catalog: their claims and cooldowns come from the shared store,
// their statuses from the shared status view.
type pool struct {
	live      *pipeline.Live
	inspector store.Inspector
	statuses  *capacity.Statuses
}

var _ admin.Pool = (*pool)(nil)

// units returns every unit of the catalog's accounts, grouped by account.
func (p *pool) units(snap *pipeline.Snapshot) (byAccount map[string][]string, creds map[string][]*sluice.Credential) {
	byAccount, creds = map[string][]string{}, map[string][]*sluice.Credential{}
	for _, cr := range snap.Credentials {
		creds[cr.AccountID] = append(creds[cr.AccountID], cr)
		u := snap.CredentialCandidate(cr).Unit.ID
		if !slices.Contains(byAccount[cr.AccountID], u) {
			byAccount[cr.AccountID] = append(byAccount[cr.AccountID], u)
		}
	}
	return byAccount, creds
}

// unitStates reads the state of the units ids, each in its capacity
// domain (one read per domain), by unit ID.
func (p *pool) unitStates(ctx context.Context, snap *pipeline.Snapshot, ids []string) (map[string]store.UnitState, error) {
	byDomain := map[string][]string{}
	for _, id := range ids {
		d := snap.UnitDomain(id)
		byDomain[d] = append(byDomain[d], id)
	}
	out := make(map[string]store.UnitState, len(ids))
	for d, ids := range byDomain {
		states, err := p.inspector.Units(ctx, d, ids)
		if err != nil {
			return nil, err
		}
		for _, u := range states {
			out[u.ID] = u
		}
	}
	return out, nil
}

// credentialInFlight counts the live leases of the credentials ids, each in
// the capacity domain of its unit.
func (p *pool) credentialInFlight(ctx context.Context, snap *pipeline.Snapshot, ids []string) (map[string]int, error) {
	byDomain := map[string][]string{}
	for _, id := range ids {
		if cr := snap.Credentials[id]; cr != nil {
			d := snap.UnitDomain(snap.CredentialCandidate(cr).Unit.ID)
			byDomain[d] = append(byDomain[d], id)
		}
	}
	out := make(map[string]int, len(ids))
	for d, ids := range byDomain {
		n, err := p.inspector.CredentialInFlight(ctx, d, ids)
		if err != nil {
			return nil, err
		}
		for id, c := range n {
			out[id] = c
		}
	}
	return out, nil
}

// Accounts reports every account with its claims, queue, cooldown and status.
func (p *pool) Accounts(ctx context.Context) ([]admin.AccountState, error) {
	snap := p.live.Load()
	byAccount, creds := p.units(snap)
	var ids []string
	for _, us := range byAccount {
		ids = append(ids, us...)
	}
	for _, a := range snap.Accounts {
		for _, m := range snap.ModelUnits(a.ID) {
			ids = append(ids, m.Unit.ID)
		}
	}
	byUnit, err := p.unitStates(ctx, snap, ids)
	if err != nil {
		return nil, err
	}
	out := make([]admin.AccountState, 0, len(snap.Accounts))
	for _, a := range snap.Accounts {
		st := p.statuses.Account(a.ID)
		as := admin.AccountState{ID: a.ID, QuotaScope: string(a.QuotaScope), Cap: a.MaxInflight,
			Status: st.State, Reason: st.Reason, Since: st.Since}
		for _, cr := range creds[a.ID] {
			as.Credentials = append(as.Credentials, cr.ID)
		}
		slices.Sort(as.Credentials)
		for _, uid := range byAccount[a.ID] {
			u := byUnit[uid]
			as.InFlight += u.InFlight
			as.Waiting = max(as.Waiting, u.Waiting)
			mergeQueue(&as, u)
			if a.QuotaScope == sluice.QuotaScopeAccount {
				as.CoolingUntil, as.Level, as.Probe, as.CooledSeconds = u.CoolingUntil, u.Level, u.Probe, u.Cooled.Seconds()
			}
		}
		for _, m := range snap.ModelUnits(a.ID) {
			u := byUnit[m.Unit.ID]
			as.Models = append(as.Models, admin.ModelUnitState{Model: m.Model, Cap: m.Unit.Cap, InFlight: u.InFlight,
				CoolingUntil: u.CoolingUntil, Level: u.Level, Probe: u.Probe, CooledSeconds: u.Cooled.Seconds()})
		}
		out = append(out, as)
	}
	slices.SortFunc(out, func(x, y admin.AccountState) int { return cmp.Compare(x.ID, y.ID) })
	return out, nil
}

// mergeQueue adds a unit's queue to its account's view. A waiting request
// lists every unit it could use, so an account of several units (quota_scope
// credential) takes the largest count and the oldest arrival, never a sum.
func mergeQueue(as *admin.AccountState, u store.UnitState) {
	for c, n := range u.WaitingByClass {
		if n == 0 {
			continue
		}
		class := sluice.Priorities[c]
		if as.WaitingByClass == nil {
			as.WaitingByClass, as.OldestWaitByClass = map[string]int{}, map[string]time.Time{}
		}
		as.WaitingByClass[class] = max(as.WaitingByClass[class], n)
		if old, ok := as.OldestWaitByClass[class]; !u.OldestByClass[c].IsZero() && (!ok || u.OldestByClass[c].Before(old)) {
			as.OldestWaitByClass[class] = u.OldestByClass[c]
		}
	}
	for tenant, n := range u.WaitingByTenant {
		if as.WaitingByTenant == nil {
			as.WaitingByTenant = map[string]int{}
		}
		as.WaitingByTenant[tenant] = max(as.WaitingByTenant[tenant], n)
	}
}

// Credentials reports every credential with its status, claims and cooldown.
func (p *pool) Credentials(ctx context.Context) ([]admin.CredentialState, error) {
	snap := p.live.Load()
	ids := make([]string, 0, len(snap.Credentials))
	var units []string
	for _, cr := range snap.Credentials {
		ids = append(ids, cr.ID)
		units = append(units, snap.CredentialCandidate(cr).Unit.ID)
	}
	inflight, err := p.credentialInFlight(ctx, snap, ids)
	if err != nil {
		return nil, err
	}
	cooling, err := p.unitStates(ctx, snap, units)
	if err != nil {
		return nil, err
	}
	out := make([]admin.CredentialState, 0, len(ids))
	for _, cr := range snap.Credentials {
		st := p.statuses.Credential(cr.ID)
		cs := admin.CredentialState{ID: cr.ID, Account: cr.AccountID, Status: st.State, Reason: st.Reason, Since: st.Since,
			InFlight: inflight[cr.ID], Endpoints: cr.Endpoints}
		if c := snap.CredentialCandidate(cr); c.Unit.ID == "credential:"+cr.ID {
			cs.CoolingUntil, cs.CooledSeconds = cooling[c.Unit.ID].CoolingUntil, cooling[c.Unit.ID].Cooled.Seconds()
		}
		if !cr.Owner.Platform() {
			cs.Owner = &admin.CredentialOwner{Tenant: cr.Owner.Tenant, User: cr.Owner.User}
		}
		out = append(out, cs)
	}
	slices.SortFunc(out, func(x, y admin.CredentialState) int { return cmp.Compare(x.ID, y.ID) })
	return out, nil
}

// credentialStates maps an operator action to the status it sets.
var credentialStates = map[string]sluice.UpstreamStatus{
	"disable": sluice.UpstreamDisabled, "drain": sluice.UpstreamDraining, "enable": sluice.UpstreamActive, "remove": sluice.UpstreamRemoved,
}

// SetCredential disables, drains, enables or removes a credential. Removal
// would strand running work, so it is refused while the credential holds
// claims, unless it is draining and the operator forces it.
func (p *pool) SetCredential(ctx context.Context, id, action string, force bool) (admin.CredentialState, error) {
	snap := p.live.Load()
	cr, ok := snap.Credentials[id]
	state, known := credentialStates[action]
	if !ok || !known {
		return admin.CredentialState{}, fmt.Errorf("credential %s: %w", id, catalog.ErrNotFound)
	}
	if action == "remove" {
		inflight, err := p.credentialInFlight(ctx, snap, []string{id})
		if err != nil {
			return admin.CredentialState{}, err
		}
		if n := inflight[id]; n > 0 && !(force && p.statuses.Credential(id).State == sluice.UpstreamDraining) {
			return admin.CredentialState{}, fmt.Errorf("credential %s holds %d claims (drain it, then force): %w", id, n, admin.ErrClaimsHeld)
		}
	}
	if err := p.statuses.Set(ctx, capacity.KindCredential, cr.ID, store.Status{State: state, Reason: "operator: " + action}); err != nil {
		return admin.CredentialState{}, err
	}
	return p.credential(ctx, id)
}

func (p *pool) credential(ctx context.Context, id string) (admin.CredentialState, error) {
	all, err := p.Credentials(ctx)
	if err != nil {
		return admin.CredentialState{}, err
	}
	i := slices.IndexFunc(all, func(c admin.CredentialState) bool { return c.ID == id })
	if i < 0 {
		return admin.CredentialState{}, fmt.Errorf("credential %s: %w", id, catalog.ErrNotFound)
	}
	return all[i], nil
}

// SetAccount disables or re-enables an account (for example after a
// billing failure was settled).
func (p *pool) SetAccount(ctx context.Context, id, action string) (admin.AccountState, error) {
	snap := p.live.Load()
	state := map[string]sluice.UpstreamStatus{"disable": sluice.UpstreamDisabled, "enable": sluice.UpstreamActive}[action]
	if _, ok := snap.Accounts[id]; !ok || state == "" {
		return admin.AccountState{}, fmt.Errorf("account %s: %w", id, catalog.ErrNotFound)
	}
	if err := p.statuses.Set(ctx, capacity.KindAccount, id, store.Status{State: state, Reason: "operator: " + action}); err != nil {
		return admin.AccountState{}, err
	}
	all, err := p.Accounts(ctx)
	if err != nil {
		return admin.AccountState{}, err
	}
	return all[slices.IndexFunc(all, func(a admin.AccountState) bool { return a.ID == id })], nil
}
