package sluice

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"
)

// Protocol is a wire format spoken between a caller and Sluice or between
// Sluice and an upstream endpoint.
type Protocol string

// The protocols Sluice knows. Which protocols a model family speaks is a fact
// of the code, not of a request.
const (
	ProtocolOpenAIChat       Protocol = "openai.chat"
	ProtocolOpenAIResponses  Protocol = "openai.responses"
	ProtocolOpenAIEmbeddings Protocol = "openai.embeddings"
	ProtocolAnthropic        Protocol = "anthropic.messages"
	ProtocolGemini           Protocol = "gemini.generate"
	ProtocolGeminiEmbed      Protocol = "gemini.embed"
	ProtocolOpenAIVideos     Protocol = "openai.videos"
	ProtocolFalQueue         Protocol = "fal.queue"
)

// Known reports whether p is one of the protocols above.
func (p Protocol) Known() bool {
	switch p {
	case ProtocolOpenAIChat, ProtocolOpenAIResponses, ProtocolOpenAIEmbeddings,
		ProtocolAnthropic, ProtocolGemini, ProtocolGeminiEmbed, ProtocolOpenAIVideos, ProtocolFalQueue:
		return true
	}
	return false
}

// Generation is the protocols that ask a model for a turn of a
// conversation. Sluice translates between any two of them, so an alias that
// names no protocol answers callers of each one its deployments can be
// reached from.
var Generation = []Protocol{ProtocolOpenAIChat, ProtocolOpenAIResponses, ProtocolAnthropic, ProtocolGemini}

// Timeouts are the phase timeouts of one upstream call. Each layers on its
// parent context, so the shortest one wins. Zero means no limit for that phase.
type Timeouts struct {
	Connect   time.Duration // TCP+TLS connect
	FirstByte time.Duration // request sent → response headers (and first stream event)
	Idle      time.Duration // between two chunks of a streamed body
	Total     time.Duration // the whole execution
}

// Endpoint is a base URL and the protocols it serves. Models, when non-empty,
// is its model catalog; empty means any model of its protocols.
type Endpoint struct {
	ID        string
	BaseURL   string
	Protocols []Protocol
	Models    []string
	Timeouts  Timeouts
	// Host is the cloud that serves the endpoint's protocols under its own
	// URLs and credentials; the zero Host is the provider's own API or one
	// compatible with it.
	Host Host
	// Headers change which of a caller's headers the endpoint is sent.
	Headers HeaderRules
}

// Host is a cloud that hosts a provider's wire protocol (Azure OpenAI,
// Vertex AI, Bedrock): the body stays the provider's, so every caller that
// the protocol serves (passthrough or translated) is served the same way,
// and only the upstream dialect changes (URL, credential, a body tweak).
// Cloud names the cloud ("" none); the other fields are its settings, each
// read by its cloud's dialect only.
type Host struct {
	Cloud string
	// APIVersion is Azure OpenAI's api-version query parameter.
	APIVersion string
	// Project and Location place a Vertex AI endpoint's models; Project
	// alone is the Google Cloud project a Code Assist endpoint's requests
	// name.
	Project, Location string
	// Region is a Bedrock endpoint's AWS region, which its requests are
	// signed for.
	Region string
}

// Clouds and the protocols each hosts (Host.Cloud; package app's hostTable
// has a dialect for each).
const (
	CloudAzure   = "azure"
	CloudVertex  = "vertex"
	CloudBedrock = "bedrock"
	// CloudCodeAssist is Google's Code Assist API, which serves Gemini to
	// Gemini CLI's Google sign-in.
	CloudCodeAssist = "code_assist"
	// CloudChatGPT is the ChatGPT backend, which serves Responses to Codex
	// signed in with ChatGPT.
	CloudChatGPT = "chatgpt"
)

// CloudProtocols are the wire protocols each cloud hosts: an endpoint on a
// cloud may speak only these.
var CloudProtocols = map[string][]Protocol{
	CloudAzure:   {ProtocolOpenAIChat, ProtocolOpenAIEmbeddings},
	CloudVertex:  {ProtocolGemini, ProtocolAnthropic},
	CloudBedrock: {ProtocolAnthropic},

	CloudCodeAssist: {ProtocolGemini},
	CloudChatGPT:    {ProtocolOpenAIResponses},
}

// Speaks reports whether the endpoint serves protocol p.
func (e *Endpoint) Speaks(p Protocol) bool {
	for _, q := range e.Protocols {
		if q == p {
			return true
		}
	}
	return false
}

// Serves reports whether the endpoint's catalog admits the upstream model.
func (e *Endpoint) Serves(model string) bool {
	return len(e.Models) == 0 || slices.Contains(e.Models, model)
}

// QuotaScope says which slot a credential's calls claim.
type QuotaScope string

// Quota scopes (docs/architecture.md, "Concepts").
const (
	QuotaScopeAccount    QuotaScope = "account"
	QuotaScopeCredential QuotaScope = "credential"
)

// Cooldown bounds the backoff applied to an account after a rate limit.
type Cooldown struct {
	Base time.Duration
	Max  time.Duration
}

// Account is the upstream billing subject that owns rate limits. A credential
// without an explicit account is its own account (ID equal to the credential's).
type Account struct {
	ID          string
	QuotaScope  QuotaScope
	MaxInflight int // 0 = unlimited
	RPM         int
	TPM         int
	Cooldown    Cooldown
	// BackgroundPause: background requests take no slot of the account
	// until it has gone this long without a 429; 0 = no pause.
	BackgroundPause time.Duration
}

// UpstreamStatus is the state of a credential, an account or an endpoint
// that every replica shares: set by an operator or by a failure, kept by
// the status store (store.Status), shown by the admin API. Its words are
// the stored and JSON forms.
type UpstreamStatus string

// Upstream states (docs/architecture.md, "Concepts"). A credential takes
// any of the first four, an account active or disabled, an endpoint active
// or open. Active is the default and is not stored.
const (
	UpstreamActive   UpstreamStatus = "active"
	UpstreamDraining UpstreamStatus = "draining" // a credential: no new claims; running work finishes
	UpstreamDisabled UpstreamStatus = "disabled" // by an operator, or by an auth or billing failure
	UpstreamRemoved  UpstreamStatus = "removed"  // a credential taken out of service for good
	UpstreamOpen     UpstreamStatus = "open"     // an endpoint whose breaker some replica opened
)

// Credential is one upstream secret with a stable, operator-chosen ID.
// Secret is the plaintext sent upstream; it never reaches a log (see LogValue).
type Credential struct {
	ID          string
	AccountID   string
	Secret      string
	Endpoints   []string
	Models      []string // empty = whatever the endpoint serves
	MaxInflight int      // optional inner limit; 0 = none
	// Headers are sent on every upstream request of the credential, after
	// its secret (an account ID, a beta flag); canonical names, read only.
	// Their values may be secret-ish: they are never logged.
	Headers http.Header
	// Tokens gives the access token of an OAuth credential, sent instead of
	// Secret (which is then empty); nil for a credential with a static
	// secret.
	Tokens TokenSource
	// AWS is an AWS access key's ID and session token, for a credential
	// whose Secret is the key's secret access key (Bedrock signs its
	// requests with them); nil for any other credential.
	AWS *AWSAccessKey
	// Owner is who brought the credential (BYOK): it serves only the
	// owner's requests. Zero for a platform credential.
	Owner Owner
}

// Owner is the owner of a credential of its own (BYOK): a tenant, and
// optionally one end user of that tenant (Request.User).
type Owner struct {
	Tenant string
	User   string
}

// Platform reports whether o is no owner: the credential is the platform's.
func (o Owner) Platform() bool { return o == Owner{} }

// AWSAccessKey is the public part of an AWS access key and, for temporary
// credentials, the session token that goes with it (which is secret).
type AWSAccessKey struct {
	AccessKeyID  string
	SessionToken string
}

// TokenSource is where an OAuth credential's access token comes from: one
// refreshed before it expires, shared by every replica (package oauth).
type TokenSource interface {
	// Token returns the access token to send now; ok is false when there
	// is no valid one, and the credential is out of service until a
	// refresh succeeds.
	Token() (token string, ok bool)
	// Refused says that the upstream answered 401 to token. It returns
	// the token to send instead, refreshed if nobody did since token was
	// issued; ok is false when there is none.
	Refused(ctx context.Context, token string) (_ string, ok bool)
}

// InService reports whether the credential can present itself upstream:
// always for a static secret; for an OAuth credential, while it has a valid
// access token.
func (c *Credential) InService() bool {
	if c.Tokens == nil {
		return true
	}
	_, ok := c.Tokens.Token()
	return ok
}

// LogValue shows the ID and the last four characters of the secret only.
func (c *Credential) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", c.ID), slog.String("secret", Redact(c.Secret)))
}

// Redact returns a form of a secret that is safe to log: its last four
// characters behind a fixed mask, or only the mask when it is short.
func Redact(secret string) string {
	if len(secret) < 12 {
		return "****"
	}
	return "****" + secret[len(secret)-4:]
}

// Edge is the schedulable unit: a compatible (credential, endpoint,
// protocol, upstream model). Edges are built when a catalog is compiled and
// are immutable afterwards.
type Edge struct {
	ID         string // "credential/endpoint/model", stable across reloads
	Credential *Credential
	Account    *Account
	Endpoint   *Endpoint
	Protocol   Protocol // spoken to the endpoint: the alias's, or one Sluice translates it to
	Model      string   // upstream model name
	Priority   int      // lower first; the next tier is tried after this one fails
	Weight     int      // share inside a tier
	Input      Input    // what its deployment's model takes
}

// Deployment is one way to serve an alias: an upstream model on a set of
// endpoints, at a priority tier with a weight.
type Deployment struct {
	Model     string
	Endpoints []string
	Priority  int
	Weight    int
	Input     Input // what its model takes
}

// Input is the kinds of content a model takes: a set of InputText and
// InputImage. Zero is undeclared, and takes everything, so a catalog
// that says nothing keeps sending every request to every deployment.
type Input uint8

// The kinds of content in an Input.
const (
	InputText Input = 1 << iota
	InputImage
)

// Takes reports whether a model taking in can be sent content of kind k.
func (in Input) Takes(k Input) bool { return in == 0 || in&k == k }

// Alias is the public model name a caller sends.
type Alias struct {
	Name string
	// Protocols are the caller protocols it answers: the catalog's
	// models[].protocol alone, or else each of Generation that reaches
	// one of its deployments (passed through or translated).
	Protocols   []Protocol
	Deployments []Deployment
	// MaxOutputTokens refuses a request asking for more output (its
	// MaxTokens) than the alias's models give; 0 = no limit.
	MaxOutputTokens int64
	// Estimate is how its models' tokenizers count; zero = the default.
	Estimate TokenEstimate
	// ScanImages is set when some deployment takes no images: only then
	// are its requests searched for image parts, to keep them from it.
	ScanImages bool
}

// Answers reports whether a caller of protocol p may call the alias.
func (a *Alias) Answers(p Protocol) bool { return slices.Contains(a.Protocols, p) }

// KeyStatus is the lifecycle state of a virtual key.
type KeyStatus string

// Virtual key states (docs/architecture.md, "Concepts").
const (
	KeyPending  KeyStatus = "pending"
	KeyActive   KeyStatus = "active"
	KeyDisabled KeyStatus = "disabled"
	KeyExpired  KeyStatus = "expired"
	KeyRevoked  KeyStatus = "revoked"
)

// Key is a virtual key as stored: never the plaintext, only its SHA-256 hash
// (hex) and a short display prefix. A key declared in the catalog and one
// created through the admin API carry the same fields and are compiled into
// the same per-key policy.
type Key struct {
	ID        string
	Name      string
	Tenant    string
	Hash      string
	Prefix    string
	Status    KeyStatus
	Models    []string // allowed aliases; empty = all
	Priority  string
	ExpiresAt time.Time // zero = never
	CreatedAt time.Time
	UpdatedAt time.Time
	Static    bool // declared in the catalog, not in the store

	KeySettings
	// Budgets bound what it is billed per UTC day and month. Only the
	// catalog sets them: they are not among the settings the admin API
	// writes.
	Budgets Budgets
}

// KeySettings is what a virtual key carries besides its identity, the
// aliases it may call, its priority class and its life cycle: the one
// definition of a key's settings. The catalog's keys (YAML), the admin
// API's (JSON) and the catalog store write them with these names, so a
// field added here is a field of all of them; config.ValidateKey checks
// them and config.ApplyKeyDefaults fills their defaults, for every source.
type KeySettings struct {
	// Labels are the operator's tags, matched by label selectors; nil = none.
	Labels     map[string]string `json:"labels,omitempty" yaml:"labels"`
	Policy     RoutePolicy       `json:"policy,omitzero" yaml:"policy"`           // which accounts its requests may use
	Limits     Limits            `json:"limits,omitzero" yaml:"limits"`           // the key's own limits
	UserLimits Limits            `json:"user_limits,omitzero" yaml:"user_limits"` // the limits of each of its end users
	// Task is the task type its requests have by default; X-Sluice-Task
	// may pick another of Tasks.
	Task  string   `json:"task,omitempty" yaml:"task"`
	Tasks []string `json:"tasks,omitempty" yaml:"tasks"`
	// Paths are the API paths it may call (KeyPathNames); empty = all
	// (or the catalog's server.default_key_paths, when it sets them).
	Paths []string `json:"paths,omitempty" yaml:"paths"`
	// ServiceTiers are the service_tier values a request may name; empty =
	// any. A request that names none is always allowed.
	ServiceTiers []string `json:"service_tiers,omitempty" yaml:"service_tiers"`
	// OnLimit is what a request finds when the key's own max_inflight is
	// reached: OnLimitWait ("" too) queues it, OnLimitRefuse answers 429
	// access_concurrency_exceeded at once.
	OnLimit string `json:"on_limit,omitempty" yaml:"on_limit"`
	// BillingAccount is the billing account its requests are charged to;
	// "" = none (in a billed deployment: refused, access_key_unbound).
	BillingAccount string `json:"billing_account,omitempty" yaml:"billing_account"`
	// Assert lists what it may assert about its requests: "user" (the end
	// user it names selects that user's entitlement) and "profile"
	// (X-Sluice-Profile); nil = neither.
	Assert []string `json:"assert,omitempty" yaml:"assert"`
	// TraceContent puts the prompt and the completion of its requests in
	// their traces (docs/tracing.md), each up to a bound; false (the
	// default): no text of a request or an answer is ever traced.
	TraceContent bool `json:"trace_content,omitempty" yaml:"trace_content"`
}

// Clone returns a copy of s that shares no slice or map with it.
func (s KeySettings) Clone() KeySettings {
	s.Labels = maps.Clone(s.Labels)
	s.Policy.Accounts = slices.Clone(s.Policy.Accounts)
	s.Tasks, s.Paths, s.ServiceTiers = slices.Clone(s.Tasks), slices.Clone(s.Paths), slices.Clone(s.ServiceTiers)
	s.Assert = slices.Clone(s.Assert)
	return s
}

// Clone returns a copy of k that shares no slice or map with it.
func (k *Key) Clone() *Key {
	c := *k
	c.Models = slices.Clone(k.Models)
	c.KeySettings = k.KeySettings.Clone()
	return &c
}

// Budgets bound what is billed per UTC day and month, in micro-units of
// the deployment's currency; 0 = no budget.
type Budgets struct {
	Day, Month int64
}

// What a key's request does at the key's own concurrency limit (Key.OnLimit).
const (
	OnLimitWait   = "wait"
	OnLimitRefuse = "refuse"
)

// KeyPaths are the names of the API paths a key may be scoped to
// (Key.Paths), by the protocol each path speaks. A name covers every route
// of its protocol: "responses" is OpenAI's /v1/responses and the ChatGPT
// backend's /backend-api/codex/responses (where Codex posts), with their
// compaction (…/compact) and the follow-ups of a stored response (GET and
// DELETE …/{id}, POST …/{id}/cancel). KeyPathResponsesCompact names one
// route alone.
var KeyPaths = map[Protocol]string{
	ProtocolOpenAIChat:       "chat",
	ProtocolOpenAIEmbeddings: "embeddings",
	ProtocolOpenAIResponses:  "responses",
	ProtocolOpenAIVideos:     "videos",
	ProtocolFalQueue:         "fal",
	ProtocolAnthropic:        "messages",
	ProtocolGemini:           "gemini",
	ProtocolGeminiEmbed:      "gemini_embeddings",
}

// KeyPathResponsesCompact names a Responses compaction alone (POST
// /v1/responses/compact, /backend-api/codex/responses/compact), for a key
// that may compact conversations but not create responses.
const KeyPathResponsesCompact = "responses_compact"

// KeyPathNames returns, sorted, every name Key.Paths may hold.
func KeyPathNames() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for _, name := range KeyPaths {
			if !yield(name) {
				return
			}
		}
		yield(KeyPathResponsesCompact)
	})
}

// MayCall reports whether the key's paths let it call a route of protocol
// p (compact: a Responses compaction; see Request.Compact), and returns
// the name that lets it, or that a refusal names (the protocol's). No
// paths: every path.
func (k *Key) MayCall(p Protocol, compact bool) (name string, ok bool) {
	name = KeyPaths[p]
	switch {
	case len(k.Paths) == 0 || slices.Contains(k.Paths, name):
		return name, true
	case compact && p == ProtocolOpenAIResponses && slices.Contains(k.Paths, KeyPathResponsesCompact):
		return KeyPathResponsesCompact, true
	}
	return name, false
}

// MaxTokensField names, for each protocol whose requests ask for output
// tokens, the body field that asks (Request.MaxTokens; an alias's
// max_output_tokens bounds it).
var MaxTokensField = map[Protocol]string{
	ProtocolOpenAIChat:      "max_tokens (or max_completion_tokens)",
	ProtocolAnthropic:       "max_tokens",
	ProtocolOpenAIResponses: "max_output_tokens",
	ProtocolGemini:          "generationConfig.maxOutputTokens",
}

// RoutePolicy is a key's route policy (docs/architecture.md, "Concepts"): Mode is default,
// strict, preferred or pool; strict and preferred name Accounts, preferred a
// Fallback (a pool ID or "any") and how long to Wait for the bound accounts,
// pool a Pool.
type RoutePolicy struct {
	Mode     PolicyMode `json:"mode,omitempty" yaml:"mode"`
	Accounts []string   `json:"accounts,omitempty" yaml:"accounts"`
	Pool     string     `json:"pool,omitempty" yaml:"pool"`
	Fallback string     `json:"fallback,omitempty" yaml:"fallback"`
	Wait     Duration   `json:"wait,omitzero" yaml:"wait"`
}

// PolicyMode is the mode of a route policy.
type PolicyMode string

// Route policy modes.
const (
	PolicyDefault   PolicyMode = "default"   // every account the alias has, in its strategy's order
	PolicyStrict    PolicyMode = "strict"    // the bound accounts only
	PolicyPreferred PolicyMode = "preferred" // the bound accounts first, then the fallback
	PolicyPool      PolicyMode = "pool"      // a pool's accounts, under the pool's limits
)

// Limits are limits of Sluice's own (on a key, on each of its end users, on
// an alias, on a tenant); 0 = no limit.
type Limits struct {
	RPM         int `json:"rpm,omitempty" yaml:"rpm"`
	TPM         int `json:"tpm,omitempty" yaml:"tpm"`
	MaxInflight int `json:"max_inflight,omitempty" yaml:"max_inflight"`
	DailyTokens int `json:"daily_tokens,omitempty" yaml:"daily_tokens"` // tokens per UTC day
}

// Duration is a time.Duration that JSON and YAML write as Go prints it
// ("1m30s"): the form of a duration an operator writes by hand.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalText writes the duration as "1m30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration ("30s"), as JSON carries it; "" is 0.
// A number without a unit is refused. A negative duration is read as
// given: whoever uses the value decides whether it may be negative.
func (d *Duration) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"30s\")", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML reads the duration as yaml.v3 reads a time.Duration, so
// that a bad value is one of yaml's located type errors, which the
// catalog's decoder reports together with every other problem. (This
// form of the method needs no import of the yaml package.)
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var v time.Duration
	if err := unmarshal(&v); err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// EffectiveStatus is Status, except that an active key past its expiry is expired.
func (k *Key) EffectiveStatus(now time.Time) KeyStatus {
	if k.Status == KeyActive && !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt) {
		return KeyExpired
	}
	return k.Status
}

// Allows reports whether the key may use the alias.
func (k *Key) Allows(alias string) bool {
	return len(k.Models) == 0 || slices.Contains(k.Models, alias)
}

// Priorities are the priority classes, most urgent first. A class decides
// a request's place in the wait queue and the capacity reserved for it.
var Priorities = []string{"interactive", "standard", "background"}

// Principal is who a request runs as, after authentication.
type Principal struct {
	Key *Key
}

// Request is what the caller asked for, as far as routing and accounting
// need to know. Body is the caller's bytes, forwarded untouched when the
// caller and the upstream speak the same protocol.
type Request struct {
	ID           string
	Protocol     Protocol
	Model        string // alias as sent by the caller
	Stream       bool
	IncludeUsage bool   // the caller asked for stream usage itself
	Priority     string // the class the caller asked for (X-Sluice-Priority); "" = the key's
	Task         string // the task type the caller declared (X-Sluice-Task); "" = the key's
	ServiceTier  string // the body's "service_tier"; "" = none named
	User         string // the end user: X-Sluice-User, else the body's "user" (Anthropic: metadata.user_id; Responses: safety_identifier, else user)
	MaxTokens    int64  // the output asked for: the larger of max_tokens and max_completion_tokens (Responses: max_output_tokens); 0 = not set
	// Text is the size of the body by script, and Output the output
	// tokens it may use (MaxTokens, or a default when it sets none; 0 for
	// embeddings): with Estimate, what it reserves against token limits
	// (Reserve).
	Text   TextSize
	Output int64
	// Estimate is its alias's token estimate, set at admission; the zero
	// value is DefaultTokenEstimate.
	Estimate TokenEstimate
	// Profile is the quota profile the caller asserts (X-Sluice-Profile);
	// "" = none. Admission resolves the one the request runs under.
	Profile string
	// MaxWait is the longest the caller lets the request wait for
	// capacity (X-Sluice-Max-Wait), within its class's wait; 0 tries once
	// and never waits. nil: the class's wait.
	MaxWait *time.Duration
	// StrictTranslation: the caller asked that a translation to another
	// protocol drop none of its fields (X-Sluice-Translation: strict); a
	// request that would lose some is refused, naming them.
	StrictTranslation bool
	// PromptCacheKey and PreviousResponseID are a Responses body's
	// prompt_cache_key and previous_response_id ("" = none), read with the
	// rule of the other fields Sluice reads so routing and the upstream
	// agree on them.
	PromptCacheKey, PreviousResponseID string

	Body []byte
	// ContentType is the body's media type when it is not JSON — a video
	// submit sent as multipart/form-data — and is forwarded with it.
	ContentType string
	Received    time.Time
	// CountTokens marks an Anthropic count_tokens request: the prompt is
	// counted, nothing is generated or billed, so Tokens is 0.
	CountTokens bool
	// Compact marks a Responses compaction (POST /v1/responses/compact):
	// the conversation is compacted, not answered, by an endpoint that
	// speaks Responses (a chat endpoint has no compaction), and the answer
	// is one JSON object.
	Compact bool
	// Batch marks a Gemini batchEmbedContents request (its path names the
	// method, not its body): the upstream is asked the same.
	Batch bool
	// Header is the caller's HTTP header, read only. Only what the
	// protocol lists (to an upstream that speaks it too) and the endpoint's
	// HeaderRules allow is passed on; nil when there was no caller's
	// request.
	Header http.Header
}

// Usage is what one request consumed upstream. Measured is false when the
// upstream reported nothing (for example a stream cut before its last chunk).
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64 // of PromptTokens, read from the upstream's prompt cache
	CacheWriteTokens int64 // of PromptTokens, written to the upstream's prompt cache (Anthropic bills them apart)
	ReasoningTokens  int64
	TotalTokens      int64
	Measured         bool
}

// ExecutionStatus is how one attempt on one edge ended.
type ExecutionStatus string

// Execution outcomes.
const (
	ExecutionOK        ExecutionStatus = "ok"
	ExecutionRate      ExecutionStatus = "rate"
	ExecutionAuth      ExecutionStatus = "auth"
	ExecutionBilling   ExecutionStatus = "billing"
	ExecutionEndpoint  ExecutionStatus = "endpoint"
	ExecutionRequest   ExecutionStatus = "request"
	ExecutionCancelled ExecutionStatus = "cancelled"
)

// Execution is one attempt of a request on one edge. A request keeps every
// execution; none is overwritten by a later attempt.
type Execution struct {
	EdgeID       string
	CredentialID string
	AccountID    string
	EndpointID   string
	Model        string
	// Protocol is what was spoken to the endpoint (the edge's): the
	// record's own protocol, or the one Sluice translated it to.
	Protocol   Protocol
	Status     ExecutionStatus
	HTTPStatus int
	Error      string // internal cause, safe for logs (no secrets)
	Started    time.Time
	FirstByte  time.Duration // 0 if none arrived
	Duration   time.Duration
	Usage      Usage
	// Expected are the accounts the key's route policy meant the request
	// for (strict, preferred); empty when any account would do.
	Expected []string
	// Fallback says why this attempt ran outside Expected — cooling,
	// disabled, no_room, failed:<class>, breaker_open — and is empty when
	// it did not.
	Fallback string
	// Owner is the owner of the credential it ran on (BYOK): the owner
	// pays that upstream, so its cost is not the platform's. Zero: a
	// platform credential.
	Owner Owner
}

// UsageRecord is the durable account of one request: who, what, which
// attempts, and what it consumed. Written idempotently by RequestID.
type UsageRecord struct {
	RequestID  string
	KeyID      string
	Tenant     string
	Alias      string
	Protocol   Protocol
	Stream     bool
	Status     int // HTTP status the caller saw
	Code       Code
	Started    time.Time
	Latency    time.Duration
	TTFT       time.Duration
	Usage      Usage
	Executions []Execution
	Job        *JobUsage // set on the record of an async job, written when it ends

	EndUser  string // the request's end user (Request.User); "" = none named
	TaskType string // the task type it ran as
	Profile  string // the quota profile it ran under (Request.Profile); "" = none
	Pool     string // the pool its upstream capacity came from; "" = none
	Priority string // the priority class it ran at
	// Affinity is the request's session-affinity placement (Placement*);
	// "" when it had none (no seed, or not strategy affinity).
	Affinity string
	// CacheHit marks a request answered from the response cache
	// (docs/cache.md): it has no execution and used no upstream tokens;
	// Billing is what the cache's charge makes of the original answer.
	CacheHit bool
	// Billing is what the request was charged, fixed at admission (account,
	// plan, price versions) and settled from its measured usage; nil for a
	// request of an unbilled key or deployment. The ledger writes the charge
	// with the record, in one transaction, once however often the record is
	// written.
	Billing *Charge
}

// Session-affinity placements, as UsageRecord.Affinity and the outcome
// label of sluice_affinity_placements_total say them. The hit rate is
// hits / (hits + moves).
const (
	PlacementHit   = "hit"   // ran on the account its seed was bound to
	PlacementNew   = "new"   // no binding yet: placed on the account with the most free room
	PlacementMoved = "moved" // bound, but ran on another account, which is now its binding
)

// Charge is the money side of one usage record. Amounts are micro-units of
// the deployment's currency (billing.Micros; int64 here so that package
// sluice needs no other).
type Charge struct {
	Account      string // the billing account charged
	Plan         string // its price plan when the request was admitted
	PriceVersion string // the version of the plan's price of the alias (billing.Price.Version)
	CostVersion  string // the version of the served model's cost; "" = no cost known
	Price        int64  // what the account is charged: ≥ 0, 0 when Unmeasured
	Cost         int64  // what the upstream is paid: ≥ 0
	// Unmeasured marks a request whose usage could not be measured: it is
	// never charged by guess (Price is 0), and reports count it apart.
	Unmeasured bool
}

// JobState is how far an async job has got, whatever its protocol calls
// it. Its words are the stored and JSON forms.
type JobState string

// Job states: queued and in progress while it runs, then one of the
// others, for good.
const (
	JobQueued     JobState = "queued"
	JobInProgress JobState = "in_progress"
	JobCompleted  JobState = "completed"
	JobFailed     JobState = "failed"
	JobCancelled  JobState = "cancelled"
	JobExpired    JobState = "expired" // its end was never learned within the maximum age
)

// JobUsage is what the usage record of an async job (a video generation)
// adds. Its record has the job's ID as RequestID; Started is when the submit
// arrived and Latency runs to the job's end.
type JobUsage struct {
	State     JobState  // how it ended: completed, failed, cancelled or expired
	Submitted time.Time // the upstream accepted it
	Running   time.Time // first seen running; zero if never seen so
	Ended     time.Time
	Seconds   float64 // run or video length the upstream reported; 0 if none
}
