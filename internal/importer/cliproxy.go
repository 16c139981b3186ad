package importer

import (
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/config"
)

// cliproxySecretKeyEnv is the variable the imported catalog reads
// server.secret_key from when it has oauth credentials: CLIProxyAPI keeps
// its tokens in files and has no such key, so the operator makes one.
const cliproxySecretKeyEnv = "SLUICE_SECRET_KEY"

type cliproxyImport struct {
	builder
	secretsDir  string
	files       map[string][]byte
	models      map[string]int // alias → index in catalog.Models
	deploys     map[deploymentKey]bool
	accounts    map[string]int      // account identity → index in catalog.Accounts
	accountHow  map[string][]string // account ID → the auth files it was inferred from
	forcePrefix bool
	// oauthAliases and oauthExcluded are oauth-model-alias and
	// oauth-excluded-models, by CLIProxyAPI channel ("claude", "qwen").
	oauthAliases  map[string][]cliproxyModel
	oauthExcluded map[string][]string
}

// cliproxyModel is one entry of a models list: the upstream name and the
// alias callers send ("" = the name). fork, in oauth-model-alias, keeps
// the name served too.
type cliproxyModel struct {
	name, alias string
	fork        bool
}

// CLIProxyAPI imports a CLIProxyAPI config.yaml and, optionally, the files
// of its auth folder (file name → content; nil when not given). CLIProxyAPI
// holds every secret in clear — its client keys, its providers' API keys,
// its logins' refresh tokens — so they are returned as SecretFiles under
// secretsDir, where the catalog reads them. Errors name the field, and the
// auth file.
func CLIProxyAPI(configYAML []byte, authFiles map[string][]byte, secretsDir string) (*Result, error) {
	im := &cliproxyImport{
		builder:       newBuilder("cliproxyapi"),
		secretsDir:    secretsDir,
		files:         map[string][]byte{},
		models:        map[string]int{},
		deploys:       map[deploymentKey]bool{},
		accounts:      map[string]int{},
		accountHow:    map[string][]string{},
		oauthAliases:  map[string][]cliproxyModel{},
		oauthExcluded: map[string][]string{},
	}
	routing, err := im.config(configYAML)
	if err != nil {
		return nil, &InputError{Input: ConfigInput, Err: err}
	}
	if authFiles != nil {
		if err := im.authDir(authFiles); err != nil {
			return nil, &InputError{Input: AuthDirInput, Err: err}
		}
	}
	if err := im.routing(routing); err != nil {
		return nil, &InputError{Input: ConfigInput, Err: err}
	}
	if len(im.catalog.Models) == 0 {
		return nil, &InputError{Input: ConfigInput, Err: errors.New("no provider key or login serves a model: nothing to import")}
	}
	im.finishAccounts()
	out, err := marshalCatalog(&im.catalog, "# Imported from CLIProxyAPI by `sluice import cliproxyapi`; see the import report.\n")
	if err != nil {
		return nil, err
	}
	return &Result{Catalog: out, Report: im.report, SecretFiles: im.files}, nil
}

// config maps config.yaml but its routing section, which is applied once
// every alias is known (the auth files add some): it returns that.
func (im *cliproxyImport) config(doc []byte) (*object, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	root, err := asObject("", v)
	if err != nil {
		return nil, errors.New("the document must be a mapping")
	}
	if err := im.listen(root); err != nil {
		return nil, err
	}
	im.forcePrefix, _ = root.take("force-model-prefix").(bool)
	if im.forcePrefix {
		im.report.mapped("force-model-prefix", "a credential with a prefix serves only the prefixed aliases")
	} else if root.has("force-model-prefix") {
		im.report.mapped("force-model-prefix", "a credential with a prefix serves the bare aliases too")
	}
	im.oauthModelSettings(root)
	for _, s := range cliproxyKeySections {
		if err := im.keySection(root, s); err != nil {
			return nil, err
		}
	}
	if err := im.legacyGeminiKeys(root); err != nil {
		return nil, err
	}
	if err := im.compatProviders(root); err != nil {
		return nil, err
	}
	if err := im.clientKeys(root); err != nil {
		return nil, err
	}
	if dir := root.str("auth-dir"); dir != "" {
		im.report.approx("auth-dir", "read from the folder given to `sluice import cliproxyapi` after the config, not from %s", dir)
	}
	if root.str("proxy-url") != "" {
		// The URL may hold a password: it is not quoted.
		im.report.approx("proxy-url", "Sluice dials upstreams through the proxy its environment names: set HTTPS_PROXY (and HTTP_PROXY) to this URL where Sluice runs")
	}
	if retry, _ := root.number("request-retry"); retry > 0 {
		im.report.approx("request-retry", "Sluice retries on its own terms: a failed attempt moves to the alias's next edge (another credential or deployment) before the first byte, by failure class (docs/failure-classes.md); there is no round count")
	}
	quota := root.object("quota-exceeded")
	if b, _ := quota.take("switch-project").(bool); b {
		im.report.approx(quota.at("switch-project"), "a rate-limited account cools until its Retry-After and the request goes to another account of the alias, always")
	}
	quota.rest(&im.report, "no Sluice equivalent", map[string]string{
		"switch-preview-model": "Sluice does not swap models on its own: list the preview model as a lower tier deployment of the alias (priority 1) to fall back to it",
		"antigravity-credits":  "Antigravity logins are not imported",
	})
	routing := root.object("routing")
	root.rest(&im.report, "no Sluice equivalent", cliproxyTopLevelReasons)
	return routing, root.err()
}

// cliproxyTopLevelReasons say why the top-level settings not imported are
// left out; one not listed here has "no Sluice equivalent".
var cliproxyTopLevelReasons = map[string]string{
	"tls":                              "Sluice serves plain HTTP: terminate TLS in front of it",
	"remote-management":                "CLIProxyAPI's management key is not carried over: Sluice's admin API takes its own token (server.admin_token_env)",
	"debug":                            "Sluice's log level is its --log-level flag",
	"logging-to-file":                  "Sluice logs to stderr",
	"logs-max-total-size-mb":           "Sluice logs to stderr",
	"error-logs-max-files":             "Sluice logs to stderr",
	"request-log":                      "Sluice's access log has one line per request, without bodies",
	"usage-statistics-enabled":         "Sluice always records usage in its ledger (docs/billing.md)",
	"max-retry-interval":               "a request waits for capacity up to server.wait_timeout (default 30s)",
	"max-retry-credentials":            "Sluice tries the alias's edges in strategy order until one answers",
	"disable-cooling":                  "Sluice always cools a rate-limited account, for its Retry-After",
	"transient-error-cooldown-seconds": "an endpoint's breaker (endpoints[].breaker) takes a failing upstream out of rotation",
	"ws-auth":                          "Sluice has no WebSocket API",
	"payload":                          "Sluice does not rewrite request bodies by rule",
	"oauth-request-scoped-errors":      "Sluice classifies upstream errors itself (docs/failure-classes.md)",
	"vertex-api-key":                   "Sluice's Vertex AI endpoints take OAuth tokens (a service account), not API keys: add the project as in docs/cloud.md",
	"claude-header-defaults":           "Sluice passes the caller's headers on as its protocol allows (docs/headers-and-defaults.md) and sets no client identity",
	"codex-header-defaults":            "Sluice passes a Responses caller's headers on to the ChatGPT backend (Codex's user agent, originator and session ids) and otherwise names the client codex_cli_rs in originator alone; add others as credentials[].headers",
	"disable-claude-cloak-mode":        "Sluice never rewrites a request as Claude Code's",
	"passthrough-headers":              "Sluice passes on a fixed set of an upstream's answer headers, scrubbed of secrets; there is no switch",
}

// listen maps host and port to server.listen.
func (im *cliproxyImport) listen(root *object) error {
	host := root.str("host")
	port := root.count("port")
	if err := root.err(); err != nil {
		return err
	}
	if port == 0 {
		if host != "" {
			im.report.notMapped("host", "no port given: Sluice listens where server.listen says (default 127.0.0.1:8080)")
		}
		return nil
	}
	im.catalog.Server.Listen = net.JoinHostPort(host, fmt.Sprint(port))
	im.report.mapped("port", "server.listen %s", im.catalog.Server.Listen)
	switch {
	case host != "":
		im.report.mapped("host", "server.listen %s", im.catalog.Server.Listen)
	case root.has("host"):
		im.report.mapped("host", "server.listen %s: no host is every interface, as in CLIProxyAPI", im.catalog.Server.Listen)
	}
	return nil
}

// clientKeys maps api-keys, the keys callers present to CLIProxyAPI, to
// virtual keys that keep their secrets.
func (im *cliproxyImport) clientKeys(root *object) error {
	keys := root.strings("api-keys")
	if err := root.err(); err != nil || len(keys) == 0 {
		return err
	}
	im.report.KeysNote = "CLIProxyAPI keeps its api-keys in clear, so each key keeps its secret (written to the file named): callers change only the base URL. Every key may call every alias, as in CLIProxyAPI."
	for i, secret := range keys {
		field := fmt.Sprintf("api-keys[%d]", i)
		if strings.TrimSpace(secret) == "" {
			return fmt.Errorf("%s: is empty", field)
		}
		key := config.Key{ID: im.newID("key", fmt.Sprintf("client-%d", i+1)), Name: field}
		key.SecretFile = path.Join(im.secretsDir, "key-"+key.ID)
		im.files[key.SecretFile] = []byte(secret)
		im.report.Secrets = append(im.report.Secrets, Secret{File: key.SecretFile, For: "key " + key.ID, From: field + ": callers keep their key"})
		im.report.Keys = append(im.report.Keys, KeyMapping{Old: "`" + field + "`", NewID: key.ID, SecretIn: key.SecretFile})
		im.catalog.Keys = append(im.catalog.Keys, key)
	}
	im.report.mapped("api-keys", "%d key(s) with the same secrets", len(keys))
	return nil
}

// oauthModelSettings reads oauth-model-alias and oauth-excluded-models,
// which shape what the logins of each channel serve. A failed read is
// left in root.
func (im *cliproxyImport) oauthModelSettings(root *object) {
	aliases := root.object("oauth-model-alias")
	for _, channel := range sortedKeys(aliases.fields) {
		if !cliproxyChannel(channel) {
			continue
		}
		im.oauthAliases[channel] = im.modelList(aliases, channel)
		im.report.mapped(aliases.at(channel), "aliases of the %s logins' models", channel)
	}
	aliases.rest(&im.report, "the logins of this channel are not imported", nil)
	excluded := root.object("oauth-excluded-models")
	for _, channel := range sortedKeys(excluded.fields) {
		if !cliproxyChannel(channel) {
			continue
		}
		im.oauthExcluded[channel] = excluded.strings(channel)
		im.report.mapped(excluded.at(channel), "models left out of the %s logins' credentials", channel)
	}
	excluded.rest(&im.report, "the logins of this channel are not imported", nil)
}

// routing maps the routing section (strategy and session affinity) onto
// every alias.
func (im *cliproxyImport) routing(r *object) error {
	strategy := r.str("strategy")
	if err := r.err(); err != nil {
		return err
	}
	var sluiceStrategy string
	switch strategy {
	case "", "round-robin":
		if strategy != "" {
			im.report.mapped(r.at("strategy"), "every alias's strategy round-robin (Sluice's default)")
		}
	case "fill-first":
		sluiceStrategy = "fill-first"
		im.report.mapped(r.at("strategy"), "every alias's strategy fill-first")
	case "weighted-round-robin":
		im.report.approx(r.at("strategy"), "round-robin: Sluice weighs deployments, not credentials, so the credentials of a deployment share its load evenly (their weights are listed below)")
	default:
		return fmt.Errorf("%s: %q is not round-robin, weighted-round-robin or fill-first", r.at("strategy"), strategy)
	}
	affinity, _ := r.take("session-affinity").(bool)
	ttl := r.str("session-affinity-ttl")
	if err := r.err(); err != nil {
		return err
	}
	var aff config.Affinity
	if affinity {
		aff.FallbackStrategy = or(sluiceStrategy, "round-robin")
		if ttl != "" {
			d, err := time.ParseDuration(ttl)
			if err != nil || d < 0 {
				return fmt.Errorf("%s: must be a duration such as \"1h\"", r.at("session-affinity-ttl"))
			}
			aff.TTL = config.Duration(d)
			im.report.mapped(r.at("session-affinity-ttl"), "affinity.ttl %s", ttl)
		}
		im.report.mapped(r.at("session-affinity"), "every alias's strategy affinity (a conversation stays on its account), %s for requests without one", aff.FallbackStrategy)
		sluiceStrategy = "affinity"
	} else if ttl != "" {
		im.report.notMapped(r.at("session-affinity-ttl"), "session affinity is off")
	}
	for i := range im.catalog.Models {
		im.catalog.Models[i].Strategy = sluiceStrategy
		im.catalog.Models[i].Affinity = aff
	}
	r.rest(&im.report, "no Sluice equivalent", map[string]string{
		"session-affinity-subagents": "Sluice binds by conversation; a subagent's conversation is one of its own",
	})
	return nil
}

// deploy makes alias serve model on endpoint (once), adding the alias the
// first time.
func (im *cliproxyImport) deploy(alias, model, endpoint string) {
	mi, ok := im.models[alias]
	if !ok {
		mi = len(im.catalog.Models)
		im.models[alias] = mi
		im.catalog.Models = append(im.catalog.Models, config.Model{Alias: alias})
	}
	key := deploymentKey{alias, model, endpoint, 0}
	if im.deploys[key] {
		return
	}
	im.deploys[key] = true
	m := &im.catalog.Models[mi]
	m.Deployments = append(m.Deployments, config.Deployment{Model: model, Endpoints: []string{endpoint}})
}

// serve adds credential cr on its endpoint for models, and deploys each
// model under its alias: prefixed ("team/alias") when the source gives the
// credential a prefix, and also bare unless force-model-prefix says not.
func (im *cliproxyImport) serve(cr config.Credential, models []cliproxyModel, prefix string) {
	endpoint := cr.Endpoints[0]
	for _, m := range models {
		if !slices.Contains(cr.Models, m.name) {
			cr.Models = append(cr.Models, m.name)
		}
		alias := or(m.alias, m.name)
		if prefix != "" {
			im.deploy(prefix+"/"+alias, m.name, endpoint)
		}
		if prefix == "" || !im.forcePrefix {
			im.deploy(alias, m.name, endpoint)
		}
	}
	im.catalog.Credentials = append(im.catalog.Credentials, cr)
}

// secretFile writes a secret of the source to the file of what (an ID)
// and lists it in the report.
func (im *cliproxyImport) secretFile(name, value, forWhat, from string) string {
	file := path.Join(im.secretsDir, name)
	im.files[file] = []byte(value)
	im.report.Secrets = append(im.report.Secrets, Secret{File: file, For: forWhat, From: from + ", written by the import"})
	return file
}

// finishAccounts reports how each account was inferred, and asks for the
// secret key that seals the oauth credentials' tokens.
func (im *cliproxyImport) finishAccounts() {
	for _, a := range im.catalog.Accounts {
		im.report.Accounts = append(im.report.Accounts, Line{a.ID, "inferred from the login " + strings.Join(im.accountHow[a.ID], ", ") +
			"; CLIProxyAPI knows no concurrency cap, so max_inflight is Sluice's safe default 2: raise it to what the subscription allows"})
	}
	for _, cr := range im.catalog.Credentials {
		if cr.Account == "" {
			im.report.Accounts = append(im.report.Accounts, Line{cr.ID, "an API key is an account of its own (the source does not say which keys share an organization); max_inflight is Sluice's safe default 2"})
		}
	}
	if slices.ContainsFunc(im.catalog.Credentials, func(cr config.Credential) bool { return cr.OAuth.Set() }) {
		im.catalog.Server.SecretKeyEnv = cliproxySecretKeyEnv
		im.addSecret(cliproxySecretKeyEnv, "server.secret_key_env: seals the oauth credentials' tokens in the database",
			"new (CLIProxyAPI has none): 32 random bytes in base64, made with `openssl rand -base64 32`")
	}
}

// wildcard reports whether model matches a pattern of excluded-models,
// where '*' stands for any run of characters (CLIProxyAPI's "gemini-2.5-*",
// "*-preview", "*flash*").
func wildcard(pattern, model string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == model
	}
	if !strings.HasPrefix(model, parts[0]) {
		return false
	}
	rest := model[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

// without returns models less those an excluded-models pattern matches.
func without(models []cliproxyModel, patterns []string) []cliproxyModel {
	return slices.DeleteFunc(slices.Clone(models), func(m cliproxyModel) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { return wildcard(p, m.name) })
	})
}

// modelList reads the models list of parent's field name: entries {name,
// alias}, whose other fields describe the model to clients. A failed read
// is left in parent.
func (im *cliproxyImport) modelList(parent *object, name string) []cliproxyModel {
	var out []cliproxyModel
	for _, o := range parent.objects(name) {
		m := cliproxyModel{name: o.required("name"), alias: o.str("alias")}
		m.fork, _ = o.take("fork").(bool)
		o.rest(&im.report, "model metadata for CLIProxyAPI's model list and its translators: Sluice keeps none", nil)
		out = append(out, m)
	}
	return out
}
