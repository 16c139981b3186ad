package admin

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// KeyRecord is a virtual key as the admin API shows it: never its hash or
// its plaintext.
type KeyRecord struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Tenant    string           `json:"tenant"`
	Prefix    string           `json:"prefix"`   // display prefix, far too short to use
	Status    sluice.KeyStatus `json:"status"`   // effective: an active key past its expiry is "expired"
	Models    []string         `json:"models"`   // allowed aliases; empty = all
	Priority  string           `json:"priority"` // default priority class
	ExpiresAt time.Time        `json:"expires_at,omitzero"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
	Static    bool             `json:"static"` // declared in the catalog, not in the store: read-only here
	Source    string           `json:"source"` // "catalog" (Static) or "api"
	KeySettings
}

// keyRecord is the view of k at now.
func keyRecord(k *sluice.Key, now time.Time) KeyRecord {
	return KeyRecord{
		ID: k.ID, Name: k.Name, Tenant: k.Tenant, Prefix: k.Prefix,
		Status: k.EffectiveStatus(now), Models: nonNil(k.Models), Priority: k.Priority,
		ExpiresAt: utc(k.ExpiresAt), CreatedAt: utc(k.CreatedAt), UpdatedAt: utc(k.UpdatedAt), Static: k.Static,
		Source: source(k), KeySettings: k.KeySettings,
	}
}

// nonNil makes a nil list empty, so that it renders as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// IssuedKey answers create and rotate: the plaintext key, shown this once,
// and the key's record.
type IssuedKey struct {
	Key    string    `json:"key"`
	Record KeyRecord `json:"record"`
}

// KeySpec is the body of POST /admin/keys. Name and Tenant are required.
// At most one of ExpiresAt and ExpiresIn may be set; neither means the key
// never expires.
type KeySpec struct {
	ID        string    `json:"id,omitempty"` // optional; letters, digits, '.', '_', '-'; generated when empty
	Name      string    `json:"name"`
	Tenant    string    `json:"tenant"`
	Models    []string  `json:"models,omitempty"`   // allowed aliases; empty = all
	Priority  string    `json:"priority,omitempty"` // default "standard"
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	ExpiresIn string    `json:"expires_in,omitempty"` // Go duration, e.g. "24h"
	Pending   bool      `json:"pending,omitempty"`    // created pending; enable activates it
	KeySettings
}

// Expiry is the body of POST /admin/keys/{id}/expire. At most one field may
// be set; none means now.
type Expiry struct {
	At    time.Time `json:"at,omitzero"`
	In    string    `json:"in,omitempty"`    // Go duration from now, e.g. "1h"; not negative
	Never bool      `json:"never,omitempty"` // remove the expiry
}

// ModelsBody is the body of PUT /admin/keys/{id}/models. Models is required;
// an empty list allows every alias.
type ModelsBody struct {
	Models *[]string `json:"models"`
}

// Removal is the body of POST /admin/credentials/{id}/remove; it may be
// empty. ?force=true in the query does the same as Force.
type Removal struct {
	// Force removes a draining credential although it still holds claims:
	// nothing new is sent to it from then on, and the work running on it
	// finishes (its claims are released as it ends). It is refused for any
	// other status.
	Force bool `json:"force,omitempty"`
}

// accountView is a as the API shows it: lists never null, times in UTC.
func accountView(a AccountState) AccountState {
	a.CoolingUntil, a.Since, a.Credentials = utc(a.CoolingUntil), utc(a.Since), nonNil(a.Credentials)
	return a
}

// credentialView is c as the API shows it: lists never null, times in UTC.
func credentialView(c CredentialState) CredentialState {
	c.CoolingUntil, c.Since, c.Endpoints = utc(c.CoolingUntil), utc(c.Since), nonNil(c.Endpoints)
	return c
}

// Status answers GET /admin/status: the catalog serving now and how many
// stored keys, upstream accounts and credentials are in each status.
type Status struct {
	CatalogStatus
	Keys        map[sluice.KeyStatus]int      `json:"keys,omitempty"`
	Accounts    map[sluice.UpstreamStatus]int `json:"accounts,omitempty"`    // by AccountState.Status; absent without a Pool
	Credentials map[sluice.UpstreamStatus]int `json:"credentials,omitempty"` // by CredentialState.Status; absent without a Pool
	// Replicas are the gateways on this database seen lately, by ID.
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
}

// UsageRecord is a usage record as the admin API shows it. Durations are
// milliseconds.
type UsageRecord struct {
	RequestID  string            `json:"request_id"`
	KeyID      string            `json:"key_id"`
	Tenant     string            `json:"tenant"`
	Alias      string            `json:"alias"`
	Protocol   sluice.Protocol   `json:"protocol"`
	Stream     bool              `json:"stream"`
	Status     int               `json:"status"` // HTTP status the caller saw
	Code       sluice.Code       `json:"code,omitempty"`
	Started    time.Time         `json:"started"`
	LatencyMS  float64           `json:"latency_ms"`
	TTFTMS     float64           `json:"ttft_ms"`
	Usage      TokenUsage        `json:"usage"`
	Executions []ExecutionRecord `json:"executions"`
	Job        *JobRecord        `json:"job,omitempty"`      // on the record of an async job
	Affinity   string            `json:"affinity,omitempty"` // session-affinity placement: hit, new, moved
	Model      string            `json:"model,omitempty"`    // the upstream model that served it: its last execution's
	EndUser    string            `json:"end_user,omitempty"`
	TaskType   string            `json:"task_type,omitempty"`
	// On a billed record: its billing account, and what it was charged.
	BillingAccount string         `json:"billing_account,omitempty"`
	Price          billing.Micros `json:"price,omitzero"`
}

// JobRecord is what the usage record of an async job adds: how it ended and
// when (running is absent if it was never seen running).
type JobRecord struct {
	State     sluice.JobState `json:"state"`
	Submitted time.Time       `json:"submitted"`
	Running   *time.Time      `json:"running,omitempty"`
	Ended     time.Time       `json:"ended"`
	Seconds   float64         `json:"seconds,omitempty"` // run or video length the upstream reported
}

// ExecutionRecord is one attempt on one edge. Durations are milliseconds.
type ExecutionRecord struct {
	EdgeID       string                 `json:"edge_id"`
	CredentialID string                 `json:"credential_id"`
	AccountID    string                 `json:"account_id"`
	EndpointID   string                 `json:"endpoint_id"`
	Model        string                 `json:"model"`
	Status       sluice.ExecutionStatus `json:"status"`
	HTTPStatus   int                    `json:"http_status,omitempty"`
	Error        string                 `json:"error,omitempty"`
	Started      time.Time              `json:"started"`
	FirstByteMS  float64                `json:"first_byte_ms"`
	DurationMS   float64                `json:"duration_ms"`
	Usage        TokenUsage             `json:"usage"`
	Expected     []string               `json:"expected"`           // accounts the key's policy meant it for; [] = any
	Fallback     string                 `json:"fallback,omitempty"` // why it ran outside expected: cooling, disabled, no_room, failed:<class>, breaker_open
	// Owner is whose own key (BYOK) it ran on; absent: a platform
	// credential's. Its upstream cost is the owner's, not in the record's cost.
	Owner *CredentialOwner `json:"owner,omitempty"`
}

// TokenUsage is sluice.Usage in JSON.
type TokenUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	Measured         bool  `json:"measured"`
}

func tokenUsage(u sluice.Usage) TokenUsage {
	return TokenUsage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens, TotalTokens: u.TotalTokens, Measured: u.Measured,
	}
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func usageRecord(r sluice.UsageRecord) UsageRecord {
	out := UsageRecord{
		RequestID: r.RequestID, KeyID: r.KeyID, Tenant: r.Tenant, Alias: r.Alias, Protocol: r.Protocol,
		Stream: r.Stream, Status: r.Status, Code: r.Code, Started: utc(r.Started),
		LatencyMS: ms(r.Latency), TTFTMS: ms(r.TTFT), Usage: tokenUsage(r.Usage),
		Executions: make([]ExecutionRecord, 0, len(r.Executions)), Affinity: r.Affinity,
		Model: ledger.ModelOf(&r), EndUser: r.EndUser, TaskType: r.TaskType,
	}
	if c := r.Billing; c != nil {
		out.BillingAccount, out.Price = c.Account, billing.Micros(c.Price)
	}
	for _, e := range r.Executions {
		out.Executions = append(out.Executions, ExecutionRecord{
			EdgeID: e.EdgeID, CredentialID: e.CredentialID, AccountID: e.AccountID, EndpointID: e.EndpointID,
			Model: e.Model, Status: e.Status, HTTPStatus: e.HTTPStatus, Error: e.Error, Started: utc(e.Started),
			FirstByteMS: ms(e.FirstByte), DurationMS: ms(e.Duration), Usage: tokenUsage(e.Usage),
			Expected: nonNil(e.Expected), Fallback: e.Fallback, Owner: credentialOwner(e.Owner),
		})
	}
	if j := r.Job; j != nil {
		out.Job = &JobRecord{State: j.State, Submitted: utc(j.Submitted), Ended: utc(j.Ended), Seconds: j.Seconds}
		if !j.Running.IsZero() {
			running := utc(j.Running)
			out.Job.Running = &running
		}
	}
	return out
}

// credentialOwner is o in JSON: nil for the platform.
func credentialOwner(o sluice.Owner) *CredentialOwner {
	if o.Platform() {
		return nil
	}
	return &CredentialOwner{Tenant: o.Tenant, User: o.User}
}
