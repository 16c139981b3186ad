package importer

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/config"
)

// newAPITypes maps the channel types of new-api (and one-api) that Sluice
// can serve to their provider; every other type is reported.
var newAPITypes = map[int]provider{
	1:  providers["openai"],
	3:  providers["azure"],
	8:  providers["custom_openai"],
	14: providers["anthropic"],
	24: providers["gemini"],
}

type newAPIImport struct {
	builder
	secretsDir string
	files      map[string][]byte
	accounts   map[string]int // account identity → index in catalog.Accounts
	accountHow map[string]string
	models     map[string]int         // alias → index in catalog.Models
	deploys    map[deploymentKey]bool // deployments made, to refuse a model listed twice
	weighted   map[string]bool
	pools      map[string]int // group → index in catalog.Pools
}

// newAPIChannel is what the first pass reads of a channel, for the tiers
// to be ranked before deployments are made.
type newAPIChannel struct {
	o        *object
	id       int
	priority int
}

// NewAPI imports the channels of a new-api or one-api console (the answer
// of GET /api/channel/, or its bare list) and, optionally, its tokens (nil
// when not given). The channels' keys, which the source holds in clear,
// are returned as SecretFiles under secretsDir, where the catalog reads
// them.
func NewAPI(channelsJSON, tokensJSON []byte, secretsDir string) (*Result, error) {
	im := &newAPIImport{
		builder:    newBuilder("new-api"),
		secretsDir: secretsDir,
		files:      map[string][]byte{},
		accounts:   map[string]int{},
		accountHow: map[string]string{},
		models:     map[string]int{},
		deploys:    map[deploymentKey]bool{},
		weighted:   map[string]bool{},
		pools:      map[string]int{},
	}
	if err := im.channels(channelsJSON); err != nil {
		return nil, &InputError{Input: ChannelsInput, Err: err}
	}
	if tokensJSON != nil {
		if err := im.tokens(tokensJSON); err != nil {
			return nil, &InputError{Input: TokensInput, Err: err}
		}
	}
	out, err := marshalCatalog(&im.catalog, "# Imported from new-api / one-api channels by `sluice import new-api`; see the import report.\n")
	if err != nil {
		return nil, err
	}
	return &Result{Catalog: out, Report: im.report, SecretFiles: im.files}, nil
}

// consoleList reads new-api's list answers: a bare list, {"data": [...]}
// or {"data": {"items": [...]}}.
func consoleList(doc []byte) ([]any, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	for range 2 {
		switch w := v.(type) {
		case []any:
			return w, nil
		case map[string]any:
			if data, ok := w["data"]; ok {
				v = data
			} else if items, ok := w["items"]; ok {
				v = items
			} else {
				return nil, fmt.Errorf("data: must be a list of channels")
			}
			if inner, ok := v.(map[string]any); ok {
				v = inner["items"]
			}
		}
	}
	if list, ok := v.([]any); ok {
		return list, nil
	}
	return nil, fmt.Errorf("must be a list, or an answer with data.items")
}

func (im *newAPIImport) channels(doc []byte) error {
	items, err := consoleList(doc)
	if err != nil {
		return err
	}
	var enabled []newAPIChannel
	for i, item := range items {
		o, err := asObject(fmt.Sprintf("channels[%d]", i), item)
		if err != nil {
			return err
		}
		id := o.count("id")
		status := o.count("status")
		priority, _ := o.number("priority")
		if err := o.err(); err != nil {
			return err
		}
		if status != 1 {
			// Sluice's catalog has no disabled credential (an upstream
			// account is disabled or suspended at run time, in the state
			// store): an imported one would serve from the start.
			im.report.notMapped(o.path, "not imported: disabled in new-api (status %d, %s); Sluice's catalog cannot hold a disabled credential, so add it by hand when it is enabled again", status, newAPIStatus(status))
			continue
		}
		enabled = append(enabled, newAPIChannel{o, id, int(priority)})
	}
	// new-api tries the highest priority first; Sluice the lowest tier.
	var levels []int
	for _, ch := range enabled {
		if !slices.Contains(levels, ch.priority) {
			levels = append(levels, ch.priority)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(levels)))
	for _, ch := range enabled {
		if err := im.channel(ch, slices.Index(levels, ch.priority)); err != nil {
			return err
		}
	}
	for i := range im.catalog.Models {
		if im.weighted[im.catalog.Models[i].Alias] {
			im.catalog.Models[i].Strategy = "weighted"
		}
	}
	for _, a := range im.catalog.Accounts {
		im.report.Accounts = append(im.report.Accounts, Line{a.ID, im.accountHow[a.ID] +
			"; the source knows no concurrency cap, so max_inflight is Sluice's safe default 2: raise it to what the provider allows"})
	}
	return nil
}

// newAPIStatus names a channel status other than 1 (enabled).
func newAPIStatus(status int) string {
	switch status {
	case 2:
		return "disabled by hand"
	case 3:
		return "disabled automatically after failures"
	}
	return "not enabled"
}

func (im *newAPIImport) channel(ch newAPIChannel, tier int) error {
	o := ch.o
	typ := o.count("type")
	name := o.str("name")
	if err := o.err(); err != nil {
		return err
	}
	prov, ok := newAPITypes[typ]
	if !ok {
		im.report.notMapped(o.path, "channel type %d has no import yet (openai 1, azure 3, custom 8, anthropic 14, gemini 24 have)", typ)
		return nil
	}
	im.report.mapped(o.at("priority"), "deployment tier %d (new-api tries the highest priority first)", tier)
	base := o.str("base_url")
	version := o.str("other")
	if err := o.err(); err != nil {
		return err
	}
	if base == "" {
		base = prov.baseURL
	}
	if base == "" {
		return fmt.Errorf("%s: is required for channel type %d", o.at("base_url"), typ)
	}
	base = strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
	if prov.name == "azure" {
		if version == "" {
			return fmt.Errorf("%s: the Azure API version is required", o.at("other"))
		}
		im.report.mapped(o.at("other"), "endpoint azure.api_version %s", version)
	} else if version != "" {
		im.report.notMapped(o.at("other"), "only Azure channels' other (the API version) is imported")
		version = ""
	}
	if o.has("base_url") {
		im.report.mapped(o.at("base_url"), "endpoint base_url %s", base)
	}
	// One endpoint per channel: new-api ranks, weighs and bans channels,
	// and Sluice does the same to endpoints (tiers, weights, breaker).
	ep := config.Endpoint{ID: im.newID("endpoint", fmt.Sprintf("ch%d-%s", ch.id, name)), BaseURL: base, Protocols: prov.protocols}
	if version != "" {
		ep.Azure = &config.Azure{APIVersion: version}
	}
	im.catalog.Endpoints = append(im.catalog.Endpoints, ep)
	endpointID := ep.ID

	models := splitList(o, "models", ",")
	if err := o.err(); err != nil {
		return err
	}
	if len(models) == 0 {
		return fmt.Errorf("%s: lists no model", o.at("models"))
	}
	mapping := modelMapping(o)
	weight := o.count("weight")
	if err := o.err(); err != nil {
		return err
	}
	var upstream []string
	for _, alias := range models {
		model := or(mapping[alias], alias)
		if !slices.Contains(upstream, model) {
			upstream = append(upstream, model)
		}
		protocol := ""
		if strings.Contains(model, "embedding") {
			// new-api does not say which models embed; their names do.
			protocol = prov.embed
			im.report.approx(o.at("models"), "%s is served as an embeddings alias (%s), judged by its name", alias, protocol)
		}
		if err := im.deploy(o, alias, model, protocol, endpointID, tier, weight); err != nil {
			return err
		}
	}
	im.report.mapped(o.at("models"), "aliases %s on endpoint %s", strings.Join(models, ", "), endpointID)
	if len(mapping) > 0 {
		im.report.mapped(o.at("model_mapping"), "deployment model names")
	}
	if weight > 0 {
		im.report.mapped(o.at("weight"), "deployment weight %d, strategy weighted", weight)
	}

	accountID := im.account(o, ch.id, name, prov, base)
	org := o.str("openai_organization")
	keys := splitList(o, "key", "\n")
	if err := o.err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("%s: has no key", o.at("key"))
	}
	for n, key := range keys {
		id := im.newID("credential", fmt.Sprintf("ch%d-key%d", ch.id, n+1))
		file := path.Join(im.secretsDir, id)
		im.files[file] = []byte(key)
		cred := config.Credential{ID: id, Account: accountID, SecretFile: file, Endpoints: []string{endpointID}, Models: upstream}
		if org != "" {
			cred.Headers = map[string]string{"OpenAI-Organization": org}
		}
		im.catalog.Credentials = append(im.catalog.Credentials, cred)
		im.report.Secrets = append(im.report.Secrets, Secret{File: file, For: "credential " + id, From: fmt.Sprintf("line %d of %s, written by the import", n+1, o.at("key"))})
	}
	im.report.mapped(o.at("key"), "%d credential(s), one per line, each in its own secret file", len(keys))

	groups := splitList(o, "group", ",")
	for _, g := range groups {
		pi, ok := im.pools[g]
		if !ok {
			pi = len(im.catalog.Pools)
			im.pools[g] = pi
			im.catalog.Pools = append(im.catalog.Pools, config.Pool{ID: im.newID("pool", g)})
		}
		if p := &im.catalog.Pools[pi]; !slices.Contains(p.Accounts, accountID) {
			p.Accounts = append(p.Accounts, accountID)
		}
	}
	if len(groups) > 0 {
		im.report.mapped(o.at("group"), "pools %s (a token of the group routes through its pool)", strings.Join(groups, ", "))
	}
	o.take("status")
	o.take("id")
	o.rest(&im.report, "no Sluice equivalent", map[string]string{
		"auto_ban":            "Sluice's breaker and cooldowns take a failing upstream out of rotation on their own",
		"balance":             "Sluice does not read upstream balances",
		"used_quota":          "usage history is not carried over",
		"test_model":          "Sluice has no channel tests",
		"status_code_mapping": "Sluice classifies upstream errors itself (docs/failure-classes.md)",
		"tag":                 "channels' tags are not imported",
	})
	return o.err()
}

func (im *newAPIImport) deploy(o *object, alias, model, protocol, endpointID string, tier, weight int) error {
	mi, ok := im.models[alias]
	if !ok {
		mi = len(im.catalog.Models)
		im.models[alias] = mi
		im.catalog.Models = append(im.catalog.Models, config.Model{Alias: alias, Protocol: protocol})
	} else if im.catalog.Models[mi].Protocol != protocol {
		return fmt.Errorf("%s: model %q embeds on one channel and generates on another", o.at("models"), alias)
	}
	m := &im.catalog.Models[mi]
	if weight > 0 {
		im.weighted[alias] = true
	}
	key := deploymentKey{alias, model, endpointID, tier}
	if im.deploys[key] {
		return fmt.Errorf("%s: lists %q twice", o.at("models"), alias)
	}
	im.deploys[key] = true
	m.Deployments = append(m.Deployments, config.Deployment{Model: model, Endpoints: []string{endpointID}, Priority: tier, Weight: weight})
	return nil
}

// account infers a channel's account: channels sending one OpenAI
// organization, or on one Azure resource, share it; any other channel is
// an account of its own, whose keys each keep their own cap and cooldown
// (a channel's keys are often of several upstream accounts). A failed
// read is left in o.
func (im *newAPIImport) account(o *object, id int, name string, prov provider, base string) string {
	org := o.str("openai_organization")
	identity, how, scope := fmt.Sprintf("channel %d", id), fmt.Sprintf("channel %d (%s): each of its keys its own cap and cooldown (quota_scope credential)", id, name), "credential"
	switch {
	case org != "":
		identity, how, scope = "org "+org, "the OpenAI organization "+org+" its channels send", ""
		im.report.mapped(o.at("openai_organization"), "credential header OpenAI-Organization; the account of organization %s", org)
	case prov.name == "azure":
		identity, how, scope = "azure "+base, "the Azure resource "+base+" (channel "+fmt.Sprint(id)+" and any other on it)", ""
	}
	if i, ok := im.accounts[identity]; ok {
		return im.catalog.Accounts[i].ID
	}
	a := config.Account{ID: im.newID("account", fmt.Sprintf("ch%d-%s", id, name)), QuotaScope: scope}
	if org != "" {
		a.ID = im.newID("account", org)
	}
	im.accounts[identity] = len(im.catalog.Accounts)
	im.accountHow[a.ID] = "inferred from " + how
	im.catalog.Accounts = append(im.catalog.Accounts, a)
	return a.ID
}

// splitList reads a field new-api keeps as one string of items (models and
// groups by commas, keys by lines), dropping blanks.
func splitList(o *object, name, sep string) []string {
	var out []string
	for item := range strings.SplitSeq(o.str(name), sep) {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// modelMapping reads model_mapping: a JSON object of alias → upstream
// model, which new-api stores as a string. A failed read is left in o.
func modelMapping(o *object) map[string]string {
	mapping := map[string]string{}
	switch v := o.take("model_mapping").(type) {
	case nil:
	case string:
		if strings.TrimSpace(v) == "" {
			break
		}
		if err := json.Unmarshal([]byte(v), &mapping); err != nil {
			o.fail("%s: must be a JSON object of model names", o.at("model_mapping"))
			return nil
		}
	case map[string]any:
		for k, m := range v {
			s, ok := m.(string)
			if !ok {
				o.fail("%s.%s: must be a string", o.at("model_mapping"), k)
				return nil
			}
			mapping[k] = s
		}
	default:
		o.fail("%s: must be a JSON object of model names", o.at("model_mapping"))
		return nil
	}
	return mapping
}

// tokens maps new-api tokens to keys. new-api keeps a token's key in
// clear, so the key keeps its secret ("sk-" and the stored key), written
// to a file like the channels' keys.
func (im *newAPIImport) tokens(doc []byte) error {
	items, err := consoleList(doc)
	if err != nil {
		return err
	}
	im.report.KeysNote = "new-api keeps its tokens in clear, so each key keeps its secret (written to the file named): callers change only the base URL."
	for i, item := range items {
		o, err := asObject(fmt.Sprintf("tokens[%d]", i), item)
		if err != nil {
			return err
		}
		if err := im.token(o); err != nil {
			return err
		}
	}
	return nil
}

func (im *newAPIImport) token(o *object) error {
	id := o.count("id")
	name := o.str("name")
	secret := o.required("key")
	status := o.count("status")
	if err := o.err(); err != nil {
		return err
	}
	if status != 1 {
		im.report.notMapped(o.path, "status %d (disabled, expired or exhausted): not imported", status)
		return nil
	}
	key := config.Key{ID: im.newID("key", or(name, fmt.Sprintf("token-%d", id))), Name: name}
	key.SecretFile = path.Join(im.secretsDir, "key-"+key.ID)
	im.files[key.SecretFile] = []byte("sk-" + strings.TrimPrefix(secret, "sk-"))
	im.report.Secrets = append(im.report.Secrets, Secret{File: key.SecretFile, For: "key " + key.ID, From: o.at("key") + " with its sk- prefix: callers keep their key"})
	im.report.mapped(o.at("key"), "key %s with the same secret", key.ID)
	im.report.Keys = append(im.report.Keys, KeyMapping{Old: fmt.Sprintf("token %d `%s`", id, name), NewID: key.ID, SecretIn: key.SecretFile})
	expires, _ := o.number("expired_time")
	if expires > 0 {
		key.ExpiresAt = time.Unix(int64(expires), 0).UTC().Format(time.RFC3339)
		im.report.mapped(o.at("expired_time"), "expires_at %s", key.ExpiresAt)
	}
	limited, _ := o.take("model_limits_enabled").(bool)
	models := splitList(o, "model_limits", ",")
	if err := o.err(); err != nil {
		return err
	}
	if limited {
		for _, m := range models {
			if _, ok := im.models[m]; ok {
				key.Models = append(key.Models, m)
			} else {
				im.report.notMapped(o.at("model_limits"), "%q is not an imported alias: left out of the key's models", m)
			}
		}
		if len(key.Models) == 0 {
			im.report.notMapped(o.path, "none of its models is imported: not imported")
			return nil
		}
		im.report.mapped(o.at("model_limits"), "key models %s", strings.Join(key.Models, ", "))
	}
	group := o.str("group")
	if err := o.err(); err != nil {
		return err
	}
	if group != "" {
		if pi, ok := im.pools[group]; ok {
			key.Policy = config.Policy{Mode: "pool", Pool: im.catalog.Pools[pi].ID}
			im.report.mapped(o.at("group"), "policy pool %s", key.Policy.Pool)
		} else {
			im.report.notMapped(o.at("group"), "no imported channel is in group %q: the key routes over every account", group)
		}
	}
	for _, f := range []string{"remain_quota", "unlimited_quota", "used_quota"} {
		if o.take(f) != nil {
			im.report.notMapped(o.at(f), "new-api quota is money-like credit: the imported catalog bills no one (docs/billing.md)")
		}
	}
	o.rest(&im.report, "no Sluice equivalent", map[string]string{
		"allow_ips": "Sluice keys have no IP allow-list",
		"user_id":   "Sluice keys belong to a tenant; new-api users are not imported",
	})
	im.catalog.Keys = append(im.catalog.Keys, key)
	return nil
}
