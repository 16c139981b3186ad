package importer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/config"
)

// listOf reads a LiteLLM list answer: a bare array, or an object holding
// the array under field (/key/list answers {"keys": [...], "total_count": …}).
func listOf(doc []byte, field string) ([]any, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	switch v := v.(type) {
	case []any:
		return v, nil
	case map[string]any:
		items, ok := v[field].([]any)
		if !ok {
			return nil, fmt.Errorf("%s: must be a list", field)
		}
		return items, nil
	default:
		return nil, fmt.Errorf("must be a list or an object with %q", field)
	}
}

// limitsOf reads the rpm_limit, tpm_limit and max_parallel_requests that
// keys and teams share; a failed read is left in o.
func (im *litellmImport) limitsOf(o *object, what string) config.Limits {
	l := config.Limits{RPM: o.count("rpm_limit"), TPM: o.count("tpm_limit"), MaxInflight: o.count("max_parallel_requests")}
	if l != (config.Limits{}) {
		im.report.mapped(o.path+".{rpm_limit,tpm_limit,max_parallel_requests}", "%s limits", what)
	}
	return l
}

// budgetNotes reports the spend fields: Sluice budgets are amounts billed
// through its billing section, which an import does not turn on.
func budgetNotes(r *Report, o *object) {
	for _, name := range []string{"max_budget", "soft_budget", "budget_duration", "spend", "model_max_budget"} {
		if o.take(name) != nil {
			r.notMapped(o.at(name), "the imported catalog bills no one; after turning billing on (docs/billing.md), set budgets {day, month} by hand")
		}
	}
}

// teams maps /team/list: each team becomes a tenant with the team's limits.
func (im *litellmImport) teams(doc []byte) error {
	items, err := listOf(doc, "teams")
	if err != nil {
		return err
	}
	im.tenantOf = map[string]string{}
	im.teamModels = map[string][]string{}
	for i, item := range items {
		t, err := asObject(fmt.Sprintf("teams[%d]", i), item)
		if err != nil {
			return err
		}
		id := t.required("team_id")
		alias := t.str("team_alias")
		tenant := config.Tenant{ID: im.newID("tenant", or(alias, id))}
		tenant.Limits = im.limitsOf(t, "tenant "+tenant.ID)
		im.teamModels[id] = t.strings("models")
		if err := t.err(); err != nil {
			return err
		}
		im.tenantOf[id] = tenant.ID
		im.catalog.Tenants = append(im.catalog.Tenants, tenant)
		im.report.mapped(t.at("team_id"), "tenant %s", tenant.ID)
		if len(im.teamModels[id]) > 0 {
			im.report.approx(t.at("models"), "Sluice tenants have no model list: given to each key of the team that has none of its own")
		}
		budgetNotes(&im.report, t)
		if t.take("blocked") == true {
			im.report.notMapped(t.at("blocked"), "the catalog cannot suspend: run `sluice tenants suspend %s` after import", tenant.ID)
		}
		t.rest(&im.report, "no Sluice equivalent", map[string]string{
			"members_with_roles": "Sluice has no users of its console per team: make an admin token or keys per member",
			"metadata":           "Sluice tenants carry no labels: labels are per key",
		})
	}
	return nil
}

// keys maps /key/list: each virtual key becomes a Sluice key with a new
// secret, since LiteLLM keeps only the hash of the old one.
func (im *litellmImport) keys(doc []byte) error {
	items, err := listOf(doc, "keys")
	if err != nil {
		return err
	}
	im.report.KeysNote = "LiteLLM stores only hashes of its keys, so each gets a new Sluice key: generate a secret for it, set it in the variable named, and hand it to the key's holder."
	for i, item := range items {
		k, err := asObject(fmt.Sprintf("keys[%d]", i), item)
		if err != nil {
			return err
		}
		if err := im.key(k); err != nil {
			return err
		}
	}
	return nil
}

func (im *litellmImport) key(k *object) error {
	token := k.str("token")
	alias := k.str("key_alias")
	masked := k.str("key_name")
	if err := k.err(); err != nil {
		return err
	}
	if token == "" && alias == "" {
		return fmt.Errorf("%s: a key needs token or key_alias", k.path)
	}
	if k.take("blocked") == true {
		// A blocked key would be active again in Sluice: leave it out.
		im.report.notMapped(k.path, "blocked in LiteLLM: not imported")
		return nil
	}
	short := token
	if len(short) > 8 {
		short = short[:8]
	}
	key := config.Key{ID: im.newID("key", or(alias, "key-"+short)), Name: alias}
	key.SecretEnv = "SLUICE_KEY_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(key.ID))
	im.report.mapped(k.at("token"), "key %s with a new secret (LiteLLM keeps only the hash)", key.ID)
	team := k.str("team_id")
	if team != "" {
		tenant, ok := im.tenantOf[team]
		if !ok {
			tenant = im.newID("tenant", team)
			im.tenantOf[team] = tenant
			im.report.approx(k.at("team_id"), "team %s is not in the teams export: tenant %s without limits", team, tenant)
		} else {
			im.report.mapped(k.at("team_id"), "tenant %s", tenant)
		}
		key.Tenant = tenant
	}
	models := k.strings("models")
	if len(models) == 0 && team != "" {
		models = im.teamModels[team]
	}
	every := false
	for _, m := range models {
		switch _, ok := im.models[m]; {
		case ok:
			key.Models = append(key.Models, m)
		case m == "all-proxy-models" || m == "all-team-models":
			every = true
			im.report.mapped(k.at("models"), "%s: the key may call every alias", m)
		default:
			im.report.notMapped(k.at("models"), "%q is not an imported alias: left out of the key's models", m)
		}
	}
	if every {
		key.Models = nil
	} else if len(key.Models) > 0 {
		im.report.mapped(k.at("models"), "key models %s", strings.Join(key.Models, ", "))
	}
	key.Limits = im.limitsOf(k, "key "+key.ID)
	expires := k.str("expires")
	if err := k.err(); err != nil {
		return err
	}
	if expires != "" {
		at, err := time.Parse(time.RFC3339Nano, expires)
		if err != nil {
			return fmt.Errorf("%s: %q is not an RFC 3339 time", k.at("expires"), expires)
		}
		key.ExpiresAt = at.UTC().Format(time.RFC3339)
		im.report.mapped(k.at("expires"), "expires_at %s", key.ExpiresAt)
	}
	meta := k.object("metadata")
	for _, name := range sortedKeys(meta.fields) {
		value, isText := meta.fields[name].(string)
		switch {
		case !isText:
			meta.take(name)
			im.report.notMapped(meta.at(name), "labels are text: only string metadata becomes a label")
		case config.CheckID(name) != "" || name == "":
			meta.take(name)
			im.report.notMapped(meta.at(name), "a label name may contain only letters, digits, '.', '_' and '-'")
		case len(value) > config.MaxLabelValue:
			meta.take(name)
			im.report.notMapped(meta.at(name), "longer than a label value may be (%d bytes)", config.MaxLabelValue)
		default:
			meta.take(name)
			if key.Labels == nil {
				key.Labels = map[string]string{}
			}
			key.Labels[name] = value
			im.report.mapped(meta.at(name), "label %s", name)
		}
	}
	budgetNotes(&im.report, k)
	k.rest(&im.report, "no Sluice equivalent", map[string]string{
		"blocked": "suspend the key after import (sluice suspend)",
		"user_id": "Sluice keys belong to a tenant; the end user is named per request (user, X-Sluice-User)",
		"aliases": "per-key model aliases are not imported",
	})
	if err := k.err(); err != nil {
		return err
	}
	old := fmt.Sprintf("`%s`", or(alias, token))
	if masked != "" {
		old += fmt.Sprintf(" (%s)", masked)
	}
	im.report.Keys = append(im.report.Keys, KeyMapping{Old: old, NewID: key.ID, SecretIn: key.SecretEnv})
	im.addSecret(key.SecretEnv, "key "+key.ID, "new: generate a secret (the old key cannot be carried over)")
	im.catalog.Keys = append(im.catalog.Keys, key)
	return nil
}
