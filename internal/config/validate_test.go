package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// baseYAML is a small valid catalog; each validation case breaks one thing.
const baseYAML = `
version: 1
server: {admin_token_env: SLUICE_ADMIN_TOKEN}
endpoints:
  - id: openai-main
    base_url: https://api.openai.com
    protocols: [openai.chat, openai.embeddings]
    models: [gpt-4o-mini, text-embedding-3-small]
  - id: anthropic-main
    base_url: https://api.anthropic.com
    protocols: [anthropic.messages]
accounts:
  - {id: org-1, cooldown: {base: 2s, max: 30s}}
credentials:
  - {id: openai-k1, account: org-1, secret_env: OPENAI_KEY_1, endpoints: [openai-main]}
  - {id: anthropic-k1, secret_env: ANTHROPIC_KEY_1, endpoints: [anthropic-main]}
models:
  - alias: fast
    deployments: [{model: gpt-4o-mini, endpoints: [openai-main]}]
  - alias: claude
    protocol: anthropic.messages
    deployments: [{model: claude-haiku-4-5, endpoints: [anthropic-main]}]
pools:
  - {id: background, accounts: [org-1, anthropic-k1]}
keys:
  - {id: web-app, secret_env: SLUICE_KEY_WEB, models: [fast]}
  - {id: batch, secret_env: SLUICE_KEY_BATCH, policy: {mode: pool, pool: background}}
`

// testEnv is the environment the validation tests run with.
var testEnv = map[string]string{
	"SLUICE_ADMIN_TOKEN": "admin-token-value-0001",
	"SLUICE_ADMIN_READ":  "admin-read-value-0001",
	"OPENAI_KEY_1":       "sk-openai-value-0001",
	"ANTHROPIC_KEY_1":    "sk-ant-value-0001",
	"SLUICE_KEY_WEB":     "sk-sluice-web-0001",
	"SLUICE_KEY_BATCH":   "sk-sluice-batch-0001",
	"EMPTY":              "",
	"BLANK":              "  \n",
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// base returns a fresh decoded, defaulted copy of baseYAML.
func base(t *testing.T) *Catalog {
	t.Helper()
	c, err := Decode([]byte(baseYAML))
	if err != nil {
		t.Fatalf("Decode(baseYAML): %v", err)
	}
	ApplyDefaults(c)
	return c
}

func TestValidateBase(t *testing.T) {
	if err := Validate(base(t), lookup(testEnv)); err != nil {
		t.Fatalf("Validate(base) = %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	emptyFile := writeFile(t, dir, "empty", " \n\t")
	missingFile := filepath.Join(dir, "missing")
	notRedisFile := writeFile(t, dir, "not-redis", "postgres://sluice:pw@db/sluice\n")

	tests := []struct {
		name string
		give func(c *Catalog)
		want string
	}{
		{"VersionMissing", func(c *Catalog) { c.Version = 0 }, "version: required; must be 1"},
		{"VersionWrong", func(c *Catalog) { c.Version = 2 }, "version: must be 1, got 2"},
		{"ListenNoPort", func(c *Catalog) { c.Server.Listen = "localhost" }, `server.listen: want host:port, got "localhost"`},
		{"AdminListenBadPort", func(c *Catalog) { c.Server.AdminListen = "127.0.0.1:99999" }, `server.admin_listen: invalid port "99999"`},
		{"AdminListenSameAsListen", func(c *Catalog) { c.Server.AdminListen = c.Server.Listen }, "server.admin_listen: must differ from server.listen"},
		{"JobsNegativeMaxAge", func(c *Catalog) { c.Server.Jobs.MaxAge = -1 }, "server.jobs: durations must be > 0"},
		{"JobsPollBackwards", func(c *Catalog) { c.Server.Jobs.MaxPollInterval, c.Server.Jobs.PollInterval = 1, 60 },
			"server.jobs.max_poll_interval: must be at least poll_interval (60ns)"},
		{"MaxBodyBytesNegative", func(c *Catalog) { c.Server.MaxBodyBytes = -1 }, "server.max_body_bytes: must be > 0"},
		{"MaxInflightBodyBytesBelowMaxBodyBytes", func(c *Catalog) { c.Server.MaxBodyBytes, c.Server.MaxInflightBodyBytes = 1<<20, 1<<19 },
			"server.max_inflight_body_bytes: must be at least max_body_bytes (1048576)"},
		{"AdminTokenUnset", func(c *Catalog) { c.Server.AdminTokenEnv = "NOPE" }, "server.admin_token_env: environment variable NOPE is not set or empty"},
		{"AdminTokenRoleMissing", func(c *Catalog) { c.Server.AdminTokens = []AdminToken{{ID: "ops", SecretEnv: "SLUICE_ADMIN_READ"}} },
			`server.admin_tokens[0].role: must be read or write, got ""`},
		{"AdminTokenRoleUnknown", func(c *Catalog) {
			c.Server.AdminTokens = []AdminToken{{ID: "ops", SecretEnv: "SLUICE_ADMIN_READ", Role: "admin"}}
		}, `server.admin_tokens[0].role: must be read or write, got "admin"`},
		{"AdminTokenIDMissing", func(c *Catalog) { c.Server.AdminTokens = []AdminToken{{SecretEnv: "SLUICE_ADMIN_READ", Role: "read"}} },
			"server.admin_tokens[0].id: required"},
		{"AdminTokenIDTakenByAdminTokenEnv", func(c *Catalog) {
			c.Server.AdminTokens = []AdminToken{{ID: "admin", SecretEnv: "SLUICE_ADMIN_READ", Role: "read"}}
		}, `server.admin_tokens[0].id: "admin" is the ID of the token server.admin_token_env names`},
		{"AdminTokenDuplicateID", func(c *Catalog) {
			c.Server.AdminTokens = []AdminToken{{ID: "ops", SecretEnv: "SLUICE_ADMIN_READ", Role: "read"}, {ID: "ops", SecretEnv: "OPENAI_KEY_1", Role: "write"}}
		}, `server.admin_tokens[1].id: duplicate id "ops" (first at server.admin_tokens[0])`},
		{"AdminTokenSecretUnset", func(c *Catalog) { c.Server.AdminTokens = []AdminToken{{ID: "ops", SecretEnv: "NOPE", Role: "read"}} },
			"server.admin_tokens[0].secret_env: environment variable NOPE is not set"},
		{"AdminTokenSecretMissing", func(c *Catalog) { c.Server.AdminTokens = []AdminToken{{ID: "ops", Role: "read"}} },
			"server.admin_tokens[0]: secret_env or secret_file is required"},
		{"AdminTokenSameSecretAsAdminTokenEnv", func(c *Catalog) {
			c.Server.AdminTokens = []AdminToken{{ID: "ops", SecretEnv: "SLUICE_ADMIN_TOKEN", Role: "read"}}
		}, "server.admin_tokens[0]: has the same secret as server.admin_token_env"},
		{"AdminTokensSameSecret", func(c *Catalog) {
			c.Server.AdminTokenEnv = ""
			c.Server.AdminTokens = []AdminToken{{ID: "a", SecretEnv: "SLUICE_ADMIN_READ", Role: "read"}, {ID: "b", SecretEnv: "SLUICE_ADMIN_READ", Role: "write"}}
		}, "server.admin_tokens[1]: has the same secret as server.admin_tokens[0]"},
		{"StateBackendUnknown", func(c *Catalog) { c.State.Backend = "etcd" }, `state.backend: must be memory or redis, got "etcd"`},
		{"RedisWithoutURL", func(c *Catalog) { c.State.Backend = "redis" }, "state.redis.url: required when state.backend is redis"},
		{"RedisURLScheme", func(c *Catalog) { c.State.Backend, c.State.Redis.URL = "redis", "127.0.0.1:6379" }, "state.redis.url: must be a redis://, rediss:// or unix:// URL"},
		{"DatabaseScheme", func(c *Catalog) { c.Database.URL = "mysql://db/sluice" }, "database.url: must start with sqlite://, postgres:// or postgresql://"},
		{"DatabaseSQLiteWithoutPath", func(c *Catalog) { c.Database.URL = "sqlite://" }, "database.url: sqlite:// needs a file path"},
		{"DatabaseURLAndURLEnv", func(c *Catalog) { c.Database.URLEnv = "DATABASE_URL" }, "database: set only one of url, url_env and url_file"},
		{"DatabaseURLEnvAndURLFile", func(c *Catalog) { c.Database = Database{URLEnv: "DATABASE_URL", URLFile: missingFile} },
			"database: set only one of url, url_env and url_file"},
		{"DatabaseURLEnvUnset", func(c *Catalog) { c.Database = Database{URLEnv: "NOPE"} }, "database.url_env: environment variable NOPE is not set"},
		{"DatabaseURLEnvEmpty", func(c *Catalog) { c.Database = Database{URLEnv: "BLANK"} }, "database.url_env: environment variable BLANK is empty"},
		{"DatabaseURLEnvScheme", func(c *Catalog) { c.Database = Database{URLEnv: "OPENAI_KEY_1"} },
			"database.url_env: must start with sqlite://, postgres:// or postgresql://"},
		{"DatabaseURLFileMissing", func(c *Catalog) { c.Database = Database{URLFile: missingFile} }, "database.url_file: open " + missingFile + ": no such file"},
		{"DatabaseURLFileEmpty", func(c *Catalog) { c.Database = Database{URLFile: emptyFile} }, "database.url_file: " + emptyFile + " is empty"},
		{"RedisURLAndURLFile", func(c *Catalog) {
			c.State = State{Backend: "redis", Redis: Redis{URL: "redis://cache", URLFile: emptyFile}}
		},
			"state.redis: set only one of url, url_env and url_file"},
		{"RedisURLEnvUnset", func(c *Catalog) { c.State = State{Backend: "redis", Redis: Redis{URLEnv: "NOPE"}} }, "state.redis.url_env: environment variable NOPE is not set"},
		{"RedisURLFileScheme", func(c *Catalog) { c.State = State{Backend: "redis", Redis: Redis{URLFile: notRedisFile}} },
			"state.redis.url_file: must be a redis://, rediss:// or unix:// URL"},
		{"ShutdownGraceNegative", func(c *Catalog) { c.Server.ShutdownGrace = -1 }, "server.shutdown_grace: must be > 0"},
		{"KeyStalenessNegative", func(c *Catalog) { c.Server.KeyStaleness = -1 }, "server.key_staleness: must be > 0"},

		{"EndpointDuplicateID", func(c *Catalog) { c.Endpoints[1].ID = "openai-main" }, `endpoints[1].id: duplicate id "openai-main" (first at endpoints[0])`},
		{"EndpointIDMissing", func(c *Catalog) { c.Endpoints[1].ID = "" }, "endpoints[1].id: required"},
		{"EndpointIDWithSlash", func(c *Catalog) { c.Endpoints[1].ID = "anthropic/main" }, `endpoints[1].id: "anthropic/main" may contain only letters, digits`},
		{"EndpointBaseURLRelative", func(c *Catalog) { c.Endpoints[0].BaseURL = "api.openai.com" }, "endpoints[0].base_url: must be an absolute http:// or https:// URL"},
		{"EndpointBaseURLScheme", func(c *Catalog) { c.Endpoints[0].BaseURL = "ftp://api.openai.com" }, "endpoints[0].base_url: must be an absolute http:// or https:// URL"},
		{"EndpointBaseURLMissing", func(c *Catalog) { c.Endpoints[0].BaseURL = "" }, "endpoints[0].base_url: required"},
		{"EndpointBaseURLUserInfo", func(c *Catalog) { c.Endpoints[0].BaseURL = "https://u:p@api.openai.com" }, "endpoints[0].base_url: must not contain user info"},
		{"EndpointNoProtocols", func(c *Catalog) { c.Endpoints[1].Protocols = nil }, "endpoints[1].protocols: must list at least one protocol"},
		{"EndpointUnknownProtocol", func(c *Catalog) { c.Endpoints[0].Protocols[1] = "openai.chatt" }, `endpoints[0].protocols[1]: unknown protocol "openai.chatt"`},
		{"EndpointBreakerFailures", func(c *Catalog) { c.Endpoints[0].Breaker.Failures = -1 }, "endpoints[0].breaker.failures: must be > 0"},

		{"AccountDuplicateID", func(c *Catalog) { c.Accounts = append(c.Accounts, c.Accounts[0]) }, `accounts[1].id: duplicate id "org-1" (first at accounts[0])`},
		{"AccountQuotaScope", func(c *Catalog) { c.Accounts[0].QuotaScope = "key" }, `accounts[0].quota_scope: must be account or credential, got "key"`},
		{"AccountMaxInflight", func(c *Catalog) { c.Accounts[0].MaxInflight = new(-1) }, "accounts[0].max_inflight: must be > 0"},
		{"AccountMaxInflightZero", func(c *Catalog) { c.Accounts[0].MaxInflight = new(0) },
			"accounts[0].max_inflight: must be > 0; leave it out for the default (2), or write a large number (e.g. 1000000) to mean uncapped"},
		{"OwnAccountCredentialMaxInflightZero", func(c *Catalog) { c.Credentials[1].MaxInflight = new(0) },
			"credentials[1].max_inflight: must be > 0; leave it out for the default (2)"},
		{"AccountRPM", func(c *Catalog) { c.Accounts[0].RPM = -1 }, "accounts[0].rpm: must be >= 0"},
		{"AccountTPM", func(c *Catalog) { c.Accounts[0].TPM = -1 }, "accounts[0].tpm: must be >= 0"},
		{"AccountCooldownBaseAboveMax", func(c *Catalog) { c.Accounts[0].Cooldown.Base = c.Accounts[0].Cooldown.Max + 1 }, "accounts[0].cooldown.base: 30.000000001s exceeds cooldown.max 30s"},

		{"CredentialDuplicateID", func(c *Catalog) { c.Credentials[1].ID = "openai-k1" }, `credentials[1].id: duplicate id "openai-k1" (first at credentials[0])`},
		{"CredentialUnknownAccount", func(c *Catalog) { c.Credentials[0].Account = "org-9" }, `credentials[0].account: unknown account "org-9"`},
		{"CredentialOwnAccountClashes", func(c *Catalog) { c.Credentials[1].ID = "org-1" }, `credentials[1].account: required: id "org-1" is also a declared account`},
		{"CredentialNoEndpoints", func(c *Catalog) { c.Credentials[0].Endpoints = nil }, "credentials[0].endpoints: must list at least one endpoint"},
		{"CredentialUnknownEndpoint", func(c *Catalog) { c.Credentials[0].Endpoints = []string{"openai-main", "nowhere"} }, `credentials[0].endpoints[1]: unknown endpoint "nowhere"`},
		{"CredentialNoSecret", func(c *Catalog) { c.Credentials[0].SecretEnv = "" }, "credentials[0]: secret_env or secret_file is required"},
		{"CredentialTwoSecrets", func(c *Catalog) { c.Credentials[0].SecretFile = emptyFile }, "credentials[0]: set only one of secret_env and secret_file"},
		{"CredentialEnvUnset", func(c *Catalog) { c.Credentials[0].SecretEnv = "OPENAI_KEY_9" }, "credentials[0].secret_env: environment variable OPENAI_KEY_9 is not set"},
		{"CredentialEnvEmpty", func(c *Catalog) { c.Credentials[0].SecretEnv = "EMPTY" }, "credentials[0].secret_env: environment variable EMPTY is empty"},
		{"CredentialEnvBlank", func(c *Catalog) { c.Credentials[0].SecretEnv = "BLANK" }, "credentials[0].secret_env: environment variable BLANK is empty"},
		{"CredentialFileMissing", func(c *Catalog) { c.Credentials[0].SecretEnv, c.Credentials[0].SecretFile = "", missingFile }, "credentials[0].secret_file: open " + missingFile + ": no such file or directory"},
		{"CredentialFileEmpty", func(c *Catalog) { c.Credentials[0].SecretEnv, c.Credentials[0].SecretFile = "", emptyFile }, "credentials[0].secret_file: " + emptyFile + " is empty"},
		{"CredentialFileIsDirectory", func(c *Catalog) { c.Credentials[0].SecretEnv, c.Credentials[0].SecretFile = "", dir }, "credentials[0].secret_file: read " + dir + ": is a directory"},
		{"CredentialMaxInflight", func(c *Catalog) { c.Credentials[0].MaxInflight = new(-1) }, "credentials[0].max_inflight: must be >= 0"},

		{"AliasDuplicate", func(c *Catalog) { c.Models[1].Alias = "fast" }, `models[1].alias: duplicate alias "fast" (first at models[0])`},
		{"AliasMissing", func(c *Catalog) { c.Models[1].Alias = "" }, "models[1].alias: required"},
		{"AliasUnknownProtocol", func(c *Catalog) { c.Models[0].Protocol = "openai.completions" }, `models[0].protocol: unknown protocol "openai.completions"`},
		{"AliasNoDeployments", func(c *Catalog) { c.Models[0].Deployments = nil }, "models[0].deployments: must list at least one deployment"},
		{"DeploymentModelMissing", func(c *Catalog) { c.Models[1].Deployments[0].Model = "" }, "models[1].deployments[0].model: required"},
		{"DeploymentNoEndpoints", func(c *Catalog) { c.Models[0].Deployments[0].Endpoints = nil }, "models[0].deployments[0].endpoints: must list at least one endpoint"},
		{"DeploymentUnknownEndpoint", func(c *Catalog) { c.Models[0].Deployments[0].Endpoints[0] = "azure" }, `models[0].deployments[0].endpoints[0]: unknown endpoint "azure"`},
		{"DeploymentWeightNegative", func(c *Catalog) { c.Models[0].Deployments[0].Weight = -3 }, "models[0].deployments[0].weight: must be > 0"},
		{"DeploymentPriorityNegative", func(c *Catalog) { c.Models[0].Deployments[0].Priority = -1 }, "models[0].deployments[0].priority: must be >= 0"},
		{"DeploymentProtocolMismatch", func(c *Catalog) { c.Models[1].Deployments[0].Endpoints[0] = "openai-main" }, `models[1].deployments[0].endpoints[0]: endpoint "openai-main" does not speak anthropic.messages`},
		{"AliasWithoutProtocolOnEmbeddings", func(c *Catalog) { c.Endpoints[1].Protocols, c.Models[1].Protocol = []string{"openai.embeddings"}, "" },
			`models[1].deployments[0].endpoints[0]: endpoint "anthropic-main" speaks none of [openai.chat openai.responses anthropic.messages gemini.generate], and the alias names no protocol (set models[].protocol for an embeddings or job alias)`},
		{"DeploymentModelNotInCatalog", func(c *Catalog) { c.Models[0].Deployments[0].Model = "gpt-5" }, `models[0].deployments[0].endpoints[0]: endpoint "openai-main" does not list model "gpt-5"`},

		{"PoolDuplicateID", func(c *Catalog) { c.Pools = append(c.Pools, c.Pools[0]) }, `pools[1].id: duplicate id "background" (first at pools[0])`},
		{"PoolNoAccounts", func(c *Catalog) { c.Pools[0].Accounts = nil }, "pools[0].accounts: must list at least one account"},
		{"PoolUnknownAccount", func(c *Catalog) { c.Pools[0].Accounts[1] = "org-9" }, `pools[0].accounts[1]: unknown account "org-9"`},
		{"PoolStrategy", func(c *Catalog) { c.Pools[0].Strategy = "random" }, `pools[0].strategy: must be one of [round-robin fill-first weighted least-inflight affinity], got "random"`},
		{"PoolAffinityWithoutStrategy", func(c *Catalog) { c.Pools[0].Affinity.TTL = Duration(time.Minute) }, `pools[0].affinity: is read only with strategy affinity, not "round-robin"`},
		{"PoolAffinityFallbackAffinity", func(c *Catalog) {
			c.Pools[0].Strategy, c.Pools[0].Affinity = "affinity", Affinity{TTL: Duration(time.Minute), FallbackStrategy: "affinity"}
		}, `pools[0].affinity.fallback_strategy: must be one of [round-robin fill-first weighted least-inflight] (it orders the requests without a seed), got "affinity"`},
		{"ModelStrategy", func(c *Catalog) { c.Models[0].Strategy = "random" }, `models[0].strategy: must be one of [round-robin fill-first weighted least-inflight affinity], got "random"`},
		{"ModelAffinityWaitClass", func(c *Catalog) {
			c.Models[0].Strategy = "affinity"
			c.Models[0].Affinity = Affinity{TTL: Duration(time.Minute), FallbackStrategy: "round-robin", Wait: map[string]Duration{"urgent": 0}}
		}, `models[0].affinity.wait.urgent: unknown priority class`},
		{"ModelAffinityTTL", func(c *Catalog) {
			c.Models[0].Strategy, c.Models[0].Affinity = "affinity", Affinity{FallbackStrategy: "round-robin"}
		}, `models[0].affinity.ttl: must be positive`},
		{"PolicyPreferredWithoutFallback", func(c *Catalog) { c.Keys[0].Policy = Policy{Mode: "preferred", Accounts: []string{"org-1"}} }, `keys[0].policy.fallback: required with mode preferred: a pool ID, or "any" for every account`},
		{"PolicyWaitNegative", func(c *Catalog) {
			c.Keys[0].Policy = Policy{Mode: "preferred", Accounts: []string{"org-1"}, Fallback: "any", Wait: -1}
		}, `keys[0].policy.wait: must be >= 0`},
		{"PolicyWaitIgnored", func(c *Catalog) { c.Keys[1].Policy.Wait = sluice.Duration(time.Second) }, "keys[1].policy.wait: only used with mode preferred"},
		{"PoolRPM", func(c *Catalog) { c.Pools[0].RPM = -1 }, "pools[0].rpm: must be >= 0"},

		{"KeyDuplicateID", func(c *Catalog) { c.Keys[1].ID = "web-app" }, `keys[1].id: duplicate id "web-app" (first at keys[0])`},
		{"KeyNoSecret", func(c *Catalog) { c.Keys[0].SecretEnv = "" }, "keys[0]: secret_env or secret_file is required"},
		{"KeyTwoSecrets", func(c *Catalog) { c.Keys[0].SecretFile = emptyFile }, "keys[0]: set only one of secret_env and secret_file"},
		{"KeyEnvUnset", func(c *Catalog) { c.Keys[0].SecretEnv = "SLUICE_KEY_NOPE" }, "keys[0].secret_env: environment variable SLUICE_KEY_NOPE is not set"},
		{"KeyFileMissing", func(c *Catalog) { c.Keys[0].SecretEnv, c.Keys[0].SecretFile = "", missingFile }, "keys[0].secret_file: open " + missingFile},
		{"KeySameSecret", func(c *Catalog) { c.Keys[1].SecretEnv = c.Keys[0].SecretEnv }, "keys[1]: has the same secret as keys[0]"},
		{"KeyUnknownAlias", func(c *Catalog) { c.Keys[0].Models = []string{"fast", "fats"} }, `keys[0].models[1]: unknown model alias "fats"`},
		{"KeyPriority", func(c *Catalog) { c.Keys[0].Priority = "urgent" }, `keys[0].priority: must be one of [interactive standard background], got "urgent"`},
		{"TenantDuplicate", func(c *Catalog) { c.Tenants = []Tenant{{ID: "t"}, {ID: "t"}} }, `tenants[1].id: duplicate`},
		{"TenantDailyNegative", func(c *Catalog) { c.Tenants = []Tenant{{ID: "t", Limits: Limits{DailyTokens: -1}}} }, `tenants[0].limits.daily_tokens: must be >= 0`},
		{"ModelLimitNegative", func(c *Catalog) { c.Models[0].Limits.MaxInflight = -1 }, `models[0].limits.max_inflight: must be >= 0`},
		{"MaxOutputTokensNegative", func(c *Catalog) { c.Models[0].MaxOutputTokens = -1 }, `models[0].max_output_tokens: must be >= 0`},
		{"MaxOutputTokensEmbeddings", func(c *Catalog) { c.Models[0].Protocol, c.Models[0].MaxOutputTokens = "openai.embeddings", 1000 },
			`models[0].max_output_tokens: openai.embeddings requests ask for no output tokens`},
		{"KeyUnknownTask", func(c *Catalog) { c.Keys[0].Task = "nope" }, `keys[0].task: unknown task type "nope"`},
		{"KeyUnknownTasks", func(c *Catalog) { c.Keys[0].Tasks = []string{"nope"} }, `keys[0].tasks[0]: unknown task type "nope"`},
		{"UserLimitNegative", func(c *Catalog) { c.Keys[0].UserLimits.RPM = -1 }, `keys[0].user_limits.rpm: must be >= 0`},
		{"UnknownPriorityClass", func(c *Catalog) { c.Server.Priorities = map[string]Priority{"urgent": {}} }, `server.priorities.urgent: unknown priority class`},
		{"ReserveForBackground", func(c *Catalog) {
			c.Accounts[0].MaxInflight = new(4)
			c.Accounts[0].Reserve = map[string]int{"background": 1}
		}, `accounts[0].reserve.background: only interactive and standard`},
		{"ReserveNegative", func(c *Catalog) {
			c.Accounts[0].MaxInflight = new(4)
			c.Accounts[0].Reserve = map[string]int{"interactive": -1}
		}, `accounts[0].reserve.interactive: must be >= 0`},
		{"ReserveAboveCap", func(c *Catalog) {
			c.Accounts[0].MaxInflight = new(2)
			c.Accounts[0].Reserve = map[string]int{"interactive": 2}
		}, `accounts[0].reserve: reserves 2 slots; needs max_inflight above that`},
		{"KeyLimits", func(c *Catalog) { c.Keys[0].Limits.MaxInflight = -1 }, "keys[0].limits.max_inflight: must be >= 0"},
		{"DefaultKeyPathsUnknown", func(c *Catalog) { c.Server.DefaultKeyPaths = []string{"chat", "images"} },
			`server.default_key_paths[1]: must be one of [chat embeddings fal gemini gemini_embeddings messages responses responses_compact videos], got "images"`},
		{"ForwardCallerKey", func(c *Catalog) { c.Endpoints[0].ForwardHeaders = []string{"x-stainless-*", "Authorization"} },
			"endpoints[0].forward_headers[1]: Authorization is never forwarded: the caller's credentials to Sluice"},
		{"ForwardGoogleKey", func(c *Catalog) { c.Endpoints[0].ForwardHeaders = []string{"x-goog-api-key"} }, "endpoints[0].forward_headers[0]: x-goog-api-key is never forwarded"},
		{"ForwardSluiceHeaders", func(c *Catalog) { c.Endpoints[0].ForwardHeaders = []string{"X-Sluice-*"} }, "endpoints[0].forward_headers[0]: X-Sluice-* is never forwarded"},
		{"ForwardHopByHop", func(c *Catalog) { c.Endpoints[1].ForwardHeaders = []string{"connection"} }, "endpoints[1].forward_headers[0]: connection is never forwarded"},
		{"ForwardContentLength", func(c *Catalog) { c.Endpoints[0].ForwardHeaders = []string{"content-length"} }, "endpoints[0].forward_headers[0]: content-length is never forwarded"},
		{"ForwardNotAName", func(c *Catalog) { c.Endpoints[0].ForwardHeaders = []string{"x team"} },
			`endpoints[0].forward_headers[0]: "x team" is not a header name (a trailing * makes it a prefix: x-stainless-*)`},
		{"ForwardStarInside", func(c *Catalog) { c.Endpoints[0].ForwardHeaders = []string{"x-*-id"} }, `endpoints[0].forward_headers[0]: "x-*-id" is not a header name`},
		{"DropNeverForwarded", func(c *Catalog) { c.Endpoints[0].DropHeaders = []string{"x-api-key"} }, "endpoints[0].drop_headers[0]: x-api-key is never forwarded"},
		{"HeadersOnJobsEndpoint", func(c *Catalog) {
			c.Endpoints[1].Protocols, c.Endpoints[1].DropHeaders = []string{"openai.videos", "fal.queue"}, []string{"user-agent"}
		}, "endpoints[1]: forward_headers and drop_headers change model requests; the job requests of [openai.videos fal.queue] send no caller's header"},
		{"DropNotAName", func(c *Catalog) { c.Endpoints[0].DropHeaders = []string{""} }, `endpoints[0].drop_headers[0]: "" is not a header name`},
		{"KeyTenantControl", func(c *Catalog) { c.Keys[0].Tenant = "acme\x07" }, `keys[0].tenant: "acme\a" may contain only letters, digits, '.', '_' and '-'`},
		{"KeyTenantLong", func(c *Catalog) { c.Keys[0].Tenant = strings.Repeat("t", MaxID+1) }, `keys[0].tenant: is longer than 128 bytes`},
		{"KeyNameLong", func(c *Catalog) { c.Keys[0].Name = strings.Repeat("n", 200<<10) }, `keys[0].name: is longer than 256 bytes`},
		{"KeyNameControl", func(c *Catalog) { c.Keys[0].Name = "web\nadmin" }, `keys[0].name: must be printable UTF-8 text, without control characters`},
		{"KeyLabelsTooMany", func(c *Catalog) {
			c.Keys[0].Labels = map[string]string{}
			for i := range 10_000 {
				c.Keys[0].Labels[fmt.Sprint("l", i)] = "v"
			}
		}, `keys[0].labels: at most 64 labels, got 10000`},
		{"KeyLabelValueControl", func(c *Catalog) { c.Keys[0].Labels = map[string]string{"team": "a\x00b"} }, `keys[0].labels.team: value must be printable UTF-8 text`},
		{"KeyIDLong", func(c *Catalog) { c.Keys[0].ID = strings.Repeat("k", MaxID+1) }, `keys[0].id: is longer than 128 bytes`},
		{"KeyExpiresAt", func(c *Catalog) { c.Keys[0].ExpiresAt = "2030-01-01" }, `keys[0].expires_at: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got "2030-01-01"`},
		{"PolicyMode", func(c *Catalog) { c.Keys[0].Policy.Mode = "sticky" }, `keys[0].policy.mode: must be one of [default strict preferred pool], got "sticky"`},
		{"PolicyStrictWithoutAccounts", func(c *Catalog) { c.Keys[0].Policy.Mode = "strict" }, "keys[0].policy.accounts: must list at least one account"},
		{"PolicyStrictUnknownAccount", func(c *Catalog) { c.Keys[0].Policy = Policy{Mode: "strict", Accounts: []string{"org-9"}} }, `keys[0].policy.accounts[0]: unknown account "org-9"`},
		{"PolicyPreferredUnknownAccount", func(c *Catalog) { c.Keys[0].Policy = Policy{Mode: "preferred", Accounts: []string{"org-1", "org-9"}} }, `keys[0].policy.accounts[1]: unknown account "org-9"`},
		{"PolicyPreferredUnknownFallback", func(c *Catalog) {
			c.Keys[0].Policy = Policy{Mode: "preferred", Accounts: []string{"org-1"}, Fallback: "paid"}
		}, `keys[0].policy.fallback: unknown pool "paid"`},
		{"PolicyPoolWithoutPool", func(c *Catalog) { c.Keys[1].Policy.Pool = "" }, "keys[1].policy.pool: required with mode pool"},
		{"PolicyPoolUnknownPool", func(c *Catalog) { c.Keys[1].Policy.Pool = "paid" }, `keys[1].policy.pool: unknown pool "paid"`},
		{"PolicyAccountsIgnored", func(c *Catalog) { c.Keys[1].Policy.Accounts = []string{"org-1"} }, "keys[1].policy.accounts: only used with mode strict or preferred"},
		{"PolicyPoolIgnored", func(c *Catalog) { c.Keys[0].Policy.Pool = "background" }, "keys[0].policy.pool: only used with mode pool"},
		{"PolicyFallbackIgnored", func(c *Catalog) { c.Keys[1].Policy.Fallback = "background" }, "keys[1].policy.fallback: only used with mode preferred"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base(t)
			tt.give(c)
			got := errString(Validate(c, lookup(testEnv)))
			if !strings.Contains(got, tt.want) {
				t.Errorf("Validate error =\n%s\nwant it to contain\n%s", got, tt.want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	dir := t.TempDir()
	secretFile := writeFile(t, dir, "secret", "  sk-from-file-0001\n")
	redisURLFile := writeFile(t, dir, "redis-url", "rediss://:pw@cache:6380/0\n")
	env := map[string]string{"DATABASE_URL": " postgres://sluice:pw@db:5432/sluice\n"}
	maps.Copy(env, testEnv)

	tests := []struct {
		name string
		give func(c *Catalog)
	}{
		{"SecretFile", func(c *Catalog) { c.Credentials[0].SecretEnv, c.Credentials[0].SecretFile = "", secretFile }},
		{"ImplicitAccountInPolicy", func(c *Catalog) { c.Keys[0].Policy = Policy{Mode: "strict", Accounts: []string{"anthropic-k1"}} }},
		{"PreferredWithFallback", func(c *Catalog) {
			c.Keys[0].Policy = Policy{Mode: "preferred", Accounts: []string{"org-1"}, Fallback: "background", Wait: sluice.Duration(time.Second)}
		}},
		{"PreferredFallbackAny", func(c *Catalog) {
			c.Keys[0].Policy = Policy{Mode: "preferred", Accounts: []string{"org-1"}, Fallback: "any"}
		}},
		{"StrategiesBuilt", func(c *Catalog) {
			c.Models[0].Strategy, c.Pools[0].Strategy = "least-inflight", "weighted"
			c.Models[1].Strategy = "fill-first"
		}},
		{"EndpointWithoutModelCatalog", func(c *Catalog) { c.Models[1].Deployments[0].Model = "claude-anything" }},
		{"MaxOutputTokensAnthropic", func(c *Catalog) { c.Models[1].MaxOutputTokens = 8192 }},
		{"Postgres", func(c *Catalog) { c.Database.URL = "postgresql://sluice@db:5432/sluice" }},
		{"Redis", func(c *Catalog) { c.State = State{Backend: "redis", Redis: Redis{URL: "rediss://cache:6380/0"}} }},
		{"DatabaseURLEnv", func(c *Catalog) { c.Database = Database{URLEnv: "DATABASE_URL"} }},
		{"RedisURLFile", func(c *Catalog) { c.State = State{Backend: "redis", Redis: Redis{URLFile: redisURLFile}} }},
		{"ShutdownGrace", func(c *Catalog) { c.Server.ShutdownGrace = Duration(time.Second) }},
		{"ListenAnyHost", func(c *Catalog) { c.Server.Listen = ":8080" }},
		{"ListenEphemeralPorts", func(c *Catalog) { c.Server.Listen, c.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0" }},
		{"ExpiresAtWithOffset", func(c *Catalog) { c.Keys[0].ExpiresAt = "2030-01-01T00:00:00+02:00" }},
		{"NoAdminToken", func(c *Catalog) { c.Server.AdminTokenEnv = "" }},
		{"DefaultKeyPaths", func(c *Catalog) { c.Server.DefaultKeyPaths = []string{"chat", "responses_compact"} }},
		// A prefix wider than the never-forwarded headers forwards the rest.
		{"ForwardHeaderPatterns", func(c *Catalog) {
			c.Endpoints[0].ForwardHeaders = []string{"x-*", "*", "session_id", "X-Codex-Turn-Metadata"}
		}},
		{"DropHeaderPatterns", func(c *Catalog) { c.Endpoints[1].DropHeaders = []string{"user-agent", "x-stainless-*", "*"} }},
		{"AdminTokensWithAdminTokenEnv", func(c *Catalog) {
			c.Server.AdminTokens = []AdminToken{{ID: "dashboard", SecretEnv: "SLUICE_ADMIN_READ", Role: "read"}, {ID: "deploy", SecretFile: secretFile, Role: "write"}}
		}},
		{"AdminTokensOnlyMayUseIDAdmin", func(c *Catalog) {
			c.Server.AdminTokenEnv = ""
			c.Server.AdminTokens = []AdminToken{{ID: "admin", SecretEnv: "SLUICE_ADMIN_READ", Role: "write"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base(t)
			tt.give(c)
			if err := Validate(c, lookup(env)); err != nil {
				t.Errorf("Validate = %v, want nil", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := base(t)
	c.Version = 3
	c.Endpoints[0].Protocols = append(c.Endpoints[0].Protocols, "grpc")
	c.Credentials[0].Account = "org-9"
	c.Models[0].Deployments[0].Weight = -1
	c.Pools[0].Strategy = "random"
	c.Keys[0].Priority = "urgent"

	err := Validate(c, lookup(testEnv))
	want := []string{
		"version: must be 1, got 3",
		`endpoints[0].protocols[2]: unknown protocol "grpc"`,
		`credentials[0].account: unknown account "org-9"`,
		"models[0].deployments[0].weight: must be > 0",
		`pools[0].strategy: must be one of`,
		`keys[0].priority: must be one of`,
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Validate = %v, want errors.Join of %d problems", err, len(want))
	}
	got := joined.Unwrap()
	if len(got) != len(want) {
		t.Errorf("Validate reported %d problems, want %d:\n%v", len(got), len(want), err)
	}
	for i := range min(len(got), len(want)) {
		if !strings.HasPrefix(got[i].Error(), want[i]) {
			t.Errorf("problem #%d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

// TestErrorsNeverContainSecrets breaks every rule that touches a secret or a
// URL that can carry a password, and checks no such value is quoted back.
func TestErrorsNeverContainSecrets(t *testing.T) {
	const secret = "sk-live-DO-NOT-PRINT-4242"
	dir := t.TempDir()
	file := writeFile(t, dir, "secret", secret+"\n")
	env := map[string]string{"A": secret, "B": secret, "C": secret, "ADMIN": secret}

	c := base(t)
	c.Server.AdminTokenEnv = "ADMIN"
	c.Server.AdminTokens = []AdminToken{{ID: "ops", SecretEnv: "A", Role: "read"}, {ID: "ci", SecretFile: file, Role: "write"}}
	c.Database.URL = "postgres://sluice:" + secret + "@db:5432/%zz"
	c.State = State{Backend: "redis", Redis: Redis{URL: "http://:" + secret + "@cache:6379"}}
	c.Endpoints[0].BaseURL = "https://user:" + secret + "@api.openai.com"
	c.Endpoints[1].BaseURL = "https://api.anthropic.com/%" + secret
	c.Credentials[0].SecretEnv = "A"
	c.Credentials[0].SecretFile = file
	c.Credentials[1].SecretEnv, c.Credentials[1].SecretFile = "", file
	c.Credentials[1].Account = "org-9"
	c.Keys[0].SecretEnv = "B"
	c.Keys[1].SecretEnv = "C" // same value as keys[0]

	// URLs read from the environment or a file are quoted no more than written ones.
	d := *c
	d.Database = Database{URLEnv: "A"}
	d.State = State{Backend: "redis", Redis: Redis{URLFile: writeFile(t, dir, "redis-url", "http://:"+secret+"@cache:6379\n")}}

	for _, err := range []error{
		Validate(c, lookup(env)),
		Validate(&d, lookup(env)),
		secretErr(c.Credentials[0].Secret(lookup(env))),
		secretErr((&Key{ID: "k", SecretFile: dir}).Secret(nil)),
		secretErr((&Database{URLFile: dir}).LoadURL(nil)),
	} {
		if err == nil {
			t.Fatal("got no error, want one")
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "DO-NOT-PRINT") {
			t.Errorf("error quotes a secret:\n%v", err)
		}
	}
}

func secretErr(_ string, err error) error { return err }

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "secret", "\n  sk-from-file-0001 \n")
	env := lookup(map[string]string{"OPENAI_KEY_1": " sk-from-env-0001"})

	tests := []struct {
		name    string
		give    Credential
		want    string
		wantErr string
	}{
		{"Env", Credential{ID: "c", SecretEnv: "OPENAI_KEY_1"}, " sk-from-env-0001", "<nil>"},
		{"FileTrimmed", Credential{ID: "c", SecretFile: file}, "sk-from-file-0001", "<nil>"},
		{"EnvUnset", Credential{ID: "c", SecretEnv: "NOPE"}, "", `credential "c": secret_env: environment variable NOPE is not set`},
		{"FileMissing", Credential{ID: "c", SecretFile: filepath.Join(dir, "nope")}, "", `credential "c": secret_file: open ` + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"Neither", Credential{ID: "c"}, "", `credential "c": secret_env or secret_file is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give.Secret(env)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("Secret() = %q, %v; want %q, %s", got, err, tt.want, tt.wantErr)
			}
		})
	}

	k := Key{ID: "web-app", SecretEnv: "NOPE"}
	if _, err := k.Secret(env); errString(err) != `key "web-app": secret_env: environment variable NOPE is not set` {
		t.Errorf("Key.Secret() error = %v", err)
	}
}

func TestLoadURL(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "database-url", "postgres://sluice:from-file@db/sluice\n")
	env := lookup(map[string]string{"DATABASE_URL": "postgres://sluice:from-env@db/sluice\n"})

	tests := []struct {
		name    string
		give    Database
		want    string
		wantErr string
	}{
		{"URL", Database{URL: "sqlite://data/x.db"}, "sqlite://data/x.db", "<nil>"},
		{"EnvTrimmed", Database{URLEnv: "DATABASE_URL"}, "postgres://sluice:from-env@db/sluice", "<nil>"},
		{"FileTrimmed", Database{URLFile: file}, "postgres://sluice:from-file@db/sluice", "<nil>"},
		{"EnvUnset", Database{URLEnv: "NOPE"}, "", "url_env: environment variable NOPE is not set"},
		{"FileMissing", Database{URLFile: filepath.Join(dir, "nope")}, "", "url_file: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"Two", Database{URL: "sqlite://x", URLEnv: "DATABASE_URL"}, "", "set only one of url, url_env and url_file"},
		{"None", Database{}, "", "url: required (or url_env, or url_file)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give.LoadURL(env)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("LoadURL() = %q, %v; want %q, %s", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestSecretFileTooLarge(t *testing.T) {
	f := writeFile(t, t.TempDir(), "big", strings.Repeat("x", maxSecretFile+1))
	_, err := (&Credential{ID: "c", SecretFile: f}).Secret(nil)
	if want := "is larger than 64 KiB"; !strings.Contains(errString(err), want) {
		t.Errorf("Secret() error = %v, want it to contain %q", err, want)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An endpoint that does not speak an alias's protocol serves it when serves
// says it can (a translator between the two), and only then.
func TestValidateServingTranslatedPair(t *testing.T) {
	c := base(t)
	c.Models[1].Deployments[0].Endpoints[0] = "openai-main" // an anthropic.messages alias on an openai.chat endpoint
	c.Models[1].Deployments[0].Model = "gpt-4o-mini"
	lookupEnv := func(k string) (string, bool) { v, ok := testEnv[k]; return v, ok }
	translates := func(caller, upstream sluice.Protocol) bool {
		return caller == upstream || caller == sluice.ProtocolAnthropic && upstream == sluice.ProtocolOpenAIChat
	}
	if err := ValidateServing(c, lookupEnv, translates); err != nil {
		t.Errorf("ValidateServing with the pair translated = %v, want nil", err)
	}
	if err := Validate(c, lookupEnv); err == nil || !strings.Contains(err.Error(), "does not speak anthropic.messages") {
		t.Errorf("Validate (same protocol only) = %v, want the endpoint refused", err)
	}
}
