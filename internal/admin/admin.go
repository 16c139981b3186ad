// Package admin is the operator's control plane: the admin HTTP API (virtual
// keys, upstream accounts and credentials, the catalog document, status,
// usage, billing, Prometheus metrics), the Go Client for it, and the CLI
// built on that client (sluice keys|accounts|credentials|billing|apply|status).
//
// It holds no state of its own: keys go through authn.Keyring, accounts and
// credentials through the app's Pool, the catalog through the app's Catalog,
// usage through ledger.Usage, money through Billing. It never returns or logs a key's hash or a
// credential's secret, and returns a plaintext key only in the answer to
// create or rotate. It may import sluice, authn, catalog, ledger, billing
// and config (whose rules for names it applies to what it creates); it
// must not import pipeline, ingress or app.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Options configures the admin API.
type Options struct {
	// Tokens are the admin bearer tokens, compared in constant time. A
	// read token may only GET; a write token may do everything. Without a
	// token every request is refused.
	Tokens []Token
	// Audit receives one entry per admin write; nil keeps none (and GET
	// /admin/audit answers 404).
	Audit catalog.Audit
	// Keys manages virtual keys, and the suspensions of billing accounts
	// and tenants (see Keyring.TrackSuspensions); required.
	Keys *authn.Keyring
	// Usage lists usage records; nil makes GET /admin/usage answer 404.
	Usage ledger.Usage
	// QueueWaits estimates the quantiles qs of the queue waits this
	// replica observed since it started, and how many it observed (see
	// metrics.QueueWaitQuantiles); nil leaves them out of GET
	// /admin/usage/summary.
	QueueWaits func(qs []float64) (observed uint64, waits []time.Duration)
	// Catalog is the running gateway's catalog; nil makes the catalog
	// routes answer 404 and status report no catalog.
	Catalog Catalog
	// Pool shows and maintains upstream accounts and credentials; nil makes
	// the account and credential routes answer 404.
	Pool Pool
	// Jobs finds and lists async job bindings; nil makes GET /admin/jobs
	// and /admin/jobs/{id} answer 404.
	Jobs Jobs
	// Billing is the ledger of billing accounts, prices and balances, and
	// what the catalog declares of them; nil makes the billing routes
	// answer 404.
	Billing Billing
	// Affinity reads session-affinity bindings; nil makes GET
	// /admin/affinity answer 404.
	Affinity Affinity
	// Entitlements hold the end users' entitlements to quota profiles;
	// nil makes the entitlement routes answer 404.
	Entitlements Entitlements
	// Metrics is served at GET /metrics without the admin token, for
	// Prometheus scrapers; nil answers 404.
	Metrics http.Handler
	// Ready reports whether the data plane takes new requests: GET
	// /readyz (no token) answers 204 while it does and 503 server_busy
	// once the drain began, while GET /healthz answers 204 as long as the
	// process serves. nil = always ready.
	Ready func() bool
	// Log receives one line per admin write and per failed request; nil
	// discards them. Tokens and plaintext keys never reach it.
	Log *slog.Logger
}

// Catalog is what the admin API needs from the running gateway's catalog.
// Implementations must be safe for concurrent use.
type Catalog interface {
	// Status reports what is serving now.
	Status() CatalogStatus
	// Apply validates doc and makes it serve. ifVersion is the version the
	// operator last saw (0 = no check). It returns an error wrapping
	// catalog.ErrConflict when ifVersion is stale, one wrapping
	// ErrCatalogReadOnly when the catalog cannot be changed through the API,
	// one wrapping ErrCatalogEmptied when doc has no models (or no keys)
	// while the serving catalog has some, unless force is set, and any
	// other error (for example *InvalidCatalogError) when doc is invalid;
	// that error's text is shown to the operator in full. by is the admin
	// token's ID, stored with the version.
	Apply(ctx context.Context, doc []byte, ifVersion int64, force bool, by string) (CatalogStatus, error)
	// CatalogHistory is the numbered versions and the replicas serving them.
	CatalogHistory
}

// CatalogStatus describes the catalog serving now.
type CatalogStatus struct {
	Version     int64     `json:"version"`                // serving snapshot version
	Source      string    `json:"source"`                 // "file:/path", "store", "demo"
	LoadedAt    time.Time `json:"loaded_at"`              // when the serving snapshot was compiled
	LastError   string    `json:"last_error,omitempty"`   // last failed reload, kept until a reload succeeds
	LastErrorAt time.Time `json:"last_error_at,omitzero"` // when LastError happened
	Document    []byte    `json:"-"`                      // the YAML serving now; GET /admin/catalog serves it
	Aliases     []string  `json:"aliases"`                // model aliases the catalog serves
	// StoredVersion is the stored catalog version serving (see GET
	// /admin/catalog/versions); 0 when the catalog is a file or the demo.
	StoredVersion int64  `json:"stored_version,omitempty"`
	Replica       string `json:"replica,omitempty"` // the ID of the replica that answered
}

// Tag is the catalog's version as its ETag and If-Match name it: the
// stored version when one serves, which every replica on the database
// numbers alike, else the serving snapshot's.
func (st CatalogStatus) Tag() int64 {
	if st.StoredVersion != 0 {
		return st.StoredVersion
	}
	return st.Version
}

// ErrCatalogReadOnly is wrapped by Catalog.Apply when the catalog is managed
// by something else (a file) and cannot be changed through the admin API.
var ErrCatalogReadOnly = errors.New("catalog is read-only")

// ErrCatalogEmptied is wrapped by Catalog.Apply when a catalog without
// models or without keys would replace one that has them: a document cut
// short or a template left unfilled would stop every request. An apply
// with force goes through.
var ErrCatalogEmptied = errors.New("it would drop every model alias or every catalog key serving now")

// InvalidCatalogError is a catalog document that failed to decode or
// validate. Err usually joins every problem (errors.Join), one per line.
type InvalidCatalogError struct {
	Err error
}

// Error returns every problem, one per line.
func (e *InvalidCatalogError) Error() string { return "invalid catalog: " + e.Err.Error() }

// Unwrap exposes the problems to errors.Is and errors.As.
func (e *InvalidCatalogError) Unwrap() error { return e.Err }

// Pool is what the admin API needs to see and maintain upstream accounts
// and credentials. Implementations must be safe for concurrent use. An error
// that is a *sluice.Error is shown to the operator as it is; any other error
// not described here answers 500.
type Pool interface {
	// Accounts returns the state of every account.
	Accounts(ctx context.Context) ([]AccountState, error)
	// Credentials returns the state of every credential.
	Credentials(ctx context.Context) ([]CredentialState, error)
	// SetCredential applies "disable", "drain", "enable" or "remove". remove is
	// refused with an error wrapping ErrClaimsHeld while the credential holds
	// claims, unless it is draining and force is set. Unknown id → wraps catalog.ErrNotFound.
	SetCredential(ctx context.Context, id, action string, force bool) (CredentialState, error)
	// SetAccount applies "disable" or "enable" (re-enabling an account disabled by a billing failure).
	// Unknown id → wraps catalog.ErrNotFound.
	SetAccount(ctx context.Context, id, action string) (AccountState, error)
}

// ErrClaimsHeld is wrapped by Pool.SetCredential when a remove would drop running work.
var ErrClaimsHeld = errors.New("claims held")

// AccountState is an upstream account as the operator sees it: its limits,
// its load and its cooldown now. Times are UTC.
type AccountState struct {
	ID         string `json:"id"`
	QuotaScope string `json:"quota_scope"`
	Cap        int    `json:"cap"` // max in flight; 0 = unlimited (for quota_scope credential: per credential)
	InFlight   int    `json:"in_flight"`
	Waiting    int    `json:"waiting"`
	// WaitingByClass splits Waiting by priority class (interactive, standard, background).
	WaitingByClass map[string]int `json:"waiting_by_class,omitempty"`
	// OldestWaitByClass is when the oldest waiting request of each class arrived.
	OldestWaitByClass map[string]time.Time `json:"oldest_wait_by_class,omitempty"`
	// WaitingByTenant splits Waiting by tenant.
	WaitingByTenant map[string]int        `json:"waiting_by_tenant,omitempty"` // queued requests that could use it
	CoolingUntil    time.Time             `json:"cooling_until,omitzero"`
	Level           int                   `json:"backoff_level"`
	Probe           string                `json:"probe,omitempty"` // "", "available", "in_flight"
	Status          sluice.UpstreamStatus `json:"status"`          // active | disabled
	Reason          string                `json:"reason,omitempty"`
	Since           time.Time             `json:"since,omitzero"`
	Credentials     []string              `json:"credentials"`
	// Models are the account's per-model units (accounts[].models), by model.
	Models []ModelUnitState `json:"models,omitempty"`
	// CooledSeconds sums the cooldowns set on the account (quota_scope
	// account; 0 for quota_scope credential, whose credentials cool each
	// on its own) since the shared store's state began: seconds,
	// cluster-wide, each moment counted once.
	CooledSeconds float64 `json:"cooled_seconds"`
	// Picture is what the account's executions in the usage database
	// say, over fixed windows: only GET /admin/accounts/{id} has it, and
	// only on a gateway with a usage database.
	Picture *UpstreamPicture `json:"picture,omitempty"`
}

// ModelUnitState is one per-model unit under an account: its claims and
// its own cooldown, which a rate limit scoped to the model sets.
type ModelUnitState struct {
	Model        string    `json:"model"`
	Cap          int       `json:"cap"` // 0 = unlimited (the account's cap still holds)
	InFlight     int       `json:"in_flight"`
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
	Level        int       `json:"backoff_level"`
	Probe        string    `json:"probe,omitempty"`
	// CooledSeconds sums the cooldowns set on the model's unit (see
	// AccountState.CooledSeconds).
	CooledSeconds float64 `json:"cooled_seconds"`
}

// CredentialState is an upstream credential as the operator sees it: never
// its secret. Times are UTC.
type CredentialState struct {
	ID           string                `json:"id"`
	Account      string                `json:"account"`
	Status       sluice.UpstreamStatus `json:"status"` // active | draining | disabled | removed
	Reason       string                `json:"reason,omitempty"`
	Since        time.Time             `json:"since,omitzero"`
	InFlight     int                   `json:"in_flight"`
	CoolingUntil time.Time             `json:"cooling_until,omitzero"` // for quota_scope credential, its own cooldown
	Endpoints    []string              `json:"endpoints"`
	// Owner is the tenant (and end user) whose own key it is (BYOK): it
	// serves only their requests. Absent: a platform credential.
	Owner *CredentialOwner `json:"owner,omitempty"`
	// CooledSeconds sums the cooldowns set on the credential's own unit
	// (quota_scope credential; 0 otherwise: see AccountState.CooledSeconds).
	CooledSeconds float64 `json:"cooled_seconds"`
}

// CredentialOwner is the owner of a BYOK credential.
type CredentialOwner struct {
	Tenant string `json:"tenant"`
	User   string `json:"user,omitempty"`
}

// String is how the CLI names the owner: "acme", or "acme/user-1".
func (o *CredentialOwner) String() string {
	switch {
	case o == nil:
		return "platform"
	case o.User != "":
		return o.Tenant + "/" + o.User
	}
	return o.Tenant
}

// An address may send failedTokens wrong admin tokens at once, and one
// more each failedTokenRefill: enough for an operator's typos, far too few
// to guess a token.
const (
	failedTokens      = 10
	failedTokenRefill = 6 * time.Second
)

// maxBody bounds every admin request body.
const maxBody = 1 << 20

// server is the admin http.Handler.
type server struct {
	tokens   []token
	audit    catalog.Audit
	routes   []route // every route, in the order registered
	keys     *authn.Keyring
	usage    ledger.Usage
	catalog  Catalog
	pool     Pool
	jobs     Jobs
	billing  Billing
	affinity Affinity
	metrics  http.Handler
	ready    func() bool
	log      *slog.Logger
	throttle *authn.Throttle // failed tokens per client address
	mux      *http.ServeMux
	console  http.Handler // the web console's files, under /console/
	now      func() time.Time

	entitlements Entitlements
	queueWaits   func(qs []float64) (uint64, []time.Duration)
}

// New returns the admin API handler. Every route except GET /metrics,
// GET /healthz and GET /readyz requires "Authorization: Bearer <token>" with one of
// Options.Tokens; a read token may only GET. Every write is recorded in the
// audit log (see record).
//
//	GET  /admin/status                  CatalogStatus plus key, account and credential counts by status
//	GET  /admin/catalog                 the serving YAML, ETag "<version>"
//	PUT  /admin/catalog?force=true      apply YAML (If-Match "<version>" optional; force to drop every alias or key)
//	GET  /admin/catalog/versions?limit= []CatalogVersion, newest first
//	GET  /admin/catalog/versions/{version}      its YAML (passwords redacted)
//	GET  /admin/catalog/versions/{version}/diff?from=A  unified diff from A (default: the version before)
//	POST /admin/catalog/versions/{version}/rollback     CatalogStatus: stores a new version with its document
//	POST /admin/keys                    create (KeySpec) → 201 IssuedKey
//	GET  /admin/keys?selector=&limit=&after= []KeyRecord: every key whose labels match, or a page (X-Total-Count, X-Next-After)
//	GET  /admin/keys/{id}               KeyRecord
//	POST /admin/keys/{id}/disable       KeyRecord (also enable, revoke)
//	POST /admin/keys/{id}/rotate        IssuedKey
//	POST /admin/keys/{id}/expire        Expiry → KeyRecord
//	PUT  /admin/keys/{id}/models        {"models":[…]} → KeyRecord
//	POST /admin/keys/batch              Batch (selector, operation, dry_run) → BatchResult
//	PATCH /admin/keys/{id}              KeyChange → KeyRecord (every field of a key; a catalog key answers 409 key_read_only)
//	GET  /admin/accounts                []AccountState
//	GET  /admin/accounts/{id}           AccountState, with its Picture (UpstreamPicture) on a gateway with a usage database
//	POST /admin/accounts/{id}/disable   AccountState (also enable)
//	GET  /admin/credentials             []CredentialState
//	GET  /admin/credentials/{id}        CredentialState
//	POST /admin/credentials/{id}/drain  CredentialState (also disable, enable)
//	POST /admin/credentials/{id}/remove Removal (optional) → CredentialState
//	GET  /admin/usage?since=&until=&tenant=&key=&alias=&model=&end_user=&task_type=&code=&limit=&format=csv []UsageRecord, or CSV
//	GET  /admin/usage/summary?bucket=&since=&until=&(the filters of /admin/usage) UsageSummary
//	GET  /admin/usage/policy?key=&from=&to= PolicyReport: expected vs actual accounts per key
//	GET  /admin/usage/cache?from=&to=&by= CacheReport: prompt-cache tokens and affinity hit rate per account, alias, day
//	GET  /admin/audit?since=&action=&target=&limit= []AuditEntry, newest first
//	GET  /admin/jobs?since=&state=&tenant=&key=&limit= []JobState, newest first
//	GET  /admin/affinity?session=&alias=&tenant= AffinityBinding (or ?seed=): a session-affinity binding
//	GET  /admin/billing/accounts        []BillingAccount (the catalog's and the stored, with balance and spend)
//	GET  /admin/billing/accounts/{id}   BillingAccount
//	PUT  /admin/billing/accounts/{id}   BillingAccountSpec → BillingAccount (201 created; a catalog account answers 409)
//	POST /admin/billing/accounts/{id}/topup   MoneyChange (Idempotency-Key) → Posted (also adjust)
//	POST /admin/billing/accounts/{id}/refund  Refund → Posted (a request's charge back, once)
//	GET  /admin/billing/accounts/{id}/statement?from=&to=&limit= Statement
//	GET  /admin/billing/prices?kind=&plan=&alias=&model= []Price
//	POST /admin/billing/prices          PriceSpec → Price (a new version, from now on)
//	GET  /admin/billing/spend?by=&from=&to=&account=&key= SpendReport (price, cost, margin)
//	GET  /admin/entitlements?tenant=&user=&profile= []Entitlement
//	PUT  /admin/entitlements            EntitlementsPut (up to 1000, all or none; dry_run) → EntitlementsResult
//	DELETE /admin/entitlements          EntitlementsDelete (dry_run) → EntitlementsResult
//	POST /admin/billing/accounts/{id}/suspend SuspendRequest → BillingAccount (also resume, without a body)
//	GET  /admin/tenants                 []Tenant (keys and suspension of each)
//	GET  /admin/tenants/{id}            Tenant
//	POST /admin/tenants/{id}/suspend    SuspendRequest → Tenant (also resume, without a body)
//	POST /admin/accounts/{id}/suspend   SuspendRequest → AccountState (disabled, with the reason; resume enables)
//
// Errors use the OpenAI envelope {"error":{"message","type","code"}}.
func New(opts Options) http.Handler {
	s := &server{
		tokens:   compileTokens(opts.Tokens),
		audit:    opts.Audit,
		keys:     opts.Keys,
		usage:    opts.Usage,
		catalog:  opts.Catalog,
		pool:     opts.Pool,
		jobs:     opts.Jobs,
		billing:  opts.Billing,
		affinity: opts.Affinity,
		metrics:  opts.Metrics,
		ready:    opts.Ready,
		log:      opts.Log,
		throttle: authn.NewThrottle(failedTokens, failedTokenRefill, nil),
		mux:      http.NewServeMux(),
		console:  console.Handler(),
		now:      time.Now,
	}
	s.entitlements = opts.Entitlements
	s.queueWaits = opts.QueueWaits
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if len(s.tokens) == 0 {
		s.log.LogAttrs(context.Background(), slog.LevelError, "admin API has no token: every request will be refused")
	}
	s.read("GET /admin/status", s.status)
	s.read("GET /admin/catalog", s.getCatalog)
	s.write("PUT /admin/catalog", "catalog.apply", theCatalog, s.applyCatalog)
	s.registerCatalogVersions()
	s.write("POST /admin/keys", "keys.create", keyCreated, s.createKey)
	s.read("GET /admin/keys", s.listKeys)
	s.read("GET /admin/keys/{id}", s.showKey)
	s.write("POST /admin/keys/batch", "keys.batch", selfNoted, s.batchKeys)
	s.write("POST /admin/keys/{id}/disable", "keys.disable", keyByPath, s.transition("keys.disable", s.keys.Disable))
	s.write("POST /admin/keys/{id}/enable", "keys.enable", keyByPath, s.transition("keys.enable", s.keys.Enable))
	s.write("POST /admin/keys/{id}/revoke", "keys.revoke", keyByPath, s.transition("keys.revoke", s.keys.Revoke))
	s.write("POST /admin/keys/{id}/rotate", "keys.rotate", keyByPath, s.rotateKey)
	s.write("POST /admin/keys/{id}/expire", "keys.expire", keyByPath, s.expireKey)
	s.write("PUT /admin/keys/{id}/models", "keys.models", keyByPath, s.setModels)
	s.write("PATCH /admin/keys/{id}", "keys.update", keyByPath, s.updateKey)
	s.read("GET /admin/accounts", listAll(s, accountKind))
	s.read("GET /admin/accounts/{id}", showOne(s, accountKind))
	for _, action := range []string{"disable", "enable"} {
		s.write("POST /admin/accounts/{id}/"+action, "accounts."+action, accountByPath, s.setAccount(action))
	}
	s.read("GET /admin/credentials", listAll(s, credentialKind))
	s.read("GET /admin/credentials/{id}", showOne(s, credentialKind))
	for _, action := range []string{"disable", "drain", "enable", "remove"} {
		s.write("POST /admin/credentials/{id}/"+action, "credentials."+action, credentialByPath, s.setCredential(action))
	}
	s.read("GET /admin/usage", s.listUsage)
	s.read("GET /admin/usage/summary", s.usageSummary)
	s.read("GET /admin/usage/policy", s.policyReport)
	s.read("GET /admin/usage/cache", s.cacheReport)
	s.read("GET /admin/audit", s.listAudit)
	s.read("GET /admin/jobs", s.listJobs)
	s.read("GET /admin/jobs/{id}", s.showJob)
	s.read("GET /admin/affinity", s.affinityBinding)
	s.registerBilling()
	s.registerEntitlements()
	s.registerSuspensions()
	return s
}

// ServeHTTP serves /metrics, /healthz and /readyz to anyone, then checks the token
// before it routes, so an unauthenticated caller learns nothing about the
// routes. An address that sent too many wrong tokens is answered 429
// (access_auth_throttled) without a look at its token until its budget
// refills, and only its failures that were looked at are logged.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/metrics", p == "/healthz", p == "/readyz":
		s.public(w, r)
		return
	case p == sessionPath:
		s.serveSession(w, r)
		return
	case p == "/console":
		http.Redirect(w, r, console.Prefix, http.StatusMovedPermanently)
		return
	case strings.HasPrefix(p, console.Prefix):
		// The page itself holds nothing secret: it signs in before it asks
		// the API for anything.
		s.console.ServeHTTP(w, r)
		return
	}
	source := authn.Source(r)
	if wait, refused := s.throttle.Refused(source); refused {
		writeError(w, &sluice.Error{Code: sluice.CodeAuthThrottled, RetryAfter: wait,
			Msg: "too many failed admin tokens from this address; retry after the Retry-After"})
		return
	}
	by, ok, csrfOK := s.authorize(r)
	if !ok {
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr)}
		if n := s.throttle.Failed(source); n > 0 {
			attrs = append(attrs, slog.Int("refused_since_last", n))
		}
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "admin request unauthorized", attrs...)
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-admin"`)
		writeError(w, &sluice.Error{Code: CodeUnauthorized, Msg: "missing or invalid admin token"})
		return
	}
	_, pattern := s.mux.Handler(r)
	switch {
	case pattern == "":
		s.unrouted(w, r)
	case readOnly(r.Method):
		s.mux.ServeHTTP(w, r)
	case !csrfOK:
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "console write without its CSRF token refused", slog.String("token_id", by.id),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
		writeError(w, &sluice.Error{Code: CodeForbidden, Msg: "a write through a console session needs the session's " + csrfHeader + " header"})
	case by.role != RoleWrite:
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "admin write refused to a read token", slog.String("token_id", by.id),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
		writeError(w, &sluice.Error{Code: CodeForbidden, Msg: fmt.Sprintf(
			"admin token %q has the role %s, which may only GET; %s %s needs a token with the role %s", by.id, by.role, r.Method, r.URL.Path, RoleWrite)})
	default:
		s.record(w, r, by, pattern)
	}
}

// public serves the routes that need no token.
func (s *server) public(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, sluice.Errorf(sluice.CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path))
		return
	}
	switch {
	case r.URL.Path == "/healthz":
		w.WriteHeader(http.StatusNoContent)
		return
	case r.URL.Path == "/readyz" && s.ready != nil && !s.ready():
		writeError(w, sluice.Errorf(sluice.CodeServerBusy, "draining: the gateway is shutting down and takes no new requests"))
		return
	case r.URL.Path == "/readyz":
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.metrics == nil {
		writeError(w, sluice.Errorf(sluice.CodeNotFound, "metrics are not enabled"))
		return
	}
	s.metrics.ServeHTTP(w, r)
}

// unrouted answers 405 when the path exists under another method, else 404.
func (s *server) unrouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, sluice.Errorf(sluice.CodeNotFound, "unknown path "+r.Method+" "+r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, sluice.Errorf(sluice.CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path))
}

// handle adapts a handler that returns an error, rendering and logging it.
func (s *server) handle(fn func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			s.fail(w, r, err)
		}
	}
}

// fail logs err once and renders its public face. Only Msg and Code reach
// the caller; an internal cause stays in the log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := asError(err)
	status := statusOf(e.Code)
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	s.log.LogAttrs(r.Context(), level, "admin request failed",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.String("code", string(e.Code)), slog.String("err", err.Error()))
	if rec := recorderOf(w); rec != nil {
		rec.entry.Error = string(e.Code)
	}
	writeError(w, e)
}

// wrote logs a successful admin write. attrs never hold a token, a hash or
// a plaintext key.
func (s *server) wrote(ctx context.Context, action string, attrs ...slog.Attr) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "admin write", append([]slog.Attr{slog.String("action", action)}, attrs...)...)
}
