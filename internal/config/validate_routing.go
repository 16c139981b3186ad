package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// The closed sets of names the catalog accepts.
var (
	strategies = []string{"round-robin", "fill-first", "weighted", "least-inflight", "affinity"}
	modes      = []string{string(sluice.PolicyDefault), string(sluice.PolicyStrict), string(sluice.PolicyPreferred), string(sluice.PolicyPool)}
)

// oneOf checks that name is in set, and reports whether it is (the fields
// that go with it can be checked).
func (v *validator) oneOf(path string, set []string, name string) bool {
	if !slices.Contains(set, name) {
		v.addf(path, "must be one of %v, got %q", set, name)
		return false
	}
	return true
}

func (v *validator) models() {
	v.aliases = make(map[string]bool)
	for alias := range v.unique("models", "alias", len(v.c.Models), func(i int) string { return v.c.Models[i].Alias }) {
		v.aliases[alias] = true
	}
	for i := range v.c.Models {
		m := &v.c.Models[i]
		at := fmt.Sprintf("models[%d]", i)
		callers := sluice.Generation
		if m.Protocol != "" {
			callers = []sluice.Protocol{sluice.Protocol(m.Protocol)}
			if !callers[0].Known() {
				v.addf(at+".protocol", "unknown protocol %q", m.Protocol)
				callers = nil
			}
		}
		v.limitSet(at+".limits", m.Limits)
		v.oneOf(at+".strategy", strategies, m.Strategy)
		v.affinity(at+".affinity", m.Strategy, &m.Affinity)
		switch {
		case m.MaxOutputTokens < 0:
			v.addf(at+".max_output_tokens", "must be >= 0")
		case m.MaxOutputTokens > 0 && len(callers) == 1 && sluice.MaxTokensField[callers[0]] == "":
			v.addf(at+".max_output_tokens", "%s requests ask for no output tokens", callers[0])
		}
		v.perToken(at+".token_estimate.chars_per_token", m.TokenEstimate.CharsPerToken)
		v.perToken(at+".token_estimate.cjk_chars_per_token", m.TokenEstimate.CJKCharsPerToken)
		if len(m.Deployments) == 0 {
			v.addf(at+".deployments", "must list at least one deployment")
		}
		for j := range m.Deployments {
			v.deployment(fmt.Sprintf("%s.deployments[%d]", at, j), &m.Deployments[j], callers)
		}
	}
}

// deployment checks one deployment of an alias answering callers of the
// protocols callers (none when the alias's protocol is unknown): each of
// its endpoints must serve at least one of them.
func (v *validator) deployment(at string, d *Deployment, callers []sluice.Protocol) {
	if d.Model == "" {
		v.addf(at+".model", "required")
	}
	v.endpointRefs(at+".endpoints", d.Endpoints)
	for k, id := range d.Endpoints {
		e := v.endpointByID[id]
		if e == nil {
			continue // reported by endpointRefs
		}
		path := fmt.Sprintf("%s.endpoints[%d]", at, k)
		serves := func(q string) bool {
			return slices.ContainsFunc(callers, func(p sluice.Protocol) bool { return v.serves(p, sluice.Protocol(q)) })
		}
		switch {
		case len(callers) == 1 && !slices.ContainsFunc(e.Protocols, serves):
			v.addf(path, "endpoint %q does not speak %s", id, callers[0])
		case len(callers) > 1 && !slices.ContainsFunc(e.Protocols, serves):
			v.addf(path, "endpoint %q speaks none of %v, and the alias names no protocol (set models[].protocol for an embeddings or job alias)", id, callers)
		}
		if d.Model != "" && len(e.Models) > 0 && !slices.Contains(e.Models, d.Model) {
			v.addf(path, "endpoint %q does not list model %q in its models", id, d.Model)
		}
	}
	if d.Weight <= 0 {
		v.addf(at+".weight", "must be > 0")
	}
	if d.Priority < 0 {
		v.addf(at+".priority", "must be >= 0")
	}
	v.input(at+".input", d.Input, callers)
}

// input checks a deployment's input: absent, or kinds of InputKinds that
// include text (every request carries text, so a model without it could
// be sent nothing), for an alias of generation callers (the protocols
// whose requests are searched for images).
func (v *validator) input(at string, kinds []string, callers []sluice.Protocol) {
	if kinds == nil {
		return
	}
	if len(callers) == 1 && !slices.Contains(sluice.Generation, callers[0]) {
		v.addf(at, "%s requests are not checked for images; input is for generation aliases", callers[0])
		return
	}
	for k, kind := range kinds {
		switch _, ok := InputKinds[kind]; {
		case kind == "audio" || kind == "file" || kind == "video":
			v.addf(fmt.Sprintf("%s[%d]", at, k), "%q is not supported yet: requests are not checked for it; list text and image only", kind)
		case !ok:
			v.addf(fmt.Sprintf("%s[%d]", at, k), "must be text or image, got %q", kind)
		case slices.Index(kinds, kind) < k:
			v.addf(fmt.Sprintf("%s[%d]", at, k), "%q is listed twice", kind)
		}
	}
	if !slices.Contains(kinds, "text") {
		v.addf(at, "must include text")
	}
}

func (v *validator) pools() {
	v.poolIDs = make(map[string]bool)
	for id := range v.unique("pools", "id", len(v.c.Pools), func(i int) string { return v.c.Pools[i].ID }) {
		v.poolIDs[id] = true
	}
	for i := range v.c.Pools {
		p := &v.c.Pools[i]
		at := fmt.Sprintf("pools[%d]", i)
		v.accountRefs(at+".accounts", p.Accounts)
		v.limits(at, p.MaxInflight, p.RPM, p.TPM)
		v.oneOf(at+".strategy", strategies, p.Strategy)
		v.affinity(at+".affinity", p.Strategy, &p.Affinity)
	}
}

// accountRefs checks a non-empty list of account IDs, declared or implied by
// a credential without an account.
func (v *validator) accountRefs(path string, ids []string) {
	if len(ids) == 0 {
		v.addf(path, "must list at least one account")
	}
	for j, id := range ids {
		if !v.accountIDs[id] {
			v.addf(fmt.Sprintf("%s[%d]", path, j), "unknown account %q", id)
		}
	}
}

func (v *validator) keys() {
	v.unique("keys", "id", len(v.c.Keys), func(i int) string { return v.c.Keys[i].ID })
	bySecret := make(map[string]int) // secret → first key; the values never leave this function
	for i := range v.c.Keys {
		k := &v.c.Keys[i]
		at := fmt.Sprintf("keys[%d]", i)
		if s, err := readSecret(k.SecretEnv, k.SecretFile, v.lookupEnv); err != nil {
			v.secret(at, err)
		} else if j, dup := bySecret[s]; dup {
			v.addf(at, "has the same secret as keys[%d]", j)
		} else {
			bySecret[s] = i
		}
		v.key(at, k)
	}
}

// ValidateKey checks a key made through the admin API, after
// ApplyKeyDefaults, against the serving catalog c, by the rules and with
// the messages of the catalog's keys; paths start at the key's fields
// (`policy.pool: unknown pool "x"`). Its ID and secret are the API's.
func ValidateKey(c *Catalog, k *Key) error {
	v := &validator{c: c, lookupEnv: func(string) (string, bool) { return "", false }}
	v.index()
	v.key("", k)
	return errors.Join(v.errs...)
}

// index records the IDs keys refer to, without checking the records.
func (v *validator) index() {
	v.aliases, v.poolIDs, v.accountIDs, v.declared = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	v.tasks = map[string]int{}
	for _, m := range v.c.Models {
		v.aliases[m.Alias] = true
	}
	for _, p := range v.c.Pools {
		v.poolIDs[p.ID] = true
	}
	for _, a := range v.c.Accounts {
		v.accountIDs[a.ID], v.declared[a.ID] = true, true
	}
	for _, cr := range v.c.Credentials {
		if cr.Account == "" {
			v.accountIDs[cr.ID] = true
		}
	}
	for i, tt := range v.c.TaskTypes {
		v.tasks[tt.ID] = i
	}
}

// key checks what a key carries besides its ID and secret; at is the
// key's path ("keys[3]", or "" for a key of the admin API).
func (v *validator) key(at string, k *Key) {
	for j, alias := range k.Models {
		if !v.aliases[alias] {
			v.addf(fmt.Sprintf("%s[%d]", field(at, "models"), j), "unknown model alias %q", alias)
		}
	}
	if !slices.Contains(sluice.Priorities, k.Priority) {
		v.addf(field(at, "priority"), "must be one of %v, got %q", sluice.Priorities, k.Priority)
	}
	v.policy(field(at, "policy"), &k.Policy)
	v.limitSet(field(at, "limits"), k.Limits)
	v.limitSet(field(at, "user_limits"), k.UserLimits)
	if _, ok := v.tasks[k.Task]; k.Task != "" && !ok {
		v.addf(field(at, "task"), "unknown task type %q", k.Task)
	}
	for j, task := range k.Tasks {
		if _, ok := v.tasks[task]; !ok {
			v.addf(fmt.Sprintf("%s[%d]", field(at, "tasks"), j), "unknown task type %q", task)
		}
	}
	if k.ExpiresAt != "" {
		if _, err := time.Parse(time.RFC3339, k.ExpiresAt); err != nil {
			v.addf(field(at, "expires_at"), "want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", k.ExpiresAt)
		}
	}
	if k.Tenant != "" {
		if msg := CheckID(k.Tenant); msg != "" {
			v.addf(field(at, "tenant"), "%s", msg)
		}
	}
	if msg := CheckText(k.Name, MaxName); msg != "" {
		v.addf(field(at, "name"), "%s", msg)
	}
	if len(k.Labels) > MaxLabels {
		v.addf(field(at, "labels"), "at most %d labels, got %d", MaxLabels, len(k.Labels))
	}
	for _, name := range slices.Sorted(maps.Keys(k.Labels)) {
		if msg := checkLabel(name, k.Labels[name]); msg != "" {
			v.addf(field(at, "labels."+name), "%s", msg)
		}
	}
	v.keyPaths(field(at, "paths"), k.Paths)
	for j, tier := range k.ServiceTiers {
		if tier == "" {
			v.addf(fmt.Sprintf("%s[%d]", field(at, "service_tiers"), j), "must not be empty")
		}
	}
	if k.OnLimit != sluice.OnLimitWait && k.OnLimit != sluice.OnLimitRefuse {
		v.addf(field(at, "on_limit"), "must be %s or %s, got %q", sluice.OnLimitWait, sluice.OnLimitRefuse, k.OnLimit)
	}
	v.keyBilling(at, k)
	v.assertions(at, k.Assert)
}

// keyPaths checks a list of key path names (keys[].paths,
// server.default_key_paths) at path at.
func (v *validator) keyPaths(at string, names []string) {
	known := sluice.KeyPathNames()
	for j, p := range names {
		if !slices.Contains(known, p) {
			v.addf(fmt.Sprintf("%s[%d]", at, j), "must be one of %v, got %q", known, p)
		}
	}
}

// field is the path of a field of the record at path at ("" for the top).
func field(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// policy checks a route policy: each mode uses its own fields and no others,
// so a field the mode would ignore is reported rather than silently dropped.
func (v *validator) policy(at string, p *Policy) {
	if !v.oneOf(at+".mode", modes, string(p.Mode)) {
		return
	}
	usesAccounts := p.Mode == sluice.PolicyStrict || p.Mode == sluice.PolicyPreferred
	switch {
	case usesAccounts:
		v.accountRefs(at+".accounts", p.Accounts)
	case len(p.Accounts) > 0:
		v.addf(at+".accounts", "only used with mode strict or preferred")
	}
	switch {
	case p.Mode == sluice.PolicyPool && p.Pool == "":
		v.addf(at+".pool", "required with mode pool")
	case p.Mode == sluice.PolicyPool && !v.poolIDs[p.Pool]:
		v.addf(at+".pool", "unknown pool %q", p.Pool)
	case p.Mode != sluice.PolicyPool && p.Pool != "":
		v.addf(at+".pool", "only used with mode pool")
	}
	switch {
	case p.Mode == sluice.PolicyPreferred && p.Fallback == "":
		v.addf(at+".fallback", "required with mode preferred: a pool ID, or %q for every account", FallbackAny)
	case p.Fallback == "":
	case p.Mode != sluice.PolicyPreferred:
		v.addf(at+".fallback", "only used with mode preferred")
	case p.Fallback != FallbackAny && !v.poolIDs[p.Fallback]:
		v.addf(at+".fallback", "unknown pool %q", p.Fallback)
	}
	switch {
	case p.Wait < 0:
		v.addf(at+".wait", "must be >= 0")
	case p.Wait > 0 && p.Mode != sluice.PolicyPreferred:
		v.addf(at+".wait", "only used with mode preferred")
	}
}

// FallbackAny is the fallback of a preferred policy that may use every
// account of the alias.
const FallbackAny = "any"

// perToken checks a token estimate's characters per token: 0 (the
// default), or from 0.1 to 20 (no tokenizer is outside that; a typo such as
// 400 would make every reservation a rounding error).
func (v *validator) perToken(at string, chars float64) {
	if chars != 0 && !(chars >= 0.1 && chars <= 20) {
		v.addf(at, "must be from 0.1 to 20 characters per token (absent: the default)")
	}
}
