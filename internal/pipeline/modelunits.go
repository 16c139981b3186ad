package pipeline

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

// modelUnitID names the unit of model under account (accounts[].models):
// the account's requests for that model claim a slot in it besides the
// account's own unit, and a rate limit the upstream scopes to the model
// cools it alone (store.Outcome.Cool). A stable ID, so a reload keeps its
// state.
func modelUnitID(account, model string) string { return "account:" + account + "/model:" + model }

// addModelUnit records the per-model unit edge e claims, when e's account
// declares one for e's model, with the account's cooldown durations.
func (s *Snapshot) addModelUnit(e *sluice.Edge) {
	for i := range s.Catalog.Accounts {
		a := &s.Catalog.Accounts[i]
		if a.ID != e.Account.ID {
			continue
		}
		q, ok := a.Models[e.Model]
		if !ok {
			return
		}
		if s.modelUnits == nil {
			s.modelUnits = map[string]store.Unit{}
		}
		s.modelUnits[e.ID] = store.Unit{ID: modelUnitID(a.ID, e.Model), Cap: q.MaxInflight, RPM: q.RPM, TPM: q.TPM,
			Base: e.Account.Cooldown.Base, Max: e.Account.Cooldown.Max}
		return
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

// rateScope is the unit a rate limit of attempt a cools: its model's unit
// under its account when the upstream scoped the limit to the model ("" =
// the claim's own unit; so is the ID of a model unit the account does not
// declare, see store.Outcome.Cool).
func rateScope(a *sluice.Execution, modelScoped bool) string {
	if !modelScoped {
		return ""
	}
	return modelUnitID(a.AccountID, a.Model)
}
