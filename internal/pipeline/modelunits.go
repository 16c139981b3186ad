package pipeline

import (
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

// modelUnitID names the unit of model under account (accounts[].models):
// the account's requests for that model claim a slot in it besides the
// account's own unit, and a rate limit the upstream scopes to the model
// cools it alone (store.Outcome.Cool). A stable ID, so a reload keeps its
// state.
func modelUnitID(account, model string) string { return "account:" + account + "/model:" + model }

// modelUnit is the unit of model under account a, as declared, with the
// account's cooldown durations.
func modelUnit(a *config.Account, model string, q config.AccountModel) store.Unit {
	return store.Unit{ID: modelUnitID(a.ID, model), Cap: q.MaxInflight, RPM: q.RPM, TPM: q.TPM,
		Base: a.Cooldown.Base.D(), Max: a.Cooldown.Max.D()}
}

// catalogAccount returns the declared account id, nil for an account that
// is a credential of its own.
func (s *Snapshot) catalogAccount(id string) *config.Account {
	for i := range s.Catalog.Accounts {
		if s.Catalog.Accounts[i].ID == id {
			return &s.Catalog.Accounts[i]
		}
	}
	return nil
}

// addModelUnit records the per-model unit edge e claims, when e's account
// declares one for e's model.
func (s *Snapshot) addModelUnit(e *sluice.Edge) {
	a := s.catalogAccount(e.Account.ID)
	if a == nil {
		return
	}
	if q, ok := a.Models[e.Model]; ok {
		if s.modelUnits == nil {
			s.modelUnits = map[string]store.Unit{}
		}
		s.modelUnits[e.ID] = modelUnit(a, e.Model, q)
	}
}

// withModelUnit returns the limits a request claiming edge e must fit in:
// limits, and e's per-model unit when it has one. limits is shared
// between candidates, so it is copied rather than appended to.
func (s *Snapshot) withModelUnit(e *sluice.Edge, limits []store.Unit) []store.Unit {
	u, ok := s.modelUnits[e.ID]
	if !ok {
		return limits
	}
	return append(limits[:len(limits):len(limits)], u)
}

// rateScope is the unit a rate limit of execution x cools: its model's
// unit under its account when the upstream scoped the limit to the model
// ("" = the claim's own unit; so is the ID of a model unit the account
// does not declare, see store.Outcome.Cool).
func rateScope(x *sluice.Execution, modelScoped bool) string {
	if !modelScoped {
		return ""
	}
	return modelUnitID(x.AccountID, x.Model)
}

// ModelUnit is a per-model unit under an account, for the operator's view.
type ModelUnit struct {
	Model string
	Unit  store.Unit
}

// ModelUnits returns the per-model units of account id, by model name.
func (s *Snapshot) ModelUnits(id string) []ModelUnit {
	a := s.catalogAccount(id)
	if a == nil || len(a.Models) == 0 {
		return nil
	}
	out := make([]ModelUnit, 0, len(a.Models))
	for m, q := range a.Models {
		out = append(out, ModelUnit{Model: m, Unit: modelUnit(a, m, q)})
	}
	slices.SortFunc(out, func(x, y ModelUnit) int { return strings.Compare(x.Model, y.Model) })
	return out
}
