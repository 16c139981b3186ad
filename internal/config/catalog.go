package config

import "github.com/sluicehq/sluice"

// Catalog is the decoded YAML catalog (docs/catalog-reference.md) as plain data. Decode
// fills it strictly; Validate checks it. Nothing here is resolved: secrets
// are still environment variable names and references are still IDs.
type Catalog struct {
	Version     int          `yaml:"version"`
	Server      Server       `yaml:"server"`
	State       State        `yaml:"state"`
	Database    Database     `yaml:"database"`
	Endpoints   []Endpoint   `yaml:"endpoints"`
	Accounts    []Account    `yaml:"accounts"`
	Credentials []Credential `yaml:"credentials"`
	Models      []Model      `yaml:"models"`
	Pools       []Pool       `yaml:"pools"`
	Keys        []Key        `yaml:"keys"`
	Tenants     []Tenant     `yaml:"tenants"`
	TaskTypes   []TaskType   `yaml:"task_types"`
	Billing     Billing      `yaml:"billing"`
	Profiles    []Profile    `yaml:"profiles"` // quota profiles for end users (profiles.go)
	Events      Events       `yaml:"events"`   // usage events on NATS JetStream (events.go)
	Telemetry   Telemetry    `yaml:"telemetry"`
	Redaction   []Redaction  `yaml:"redaction"` // sensitive-data policies (redaction.go)
}

// TaskType is a kind of work (for example "summarize" or "batch-embed")
// with limits shared by every request that declares it.
type TaskType struct {
	ID     string `yaml:"id"`
	Limits Limits `yaml:"limits"`
	// CostBudgetDay bounds what the requests of the task type may cost the
	// platform upstream per UTC day (billing.costs); once spent, they are
	// refused with billing_quota_exhausted. 0 = no budget.
	CostBudgetDay Money `yaml:"cost_budget_day"`
	// Pool is the pool (pools[].id) the task type's requests route through
	// when their key's policy is default: its accounts, strategy and
	// limits, before a profile's pool (task_policy.go). "" = none.
	Pool string `yaml:"pool"`
	// Priority is the class of the task type's requests by quota profile
	// (task_policy.go); absent: the key's priority.
	Priority TaskPriority `yaml:"priority"`
}

// Tenant holds the limits shared by every key of one tenant.
type Tenant struct {
	ID     string `yaml:"id"`
	Weight int    `yaml:"weight"` // share against other tenants of a class while waiting; default 1
	Limits Limits `yaml:"limits"`
	// Budgets bound what the tenant's keys are billed per UTC day and month.
	Budgets Budgets `yaml:"budgets"`
	// DefaultProfile is the quota profile (profiles[].id) of the tenant's
	// end users who have no entitlement valid now; "" = none.
	DefaultProfile string `yaml:"default_profile"`
	// Redaction is the sensitive-data policy (redaction[].id) applied to
	// the requests of every key of the tenant; "" = none.
	Redaction string `yaml:"redaction"`
}

// Server configures the listeners and request-wide limits.
type Server struct {
	Listen        string   `yaml:"listen"`          // data plane, default 127.0.0.1:8080
	AdminListen   string   `yaml:"admin_listen"`    // admin API, default 127.0.0.1:8081
	AdminTokenEnv string   `yaml:"admin_token_env"` // env var holding the admin token: one write token with ID "admin"
	MaxBodyBytes  int64    `yaml:"max_body_bytes"`  // default 4 MiB
	BodyTimeout   Duration `yaml:"body_timeout"`    // longest a caller may take to send its body; default 30s
	WaitTimeout   Duration `yaml:"wait_timeout"`    // longest a request waits for capacity; default 30s
	// MaxInflightBodyBytes bounds the request bodies held in memory at
	// once, across the server: a declared length is counted whole when its
	// reading starts, a chunked body as it grows, each until its request
	// ends. A body that would pass it is refused with 503 server_busy.
	// Default 256 MiB (or max_body_bytes, when larger).
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`
	// ShutdownGrace is how long running requests may go on after SIGTERM;
	// streams still open then end with an error event. Default 60s.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// KeyStaleness bounds how old this replica's view of the stored keys
	// and suspensions (re-read from the database every second) may be:
	// past it, every data-plane request gets 503 state_unavailable rather
	// than be judged by an old view. Default 30s.
	KeyStaleness Duration `yaml:"key_staleness"`
	// Priorities tune each priority class by name (interactive, standard,
	// background); a class left out waits up to WaitTimeout.
	Priorities map[string]Priority `yaml:"priorities"`
	Timeouts   Timeouts            `yaml:"timeouts"` // defaults for every endpoint
	Jobs       Jobs                `yaml:"jobs"`

	// DefaultKeyPaths are the paths (keys[].paths names) of a key that
	// lists none, the admin API's keys included: set, every key is denied
	// the paths it does not list. Empty (the default): a key that lists no
	// paths may call every path.
	DefaultKeyPaths []string `yaml:"default_key_paths"`

	// AdminTokens are named admin bearer tokens, each with a role. With
	// neither these nor AdminTokenEnv, the admin token is
	// $SLUICE_ADMIN_TOKEN, else one generated at startup.
	AdminTokens []AdminToken `yaml:"admin_tokens"`

	// SecretKeyEnv or SecretKeyFile (one of them) holds the key, 32 bytes in
	// base64, that encrypts the secrets Sluice keeps in the database (the
	// tokens of oauth credentials). Required with an oauth credential unless
	// the database is an SQLite database in memory.
	SecretKeyEnv  string `yaml:"secret_key_env"`
	SecretKeyFile string `yaml:"secret_key_file"`
}

// AdminToken is one named bearer token of the admin API. The audit log
// records its ID, never its secret, as who made a change.
type AdminToken struct {
	ID         string `yaml:"id"`
	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
	Role       string `yaml:"role"` // read: GET only; write: everything
}

// Admin token roles.
const (
	RoleRead  = "read"
	RoleWrite = "write"
)

// AdminTokenEnvID is the ID of the token server.admin_token_env names.
const AdminTokenEnvID = "admin"

// Jobs tune how Sluice follows async jobs (video generation) it did not see
// end through a caller's poll.
type Jobs struct {
	// MaxAge is how long a job may run: one whose end Sluice cannot learn
	// frees its slots after this and is recorded as expired; default 2h.
	MaxAge Duration `yaml:"max_age"`
	// PollInterval is when the background poller first looks at a job
	// nobody polls, and its shortest interval; default 2s.
	PollInterval Duration `yaml:"poll_interval"`
	// MaxPollInterval is how far the poller backs off; default 30s.
	MaxPollInterval Duration `yaml:"max_poll_interval"`
	// Retention is how long an ended job can still be followed (its result
	// downloaded); default 24h.
	Retention Duration `yaml:"retention"`
}

// Timeouts are phase timeouts as durations ("30s"). Empty = inherit.
type Timeouts struct {
	Connect   Duration `yaml:"connect"`
	FirstByte Duration `yaml:"first_byte"`
	Idle      Duration `yaml:"idle"`
	Total     Duration `yaml:"total"`
}

// Priority tunes one priority class.
type Priority struct {
	Wait Duration `yaml:"wait"` // longest a request of this class waits for capacity
}

// Database locates the durable store: sqlite://path or postgres://…, given
// by exactly one of URL, URLEnv and URLFile as for Redis.
type Database struct {
	URL     string `yaml:"url"`
	URLEnv  string `yaml:"url_env"`  // environment variable holding the URL
	URLFile string `yaml:"url_file"` // file holding the URL
	// SpoolDir is where usage records wait on local disk until the
	// database has them, so that a killed process loses none. One per
	// database. Default: next to an SQLite file (its path + "-spool"),
	// else data/spool; none for an SQLite database in memory.
	SpoolDir string `yaml:"spool_dir"`
	// Retention is how long usage records and audit entries are kept.
	Retention Retention `yaml:"retention"`
}

// Endpoint is an upstream base URL with its protocols.
type Endpoint struct {
	ID        string   `yaml:"id"`
	BaseURL   string   `yaml:"base_url"`
	Protocols []string `yaml:"protocols"`
	Models    []string `yaml:"models"`
	Timeouts  Timeouts `yaml:"timeouts"`
	Breaker   Breaker  `yaml:"breaker"`
	// Azure and Vertex put the endpoint on a cloud that hosts its
	// protocols (cloud.go); at most one is set.
	Azure  *Azure  `yaml:"azure"`
	Vertex *Vertex `yaml:"vertex"`
	// Bedrock puts the endpoint on AWS Bedrock (aws.go).
	Bedrock *Bedrock `yaml:"bedrock"`
	// CodeAssist puts the endpoint on Google's Code Assist API
	// (codeassist.go).
	CodeAssist *CodeAssist `yaml:"code_assist"`
	// ChatGPT puts the endpoint on the ChatGPT backend (chatgpt.go).
	ChatGPT *ChatGPT `yaml:"chatgpt"`
	// ForwardHeaders are more of the caller's headers the endpoint is
	// sent, translated or not, beyond those its caller's protocol passes on
	// to an upstream that speaks it (names; a trailing '*' is a prefix).
	// DropHeaders are the caller's headers it is never sent, even those.
	// Neither can pass what authenticates the caller, Sluice's own
	// headers, the hop-by-hop ones or those Sluice sets
	// (sluice.NeverForwarded).
	ForwardHeaders []string `yaml:"forward_headers"`
	DropHeaders    []string `yaml:"drop_headers"`
}

// Breaker tunes an endpoint's circuit breaker.
type Breaker struct {
	Failures int      `yaml:"failures"` // consecutive failures that open it; default 5
	Open     Duration `yaml:"open"`     // how long it stays open before a probe; default 30s
}

// Account is an upstream billing subject.
type Account struct {
	ID         string `yaml:"id"`
	QuotaScope string `yaml:"quota_scope"` // account (default) | credential
	// MaxInflight is how many of the account's requests may run at once:
	// DefaultMaxInflight when unset; 0 is refused (a large number means
	// uncapped). A pointer so that an explicit 0 is told from none.
	MaxInflight *int     `yaml:"max_inflight"`
	RPM         int      `yaml:"rpm"`
	TPM         int      `yaml:"tpm"`
	Cooldown    Cooldown `yaml:"cooldown"`
	// Reserve keeps slots of max_inflight for urgent classes: reserve
	// {interactive: 1} means standard and background work may use at most
	// max_inflight-1 slots, so interactive requests always find one.
	Reserve map[string]int `yaml:"reserve"`
	// Models are per-model units under the account, by deployment model:
	// for upstreams whose quotas are per model (DashScope, OpenAI). See
	// AccountModel.
	Models map[string]AccountModel `yaml:"models"`
	// BackgroundPause holds background requests back after a rate limit:
	// they take no slot of the account until it has gone this long
	// without a 429 (one scoped to a model unit included). 0 = no pause.
	BackgroundPause Duration `yaml:"background_pause"`
}

// Cap is the account's max_inflight (DefaultMaxInflight when unset).
func (a *Account) Cap() int { return capOr(a.MaxInflight, DefaultMaxInflight) }

// Cap is the credential's max_inflight: its own account's cap when it has
// no account (DefaultMaxInflight when unset), else its inner limit (0 when
// unset: none).
func (c *Credential) Cap() int {
	if c.Account == "" {
		return capOr(c.MaxInflight, DefaultMaxInflight)
	}
	return capOr(c.MaxInflight, 0)
}

func capOr(n *int, def int) int {
	if n == nil {
		return def
	}
	return *n
}

// Cooldown bounds the backoff after a rate limit.
type Cooldown struct {
	Base Duration `yaml:"base"`
	Max  Duration `yaml:"max"`
}

// Credential is one upstream secret, by stable ID. Exactly one of SecretEnv,
// SecretFile and OAuth says where the secret is.
type Credential struct {
	ID         string   `yaml:"id"`
	Account    string   `yaml:"account"`
	SecretEnv  string   `yaml:"secret_env"`
	SecretFile string   `yaml:"secret_file"`
	Endpoints  []string `yaml:"endpoints"`
	Models     []string `yaml:"models"`
	// MaxInflight caps the credential's requests running at once. Under
	// an account it is an inner limit (unset or 0: none); a credential
	// without an account is its own account, and it is that account's cap,
	// with the account's default and rule (see Account.MaxInflight).
	MaxInflight *int `yaml:"max_inflight"`
	// SubmitRPM bounds the requests sent on the credential per rolling
	// minute, whatever its account allows: a guard against bursts on one
	// upstream key. 0 = none.
	SubmitRPM int `yaml:"submit_rpm"`
	// OAuth makes the secret an access token obtained with a refresh
	// token (a subscription account), instead of a static one.
	OAuth OAuth `yaml:"oauth"`
	// AWS makes the credential an AWS access key, which signs the requests
	// of its Bedrock endpoints (aws.go), instead of a secret sent as is.
	AWS *AWSKeys `yaml:"aws"`
	// Headers are sent on every upstream request of the credential (name →
	// value), after its secret; names Sluice sets itself are refused.
	Headers map[string]string `yaml:"headers"`
	// Owner makes the credential a tenant's or an end user's own key
	// (BYOK): it serves only its owner's requests. Unset: a platform
	// credential, which serves anyone.
	Owner Owner `yaml:"owner"`
}

// Owner is who brought an owned credential: a tenant (the tenant of the
// keys its requests come with) and, optionally, one end user of that
// tenant (as requests name it: user, X-Sluice-User).
type Owner struct {
	Tenant string `yaml:"tenant"`
	User   string `yaml:"user"`
}

// OAuth is an OAuth2 credential: Sluice obtains access tokens at TokenURL
// by its Grant, before each expires, and keeps them (a rotated refresh
// token included) in the database, encrypted with server.secret_key_env
// or secret_key_file, for every replica (oauth_grant.go).
type OAuth struct {
	// Grant is how access tokens are obtained: refresh_token (default; RFC
	// 6749 §6, a subscription account), client_credentials (RFC 6749 §4.4:
	// client_id and a client secret, as Microsoft Entra ID issues tokens
	// for Azure OpenAI) or jwt_bearer (RFC 7523: an assertion signed with a
	// Google service account's key, for Vertex AI).
	Grant    string `yaml:"grant"`
	TokenURL string `yaml:"token_url"`
	ClientID string `yaml:"client_id"`
	// RefreshTokenFile holds the refresh token that seeds the credential;
	// writing another token to it replaces the one Sluice holds.
	RefreshTokenFile string   `yaml:"refresh_token_file"`
	Scopes           []string `yaml:"scopes"` // asked for on every refresh; none = what the grant has
	// Body is how the refresh request's parameters are sent: "form"
	// (default; RFC 6749's application/x-www-form-urlencoded) or "json" (an
	// object with the same members, which some subscription providers'
	// token endpoints require).
	Body string `yaml:"body"`
	// ClientSecretEnv or ClientSecretFile hold the client secret: required
	// by grant client_credentials; sent with grant refresh_token when set
	// (a token endpoint that authenticates its client on every refresh, as
	// Google's does for Gemini CLI's).
	ClientSecretEnv  string `yaml:"client_secret_env"`
	ClientSecretFile string `yaml:"client_secret_file"`
	// ServiceAccountFile is a Google service account's JSON key, of grant
	// jwt_bearer: its client_email issues the assertion, its private_key
	// signs it, and its token_uri is the token URL unless token_url says.
	ServiceAccountFile string `yaml:"service_account_file"`
}

// OAuth request bodies (OAuth.Body).
const (
	OAuthBodyForm = "form"
	OAuthBodyJSON = "json"
)

// Set reports whether the oauth block says anything.
func (o *OAuth) Set() bool {
	return o.Grant != "" || o.TokenURL != "" || o.ClientID != "" || o.RefreshTokenFile != "" || len(o.Scopes) > 0 || o.Body != "" ||
		o.ClientSecretEnv != "" || o.ClientSecretFile != "" || o.ServiceAccountFile != ""
}

// TokenEstimate is how many characters of each script make a token;
// 0 = the default.
type TokenEstimate struct {
	CharsPerToken    float64 `yaml:"chars_per_token"`     // default 4
	CJKCharsPerToken float64 `yaml:"cjk_chars_per_token"` // default 1
}

// Model is a public alias with its deployments.
type Model struct {
	Alias string `yaml:"alias"`
	// Protocol restricts the alias to callers of one protocol; empty, it
	// answers callers of every generation protocol (sluice.Generation)
	// that reaches its deployments. Embeddings and job aliases name theirs.
	Protocol    string       `yaml:"protocol"`
	Deployments []Deployment `yaml:"deployments"`
	Limits      Limits       `yaml:"limits"` // shared by every request for the alias
	// MaxOutputTokens refuses (400) a request that asks for more output
	// tokens (openai.chat: max_tokens or max_completion_tokens;
	// anthropic.messages: max_tokens; openai.responses:
	// max_output_tokens); 0 = no limit. Not for embeddings and jobs.
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	// TokenEstimate tunes how a request's tokens are estimated before it
	// runs (reserved against token limits, bounding its cost), for models
	// whose tokenizers count differently; absent = 4 characters a token,
	// 1 CJK character a token.
	TokenEstimate TokenEstimate `yaml:"token_estimate"`
	// Strategy orders the edges of each priority tier: round-robin
	// (default) | weighted | fill-first | least-inflight | affinity.
	Strategy string `yaml:"strategy"`
	// Affinity tunes strategy affinity (and is refused with another).
	Affinity Affinity `yaml:"affinity"`
	// Redaction is the sensitive-data policy (redaction[].id) applied to
	// every request for the alias; "" = none.
	Redaction string `yaml:"redaction"`
	// Cache serves repeated identical requests for the alias from stored
	// answers; nil = off.
	Cache *Cache `yaml:"cache"`
}

// Deployment maps an alias to an upstream model on some endpoints.
type Deployment struct {
	Model     string   `yaml:"model"`
	Endpoints []string `yaml:"endpoints"`
	Priority  int      `yaml:"priority"`
	Weight    int      `yaml:"weight"` // default 1; must be > 0 when set
	// Input is what the model takes (InputKinds): text, and image when it
	// sees images; absent = undeclared, everything is sent to it.
	Input []string `yaml:"input"`
}

// InputKinds are the values of Deployment.Input, each the kind it names.
// Audio and files are not among them: requests are not yet checked for
// them, and a kind declared but never checked would be a setting ignored.
var InputKinds = map[string]sluice.Input{"text": sluice.InputText, "image": sluice.InputImage}

// Inputs is d.Input as a set; zero when undeclared. Validate has refused
// any value not in InputKinds.
func (d *Deployment) Inputs() sluice.Input {
	var in sluice.Input
	for _, k := range d.Input {
		in |= InputKinds[k]
	}
	return in
}

// Pool is a named set of accounts with its own limits and strategy.
type Pool struct {
	ID          string   `yaml:"id"`
	Accounts    []string `yaml:"accounts"`
	MaxInflight int      `yaml:"max_inflight"`
	RPM         int      `yaml:"rpm"`
	TPM         int      `yaml:"tpm"`
	Strategy    string   `yaml:"strategy"` // round-robin | fill-first | weighted | least-inflight | affinity
	Affinity    Affinity `yaml:"affinity"` // tunes strategy affinity (and is refused with another)
	// CostBudgetDay bounds what the requests routed through the pool may
	// cost the platform upstream per UTC day, as CostBudgetDay of TaskType.
	CostBudgetDay Money `yaml:"cost_budget_day"`
}

// Key is a static virtual key declared in the catalog: its ID, where its
// secret is, its scopes and expiry, and the settings every key carries
// (sluice.KeySettings, whose YAML names are the catalog's).
type Key struct {
	ID         string   `yaml:"id"`
	Name       string   `yaml:"name"`
	Tenant     string   `yaml:"tenant"`
	SecretEnv  string   `yaml:"secret_env"`
	SecretFile string   `yaml:"secret_file"`
	Models     []string `yaml:"models"`
	Priority   string   `yaml:"priority"`
	ExpiresAt  string   `yaml:"expires_at"` // RFC 3339, optional

	sluice.KeySettings `yaml:",inline"`
	// Budgets bound what the key is billed per UTC day and month; the
	// catalog is the only place that sets a key's.
	Budgets Budgets `yaml:"budgets"`
	// Redaction is the sensitive-data policy (redaction[].id) applied to
	// the key's requests; "" = none. Catalog only, like Budgets.
	Redaction string `yaml:"redaction"`
	// Cache serves the key's repeated identical requests from stored
	// answers, in place of its alias's cache; nil = the alias's. Catalog
	// only, like Budgets.
	Cache *Cache `yaml:"cache"`
}

// Policy is a key's route policy.
type Policy = sluice.RoutePolicy

// Limits are limits of Sluice's own: a key's, an alias's, a tenant's.
type Limits = sluice.Limits
