package config

import (
	"fmt"
	"slices"
	"sort"

	"github.com/sluicehq/sluice"
)

// AccountModel is the unit of one deployment model under an account
// (accounts[].models): requests for that model claim a slot in it as well
// as in the account's own unit, so both caps hold. A rate limit the
// upstream scopes to the model cools this unit alone, with the account's
// cooldown durations and its own backoff and probe, while the account's
// other models keep flowing; an account-wide one cools the account. Not
// for quota_scope credential. Zero values are unlimited: an entry of
// zeros still gives the model its own cooldown.
type AccountModel struct {
	MaxInflight int `yaml:"max_inflight"`
	RPM         int `yaml:"rpm"`
	TPM         int `yaml:"tpm"`
}

// accountModels checks accounts[].models: limits not negative, and each
// model deployed on an endpoint of a credential of the account that
// serves it (one without models serves any), so that no entry is one
// nothing could ever claim.
func (v *validator) accountModels() {
	for i := range v.c.Accounts {
		a := &v.c.Accounts[i]
		names := make([]string, 0, len(a.Models))
		for m := range a.Models {
			names = append(names, m)
		}
		sort.Strings(names) // errors in a stable order
		for _, m := range names {
			at := fmt.Sprintf("accounts[%d].models.%s", i, m)
			lim := a.Models[m]
			v.limits(at, lim.MaxInflight, lim.RPM, lim.TPM)
			if a.QuotaScope == string(sluice.QuotaScopeCredential) {
				v.addf(at, "per-model units are an account's quotas; quota_scope credential has none")
			} else if !v.accountServes(a.ID, m) {
				v.addf(at, "no deployment of model %q runs on a credential of account %q", m, a.ID)
			}
		}
	}
}

// accountServes reports whether a deployment of model runs on an endpoint
// of a credential of account id that serves model.
func (v *validator) accountServes(id, model string) bool {
	for _, cr := range v.c.Credentials {
		if cr.Account != id || len(cr.Models) > 0 && !slices.Contains(cr.Models, model) {
			continue
		}
		for _, m := range v.c.Models {
			for _, d := range m.Deployments {
				if d.Model == model && slices.ContainsFunc(d.Endpoints, func(ep string) bool { return slices.Contains(cr.Endpoints, ep) }) {
					return true
				}
			}
		}
	}
	return false
}
