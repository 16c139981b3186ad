package importer

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/config"
)

// provider is what a LiteLLM model prefix ("openai/", "azure/", …) means
// for Sluice: the protocols its endpoint speaks and its default base URL.
type provider struct {
	name      string
	protocols []string
	embed     string // the protocol of an embedding alias on it
	baseURL   string // "" = api_base is required
}

var providers = map[string]provider{
	"openai":        {"openai", []string{"openai.chat", "openai.responses", "openai.embeddings"}, "openai.embeddings", "https://api.openai.com"},
	"azure":         {"azure", []string{"openai.chat", "openai.embeddings"}, "openai.embeddings", ""},
	"anthropic":     {"anthropic", []string{"anthropic.messages"}, "", "https://api.anthropic.com"},
	"gemini":        {"gemini", []string{"gemini.generate", "gemini.embed"}, "gemini.embed", "https://generativelanguage.googleapis.com"},
	"hosted_vllm":   {"openai", []string{"openai.chat", "openai.embeddings"}, "openai.embeddings", ""},
	"custom_openai": {"openai", []string{"openai.chat", "openai.embeddings"}, "openai.embeddings", ""},
}

// litellmStrategies maps router_settings.routing_strategy; approx is set
// where Sluice's strategy only resembles LiteLLM's.
var litellmStrategies = map[string]struct{ strategy, approx string }{
	"least-busy":             {"least-inflight", ""},
	"usage-based-routing":    {"least-inflight", "LiteLLM picks the deployment with the least use this minute; Sluice the one with the fewest calls in flight, and holds each rpm/tpm cap either way"},
	"usage-based-routing-v2": {"least-inflight", "LiteLLM picks the deployment with the least use this minute; Sluice the one with the fewest calls in flight, and holds each rpm/tpm cap either way"},
	"latency-based-routing":  {"least-inflight", "Sluice does not rank by measured latency; the fewest calls in flight favours the faster deployment under load"},
	"cost-based-routing":     {"fill-first", "Sluice does not rank by price; fill-first keeps to the first deployment listed (put the cheapest first) until it is full"},
}

// deploymentKey identifies one imported edge set: LiteLLM deployments with
// the same alias, upstream model, endpoint and tier become one Sluice
// deployment whose credentials share the load.
type deploymentKey struct {
	alias, model, endpoint string
	priority               int
}

type litellmImport struct {
	builder
	creds       map[string]int // credential identity → index in catalog.Credentials
	accounts    map[string]int // account identity → index in catalog.Accounts
	accountByID map[string]int
	accountHow  map[string]string
	deploys     map[deploymentKey]int // → index in the alias's deployments
	models      map[string]int        // alias → index in catalog.Models
	weighted    map[string]bool       // aliases with a weight in the source
	rpmOf       map[deploymentKey]int // rpm of each deployment: simple-shuffle's weight without one
	literals    map[string]string     // literal api_key value → env name chosen for it (kept in memory only)
	tenantOf    map[string]string     // LiteLLM team_id → tenant ID
	teamModels  map[string][]string   // LiteLLM team_id → its models
}

// LiteLLM imports a LiteLLM proxy's config.yaml and, optionally, the
// answers of its /key/list and /team/list admin routes (nil when not
// given). Errors name the field (and the caller names the file).
func LiteLLM(configYAML, keysJSON, teamsJSON []byte) (*Result, error) {
	res, err := importLiteLLM(configYAML, keysJSON, teamsJSON)
	var ie *InputError
	if err != nil && !errors.As(err, &ie) {
		err = &InputError{Input: ConfigInput, Err: err}
	}
	return res, err
}

func importLiteLLM(configYAML, keysJSON, teamsJSON []byte) (*Result, error) {
	var doc any
	if err := yaml.Unmarshal(configYAML, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	root, err := asObject("", doc)
	if err != nil {
		return nil, fmt.Errorf("the document must be a mapping")
	}
	im := &litellmImport{
		builder:     newBuilder("litellm"),
		creds:       map[string]int{},
		accounts:    map[string]int{},
		accountByID: map[string]int{},
		accountHow:  map[string]string{},
		deploys:     map[deploymentKey]int{},
		models:      map[string]int{},
		weighted:    map[string]bool{},
		rpmOf:       map[deploymentKey]int{},
		literals:    map[string]string{},
	}
	if err := im.modelList(root); err != nil {
		return nil, err
	}
	if err := im.routerSettings(root); err != nil {
		return nil, err
	}
	if err := im.otherSettings(root); err != nil {
		return nil, err
	}
	root.rest(&im.report, "no Sluice equivalent", map[string]string{
		"environment_variables": "values are not carried: set the variables the report lists in Sluice's environment",
	})
	im.finishAccounts()
	if teamsJSON != nil {
		if err := im.teams(teamsJSON); err != nil {
			return nil, &InputError{Input: TeamsInput, Err: err}
		}
	}
	if im.tenantOf == nil {
		im.tenantOf, im.teamModels = map[string]string{}, map[string][]string{}
	}
	if keysJSON != nil {
		if err := im.keys(keysJSON); err != nil {
			return nil, &InputError{Input: KeysInput, Err: err}
		}
	}
	out, err := marshalCatalog(&im.catalog, "# Imported from a LiteLLM proxy by `sluice import litellm`; see the import report.\n")
	if err != nil {
		return nil, err
	}
	return &Result{Catalog: out, Report: im.report}, nil
}

func (im *litellmImport) modelList(root *object) error {
	list := root.list("model_list")
	if err := root.err(); err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("model_list: must list at least one model")
	}
	for i, item := range list {
		entry, err := asObject(fmt.Sprintf("model_list[%d]", i), item)
		if err != nil {
			return err
		}
		if err := im.deployment(entry); err != nil {
			return err
		}
	}
	return nil
}

// shuffleWeights gives each alias what simple-shuffle, LiteLLM's default,
// weighs its deployments by: weight where any is given, else rpm where
// every deployment has one (tpm's further fallback is not followed).
func (im *litellmImport) shuffleWeights(field string) {
	for i := range im.catalog.Models {
		m := &im.catalog.Models[i]
		if im.weighted[m.Alias] {
			m.Strategy = "weighted"
			continue
		}
		rpms := make([]int, len(m.Deployments))
		for j, d := range m.Deployments {
			rpms[j] = im.rpmOf[deploymentKey{m.Alias, d.Model, d.Endpoints[0], d.Priority}]
		}
		if len(m.Deployments) < 2 || slices.Contains(rpms, 0) {
			continue
		}
		g := 0
		for _, r := range rpms {
			g = gcd(g, r)
		}
		for j := range m.Deployments {
			m.Deployments[j].Weight = rpms[j] / g
		}
		m.Strategy = "weighted"
		im.report.mapped(field, "alias %s: no weights, so its deployments are weighted by their rpm, as simple-shuffle does", m.Alias)
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// deployment maps one entry of model_list.
func (im *litellmImport) deployment(entry *object) error {
	alias := entry.required("model_name")
	params := entry.object("litellm_params")
	info := entry.object("model_info")
	mode := info.str("mode")
	full := params.required("model")
	if err := entry.err(); err != nil {
		return err
	}
	prefix, model, found := strings.Cut(full, "/")
	if !found {
		prefix, model = "openai", full // LiteLLM reads a bare name as OpenAI's
	}
	prov, known := providers[prefix]
	if !known {
		im.report.notMapped(entry.path, "provider %q of %q has no import yet: add its endpoint and credential by hand (see docs/cloud.md for Vertex AI and Bedrock)", prefix, full)
		return nil
	}
	protocol := ""
	switch mode {
	case "", "chat", "completion", "responses":
	case "embedding":
		protocol = prov.embed
		if protocol == "" {
			im.report.notMapped(entry.path, "%s serves no embeddings in Sluice", prefix)
			return nil
		}
	default:
		im.report.notMapped(entry.path, "model_info.mode %q: Sluice serves chat, responses, messages, generate and embeddings aliases", mode)
		return nil
	}
	if mode != "" {
		im.report.mapped(info.at("mode"), "alias %s protocol %s", alias, or(protocol, "every generation protocol"))
	}
	info.rest(&im.report, "informational in LiteLLM; Sluice keeps no model metadata", nil)

	endpointID, err := im.endpoint(params, prov, prefix)
	if err != nil {
		return err
	}
	credID, accountID, err := im.credential(params, prov, endpointID, model)
	if err != nil {
		return err
	}
	order := params.count("order")
	priority := 0
	if order > 0 {
		priority = order - 1
		im.report.mapped(params.at("order"), "deployment priority %d (order 1 is tier 0)", priority)
	}
	weight, hasWeight := params.number("weight")
	if err := entry.err(); err != nil {
		return err
	}
	if hasWeight && (weight < 1 || weight != float64(int(weight))) {
		return fmt.Errorf("%s: must be a whole number ≥ 1 (Sluice weights are integers)", params.at("weight"))
	}
	if hasWeight {
		im.weighted[alias] = true
		im.report.mapped(params.at("weight"), "deployment weight %d, strategy weighted", int(weight))
	}
	rpm := im.limits(params, accountID, model)
	params.rest(&im.report, "no Sluice equivalent", map[string]string{
		"timeout":        "per-deployment timeouts are not imported: set endpoints[].timeouts",
		"stream_timeout": "per-deployment timeouts are not imported: set endpoints[].timeouts.idle",
		"max_retries":    "Sluice retries on the next edge, not the same deployment",
	})
	entry.rest(&im.report, "no Sluice equivalent", nil)
	if err := entry.err(); err != nil {
		return err
	}

	mi, ok := im.models[alias]
	if !ok {
		mi = len(im.catalog.Models)
		im.models[alias] = mi
		im.catalog.Models = append(im.catalog.Models, config.Model{Alias: alias, Protocol: protocol})
	} else if im.catalog.Models[mi].Protocol != protocol {
		return fmt.Errorf("%s: alias %q mixes embedding and generation deployments", entry.path, alias)
	}
	m := &im.catalog.Models[mi]
	key := deploymentKey{alias, model, endpointID, priority}
	im.rpmOf[key] += rpm
	if di, seen := im.deploys[key]; seen {
		d := &m.Deployments[di]
		d.Weight = max(d.Weight, 1) + max(int(weight), 1)
		im.report.approx(entry.path, "joins the deployment of %s on %s: credential %s serves it beside the others (weights added)", model, endpointID, credID)
	} else {
		im.deploys[key] = len(m.Deployments)
		d := config.Deployment{Model: model, Endpoints: []string{endpointID}, Priority: priority}
		if hasWeight {
			d.Weight = int(weight)
		}
		m.Deployments = append(m.Deployments, d)
	}
	im.report.mapped(entry.at("model_name"), "alias %s", alias)
	im.report.mapped(params.at("model"), "deployment model %s on endpoint %s (credential %s, account %s)", model, endpointID, credID, accountID)
	return nil
}

// endpoint returns the ID of the endpoint of (provider, api_base,
// api_version), adding it the first time.
func (im *litellmImport) endpoint(params *object, prov provider, prefix string) (string, error) {
	base := params.str("api_base")
	version := params.str("api_version")
	if err := params.err(); err != nil {
		return "", err
	}
	if base == "" {
		base = prov.baseURL
	}
	if base == "" {
		return "", fmt.Errorf("%s: is required for %s/ models", params.at("api_base"), prefix)
	}
	if prov.name == "azure" && version == "" {
		return "", fmt.Errorf("%s: is required for azure/ models", params.at("api_version"))
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%s: %q is not a URL", params.at("api_base"), base)
	}
	// LiteLLM's OpenAI-style bases end in /v1; Sluice adds the API path.
	base = strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
	if params.has("api_base") {
		im.report.mapped(params.at("api_base"), "endpoint base_url %s", base)
	}
	if version != "" {
		if prov.name != "azure" {
			im.report.notMapped(params.at("api_version"), "only Azure endpoints take an API version")
			version = ""
		} else {
			im.report.mapped(params.at("api_version"), "endpoint azure.api_version %s", version)
		}
	}
	return im.endpointFor(prov, base, version), nil
}

// credential returns the credential and account of a deployment's key,
// adding them the first time. The account is inferred: one OpenAI
// organization, one Azure resource, or else one key on one base URL.
func (im *litellmImport) credential(params *object, prov provider, endpointID, model string) (credID, accountID string, err error) {
	key := params.str("api_key")
	org := params.str("organization")
	if err := params.err(); err != nil {
		return "", "", err
	}
	envName, literal := strings.CutPrefix(key, "os.environ/")
	literal = !literal && key != ""
	switch {
	case key == "":
		envName = map[string]string{"openai": "OPENAI_API_KEY", "azure": "AZURE_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}[prov.name]
		if envName == "" {
			return "", "", fmt.Errorf("%s: is required for an OpenAI-compatible server", params.at("api_key"))
		}
		im.report.approx(params.path, "no api_key: LiteLLM reads %s from its environment, so the credential does too", envName)
	case literal:
		if prev, ok := im.literals[key]; ok {
			envName = prev
		} else {
			envName = "IMPORTED_" + strings.ToUpper(strings.ReplaceAll(endpointID, "-", "_")) + fmt.Sprintf("_KEY_%d", len(im.literals)+1)
			im.literals[key] = envName
		}
		im.report.approx(params.at("api_key"), "a literal key is never written to the catalog: the credential reads %s, set it to this key", envName)
	default:
		im.report.mapped(params.at("api_key"), "credential secret_env %s", envName)
	}
	base := im.catalog.Endpoints[im.endpointByID[endpointID]].BaseURL
	var account, how string
	switch {
	case org != "":
		account, how = "org "+org, fmt.Sprintf("the OpenAI-Organization %s its credentials send", org)
		im.report.mapped(params.at("organization"), "credential header OpenAI-Organization, account of organization %s", org)
	case prov.name == "azure":
		u, _ := url.Parse(base)
		account, how = "azure "+u.Hostname(), fmt.Sprintf("the Azure resource %s", u.Hostname())
	default:
		account, how = "key "+envName+" "+base, fmt.Sprintf("one key (%s) on %s", envName, base)
	}
	identity := envName + " " + account
	if i, ok := im.creds[identity]; ok {
		c := &im.catalog.Credentials[i]
		if !slices.Contains(c.Endpoints, endpointID) {
			c.Endpoints = append(c.Endpoints, endpointID)
		}
		if !slices.Contains(c.Models, model) {
			c.Models = append(c.Models, model)
		}
		return c.ID, c.Account, nil
	}
	ai, ok := im.accounts[account]
	if !ok {
		ai = len(im.catalog.Accounts)
		im.accounts[account] = ai
		id := im.newID("account", strings.ToLower(strings.ReplaceAll(envName, "_", "-")))
		if org != "" {
			id = im.newID("account", prov.name+"-"+slug(org))
		} else if prov.name == "azure" {
			id = im.newID("account", endpointID)
		}
		im.accountByID[id] = ai
		im.catalog.Accounts = append(im.catalog.Accounts, config.Account{ID: id})
		im.accountHow[id] = how
	}
	accountID = im.catalog.Accounts[ai].ID
	cred := config.Credential{
		ID:        im.newID("credential", strings.ToLower(strings.ReplaceAll(envName, "_", "-"))),
		Account:   accountID,
		SecretEnv: envName,
		Endpoints: []string{endpointID},
		Models:    []string{model},
	}
	if org != "" {
		cred.Headers = map[string]string{"OpenAI-Organization": org}
	}
	im.creds[identity] = len(im.catalog.Credentials)
	im.catalog.Credentials = append(im.catalog.Credentials, cred)
	from := "os.environ/" + envName + " in the LiteLLM config: the same value"
	if literal {
		from = "the literal api_key of " + params.path
	} else if key == "" {
		from = "the variable LiteLLM reads by default: the same value"
	}
	im.addSecret(envName, "credential "+cred.ID, from)
	return cred.ID, accountID, nil
}

// limits maps a deployment's rpm, tpm and max_parallel_requests to the
// per-model unit of its model under its account: LiteLLM counts them per
// deployment, which is one key serving one model. It returns the rpm; a
// failed read is left in params.
func (im *litellmImport) limits(params *object, accountID, model string) (rpm int) {
	rpm = params.count("rpm")
	tpm := params.count("tpm")
	parallel := params.count("max_parallel_requests")
	if rpm == 0 && tpm == 0 && parallel == 0 {
		return 0
	}
	a := &im.catalog.Accounts[im.accountByID[accountID]]
	if a.Models == nil {
		a.Models = map[string]config.AccountModel{}
	}
	unit, shared := a.Models[model]
	unit.RPM += rpm
	unit.TPM += tpm
	if parallel > 0 {
		unit.MaxInflight += parallel
	}
	a.Models[model] = unit
	for _, l := range []struct {
		name, field string
		v           int
	}{{"rpm", "rpm", rpm}, {"tpm", "tpm", tpm}, {"max_parallel_requests", "max_inflight", parallel}} {
		name, field, v := l.name, l.field, l.v
		if v == 0 {
			continue
		}
		if shared {
			im.report.approx(params.at(name), "added to accounts[%s].models.%s.%s: another deployment of the model on the same account shares it", accountID, model, field)
		} else {
			im.report.mapped(params.at(name), "accounts[%s].models.%s.%s %d", accountID, model, field, v)
		}
	}
	return rpm
}

// finishAccounts gives an account whose deployments set
// max_parallel_requests the sum of them as its own cap (Sluice's default,
// 2, would hold them below what the source allowed), and says how each
// account was inferred and what caps it has.
func (im *litellmImport) finishAccounts() {
	for i := range im.catalog.Accounts {
		a := &im.catalog.Accounts[i]
		total := 0
		for _, unit := range a.Models {
			total += unit.MaxInflight
		}
		if total > 0 {
			a.MaxInflight = &total
		}
		var creds []string
		for _, c := range im.catalog.Credentials {
			if c.Account == a.ID {
				creds = append(creds, c.ID)
			}
		}
		note := fmt.Sprintf("inferred from %s (credentials %s)", im.accountHow[a.ID], strings.Join(creds, ", "))
		if total > 0 {
			note += fmt.Sprintf("; max_inflight %d, the sum of its deployments' max_parallel_requests (its deployments without one share it)", total)
		} else {
			note += "; the source sets no concurrency cap for the account, so max_inflight is Sluice's safe default 2: raise it to what the provider allows"
		}
		im.report.Accounts = append(im.report.Accounts, Line{a.ID, note})
	}
}

func (im *litellmImport) routerSettings(root *object) error {
	rs := root.object("router_settings")
	strategy := rs.str("routing_strategy")
	if err := rs.err(); err != nil {
		return err
	}
	switch s, ok := litellmStrategies[strategy]; {
	case strategy == "" || strategy == "simple-shuffle":
		im.shuffleWeights(rs.at("routing_strategy"))
		if strategy != "" {
			im.report.approx(rs.at("routing_strategy"), "simple-shuffle picks at random by weight: weighted aliases get strategy weighted, the others round-robin (the same shares, taken in turn rather than at random)")
		}
	case ok:
		for i := range im.catalog.Models {
			im.catalog.Models[i].Strategy = s.strategy
		}
		if s.approx != "" {
			im.report.approx(rs.at("routing_strategy"), "strategy %s on every alias: %s", s.strategy, s.approx)
		} else {
			im.report.mapped(rs.at("routing_strategy"), "strategy %s on every alias", s.strategy)
		}
	default:
		return fmt.Errorf("%s: unknown strategy %q", rs.at("routing_strategy"), strategy)
	}
	if err := im.fallbacks(rs); err != nil {
		return err
	}
	failures := rs.count("allowed_fails")
	cooldown, hasCooldown := rs.number("cooldown_time")
	if err := rs.err(); err != nil {
		return err
	}
	if cooldown < 0 {
		return fmt.Errorf("%s: must be ≥ 0 seconds", rs.at("cooldown_time"))
	}
	for i := range im.catalog.Endpoints {
		im.catalog.Endpoints[i].Breaker.Failures = failures
		im.catalog.Endpoints[i].Breaker.Open = config.Duration(time.Duration(cooldown * float64(time.Second)))
	}
	if failures > 0 {
		im.report.approx(rs.at("allowed_fails"), "breaker.failures %d on every endpoint: LiteLLM counts failures per deployment per minute, Sluice consecutive failures per endpoint", failures)
	}
	if hasCooldown {
		im.report.approx(rs.at("cooldown_time"), "breaker.open %s on every endpoint: LiteLLM cools one deployment, Sluice's breaker the endpoint (a 429 cools the account by its own backoff)", time.Duration(cooldown*float64(time.Second)))
	}
	if err := im.timeout(rs, "timeout"); err != nil {
		return err
	}
	rs.rest(&im.report, "no Sluice equivalent", map[string]string{
		"num_retries":                   "Sluice tries the next edge of the alias on a retryable failure, within wait_timeout",
		"retry_policy":                  "Sluice tries the next edge of the alias on a retryable failure, within wait_timeout",
		"redis_host":                    "Sluice's shared state is state.redis (url_env); set it by hand for several replicas",
		"redis_port":                    "Sluice's shared state is state.redis (url_env); set it by hand for several replicas",
		"redis_password":                "Sluice's shared state is state.redis (url_env); set it by hand for several replicas",
		"enable_pre_call_checks":        "Sluice always checks caps before a call",
		"context_window_fallbacks":      "Sluice falls back on upstream failure, not by the kind of error",
		"content_policy_fallbacks":      "Sluice falls back on upstream failure, not by the kind of error",
		"model_group_alias":             "add these names as aliases by hand",
		"default_max_parallel_requests": "set accounts[].max_inflight by hand",
	})
	return nil
}

// fallbacks appends, to each alias with fallbacks, the deployments of its
// fallback aliases as lower tiers: Sluice moves to the next tier when a
// tier fails, which is what a LiteLLM fallback does across model groups.
func (im *litellmImport) fallbacks(rs *object) error {
	items := rs.objects("fallbacks")
	defaults := rs.strings("default_fallbacks")
	own := map[string][]config.Deployment{}
	for _, m := range im.catalog.Models {
		own[m.Alias] = slices.Clone(m.Deployments)
	}
	explicit := map[string]bool{}
	for _, o := range items {
		for _, alias := range sortedKeys(o.fields) {
			targets := o.strings(alias)
			if err := o.err(); err != nil {
				return err
			}
			explicit[alias] = true
			im.appendTiers(o.at(alias), alias, targets, own)
		}
	}
	if len(defaults) > 0 {
		for _, m := range slices.Clone(im.catalog.Models) {
			if !explicit[m.Alias] && !slices.Contains(defaults, m.Alias) {
				im.appendTiers(rs.at("default_fallbacks"), m.Alias, defaults, own)
			}
		}
	}
	return rs.err()
}

// appendTiers appends to alias, as tiers below those it has, the
// deployments each of targets has of its own (own: before any fallback),
// and reports at field the targets it cannot fall back to.
func (im *litellmImport) appendTiers(field, alias string, targets []string, own map[string][]config.Deployment) {
	mi, ok := im.models[alias]
	if !ok {
		im.report.notMapped(field, "alias %q is not imported", alias)
		return
	}
	m := &im.catalog.Models[mi]
	for _, target := range targets {
		deployments, ok := own[target]
		if !ok {
			im.report.notMapped(field, "fallback %q is not an imported alias", target)
			continue
		}
		if ti := im.models[target]; im.catalog.Models[ti].Protocol != m.Protocol {
			im.report.notMapped(field, "fallback %q serves another protocol than %q", target, alias)
			continue
		}
		next := 0
		for _, d := range m.Deployments {
			next = max(next, d.Priority+1)
		}
		base := deployments[0].Priority
		for _, d := range deployments {
			base = min(base, d.Priority)
		}
		for _, d := range deployments {
			d.Priority = next + d.Priority - base
			m.Deployments = append(m.Deployments, d)
		}
		im.report.mapped(field, "alias %s falls back to %s's deployments as tier %d and below", alias, target, next)
	}
}

// timeout maps a request timeout in seconds to server.timeouts.total.
func (im *litellmImport) timeout(o *object, name string) error {
	secs, ok := o.number(name)
	if err := o.err(); err != nil || !ok {
		return err
	}
	if secs <= 0 {
		return fmt.Errorf("%s: must be > 0 seconds", o.at(name))
	}
	d := time.Duration(secs * float64(time.Second))
	if im.catalog.Server.Timeouts.Total != 0 {
		im.report.notMapped(o.at(name), "server.timeouts.total is already set from router_settings.timeout")
		return nil
	}
	im.catalog.Server.Timeouts.Total = config.Duration(d)
	im.report.mapped(o.at(name), "server.timeouts.total %s", d)
	return nil
}

func (im *litellmImport) otherSettings(root *object) error {
	ls := root.object("litellm_settings")
	if err := im.timeout(ls, "request_timeout"); err != nil {
		return err
	}
	ls.rest(&im.report, "no Sluice equivalent", map[string]string{
		"callbacks":        "Sluice exports usage as events (docs/events.md) and traces (docs/tracing.md)",
		"success_callback": "Sluice exports usage as events (docs/events.md) and traces (docs/tracing.md)",
		"failure_callback": "Sluice exports usage as events (docs/events.md) and traces (docs/tracing.md)",
		"cache":            "Sluice caches no responses",
		"cache_params":     "Sluice caches no responses",
		"num_retries":      "Sluice tries the next edge of the alias on a retryable failure, within wait_timeout",
		"fallbacks":        "write fallbacks under router_settings to have them imported",
		"drop_params":      "Sluice passes or translates parameters by protocol (docs/translators.md)",
	})
	gs := root.object("general_settings")
	master := gs.str("master_key")
	if err := gs.err(); err != nil {
		return err
	}
	if env, ok := strings.CutPrefix(master, "os.environ/"); ok {
		im.catalog.Server.AdminTokenEnv = env
		im.addSecret(env, "the admin token", "os.environ/"+env+" (general_settings.master_key): the same value")
		im.report.approx(gs.at("master_key"), "server.admin_token_env %s: it opens Sluice's admin API, not the data plane (callers need a virtual key)", env)
	} else if master != "" {
		im.catalog.Server.AdminTokenEnv = "SLUICE_ADMIN_TOKEN"
		im.addSecret("SLUICE_ADMIN_TOKEN", "the admin token", "new: a literal master_key is never written; reuse it or choose another")
		im.report.approx(gs.at("master_key"), "server.admin_token_env SLUICE_ADMIN_TOKEN (the literal is not written): it opens Sluice's admin API, not the data plane")
	}
	gs.rest(&im.report, "no Sluice equivalent", map[string]string{
		"database_url":         "Sluice keeps its own database (database.url_env); LiteLLM's tables are not read",
		"store_model_in_db":    "models are in the catalog (or applied with sluice apply)",
		"alerting":             "Sluice exposes /metrics and usage events instead",
		"proxy_batch_write_at": "Sluice writes usage records through its own spool",
	})
	return nil
}
