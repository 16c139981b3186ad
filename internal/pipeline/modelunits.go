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

// edgeLimits returns the limits a request claiming edge e must fit in:
// limits, e's per-model unit when it has one, and its credential's submit
// rate when it has one. limits is shared between candidates, so it is
// copied rather than appended to. A catalog without either costs two
// lookups in nil maps.
func (s *Snapshot) edgeLimits(e *sluice.Edge, limits []store.Unit) []store.Unit {
	model, hasModel := s.modelUnits[e.ID]
	submit, hasSubmit := s.submitUnits[e.Credential.ID]
	if !hasModel && !hasSubmit {
		return limits
	}
	out := limits[:len(limits):len(limits)]
	if hasModel {
		out = append(out, model)
	}
	if hasSubmit {
		out = append(out, submit)
	}
	return out
}

// submitUnitID names the unit of a credential's submit rate: every
// request sent on the credential claims it, besides its account's unit.
func submitUnitID(credential string) string { return "credential:" + credential + "/submit" }

// compileSubmitRates records the submit rate of every credential that has
// one (credentials[].submit_rpm): a guard against bursts on one upstream
// key, whatever its account allows.
func (s *Snapshot) compileSubmitRates(c *config.Catalog) {
	for _, cr := range c.Credentials {
		if cr.SubmitRPM > 0 {
			if s.submitUnits == nil {
				s.submitUnits = map[string]store.Unit{}
			}
			s.submitUnits[cr.ID] = store.Unit{ID: submitUnitID(cr.ID), RPM: cr.SubmitRPM}
		}
	}
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
