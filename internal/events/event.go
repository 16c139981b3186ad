// Package events publishes what the usage records of settled requests say
// as events on NATS JetStream, and reads them back into a reporting
// database (sluice consume). Events are derived from the records the
// settle.Recorder spools, and published from that spool as an outbox: a
// record's segment goes only once JetStream has acknowledged each of its
// events, every one under a stable message ID that the stream's duplicate
// window deduplicates. The schema is docs/events.md.
package events

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Schema names the layout of every event's JSON. Within v1 fields are only
// added; a consumer ignores fields it does not know.
const Schema = "sluice.usage.v1"

// The kinds of event, each the second-to-last token of its subject.
const (
	KindRequest   = "request"   // a request settled: one per usage record
	KindExecution = "execution" // one attempt on one upstream edge
	KindCharge    = "charge"    // what a billed request was charged
	KindJob       = "job"       // an async job's state, once per state it reached
)

// Kinds lists every kind, in the order a record's events are published.
var Kinds = []string{KindRequest, KindExecution, KindCharge, KindJob}

// Event is one event's JSON. The identity fields are on every kind so that
// a consumer can filter and group without joining; each kind adds its own
// section.
type Event struct {
	Schema     string    `json:"schema"`
	Kind       string    `json:"kind"`
	EventID    string    `json:"event_id"` // also the Nats-Msg-Id header
	RequestID  string    `json:"request_id"`
	OccurredAt time.Time `json:"occurred_at"`

	Tenant   string `json:"tenant,omitempty"`
	KeyID    string `json:"key_id,omitempty"`
	EndUser  string `json:"end_user,omitempty"`
	TaskType string `json:"task_type,omitempty"`
	Profile  string `json:"profile,omitempty"`
	Pool     string `json:"pool,omitempty"`
	Priority string `json:"priority,omitempty"`
	Alias    string `json:"alias,omitempty"`
	Protocol string `json:"protocol,omitempty"` // the caller's
	Stream   bool   `json:"stream,omitempty"`

	Request   *Request   `json:"request,omitempty"`
	Execution *Execution `json:"execution,omitempty"`
	Charge    *Charge    `json:"charge,omitempty"`
	Job       *Job       `json:"job,omitempty"`
}

// Request is a request event's own section: how it ended and what it
// consumed, with the upstream that answered it (its last execution).
type Request struct {
	Status     int       `json:"status"`
	Code       string    `json:"code,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	LatencyMS  int64     `json:"latency_ms"`
	TTFTMS     int64     `json:"ttft_ms"`
	Usage      Usage     `json:"usage"`
	Executions int       `json:"executions"`

	Model            string `json:"model,omitempty"`
	Account          string `json:"account_id,omitempty"`
	Credential       string `json:"credential_id,omitempty"`
	Endpoint         string `json:"endpoint_id,omitempty"`
	UpstreamProtocol string `json:"upstream_protocol,omitempty"`
	FallbackReason   string `json:"fallback_reason,omitempty"`
	Affinity         string `json:"affinity,omitempty"`
	Billed           bool   `json:"billed,omitempty"`    // a charge event follows
	CacheHit         bool   `json:"cache_hit,omitempty"` // answered from the response cache: no execution
}

// Execution is one attempt's section.
type Execution struct {
	N                int       `json:"n"` // 1 for the first attempt
	EdgeID           string    `json:"edge_id"`
	Credential       string    `json:"credential_id"`
	Account          string    `json:"account_id"`
	Endpoint         string    `json:"endpoint_id"`
	Model            string    `json:"model"`
	Protocol         string    `json:"protocol,omitempty"` // spoken upstream
	Status           string    `json:"status"`
	HTTPStatus       int       `json:"http_status,omitempty"`
	Error            string    `json:"error,omitempty"`
	StartedAt        time.Time `json:"started_at"`
	FirstByteMS      int64     `json:"first_byte_ms"`
	DurationMS       int64     `json:"duration_ms"`
	Usage            Usage     `json:"usage"`
	ExpectedAccounts []string  `json:"expected_accounts,omitempty"`
	FallbackReason   string    `json:"fallback_reason,omitempty"`
	OwnerTenant      string    `json:"owner_tenant,omitempty"`
	OwnerUser        string    `json:"owner_user,omitempty"`
}

// Usage is tokens as the upstream reported them. Measured is false when
// it reported none: the counts are then 0, never a guess.
type Usage struct {
	Measured         bool  `json:"measured"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Charge is a charge event's section: money in integer micro-units of
// Currency.
type Charge struct {
	BillingAccount string `json:"billing_account"`
	Plan           string `json:"plan"`
	PriceVersion   string `json:"price_version"`
	CostVersion    string `json:"cost_version,omitempty"`
	PriceMicros    int64  `json:"price_micros"`
	CostMicros     int64  `json:"cost_micros"`
	Currency       string `json:"currency,omitempty"`
	Unmeasured     bool   `json:"unmeasured,omitempty"`
}

// Job is a job event's section: the state it reached and when, with the
// job's whole history as far as it is known.
type Job struct {
	State       string     `json:"state"`
	SubmittedAt time.Time  `json:"submitted_at"`
	RunningAt   *time.Time `json:"running_at,omitempty"`
	EndedAt     time.Time  `json:"ended_at"`
	Seconds     float64    `json:"seconds,omitempty"`
}

// Message is one event ready to publish.
type Message struct {
	ID      string // Nats-Msg-Id: the event's ID
	Subject string
	Kind    string
	Data    []byte
}

// Encoder turns usage records into messages.
type Encoder struct {
	Prefix   string // subject prefix, e.g. sluice.usage
	Currency string // of every charge; "" when not known
}

// Encode appends the messages of rec to msgs: its request event, one per
// execution, its charge (when billed), and one per state of a job.
func (e Encoder) Encode(msgs []Message, rec *sluice.UsageRecord) ([]Message, error) {
	for _, ev := range e.Events(rec) {
		data, err := json.Marshal(&ev)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, Message{ID: ev.EventID, Subject: e.Subject(ev.Kind, ev.Tenant), Kind: ev.Kind, Data: data})
	}
	return msgs, nil
}

// Events are the events of rec, in publishing order.
func (e Encoder) Events(rec *sluice.UsageRecord) []Event {
	base := Event{
		Schema: Schema, RequestID: rec.RequestID,
		Tenant: rec.Tenant, KeyID: rec.KeyID, EndUser: rec.EndUser, TaskType: rec.TaskType, Profile: rec.Profile,
		Pool: rec.Pool, Priority: rec.Priority, Alias: rec.Alias, Protocol: string(rec.Protocol), Stream: rec.Stream,
	}
	settled := rec.Started.Add(rec.Latency)
	req := base
	req.Kind, req.EventID, req.OccurredAt = KindRequest, rec.RequestID+":settle", settled
	req.Request = &Request{
		Status: rec.Status, Code: string(rec.Code), StartedAt: rec.Started,
		LatencyMS: rec.Latency.Milliseconds(), TTFTMS: rec.TTFT.Milliseconds(), Usage: usage(rec.Usage),
		Executions: len(rec.Executions), Affinity: rec.Affinity, Billed: rec.Billing != nil, CacheHit: rec.CacheHit,
	}
	if n := len(rec.Executions); n > 0 {
		last := &rec.Executions[n-1]
		r := req.Request
		r.Model, r.Account, r.Credential, r.Endpoint = last.Model, last.AccountID, last.CredentialID, last.EndpointID
		r.UpstreamProtocol, r.FallbackReason = string(last.Protocol), last.Fallback
	}
	evs := make([]Event, 0, 2+len(rec.Executions)+3)
	evs = append(evs, req)
	for i := range rec.Executions {
		x := &rec.Executions[i]
		ev := base
		ev.Kind, ev.EventID, ev.OccurredAt = KindExecution, rec.RequestID+":exec:"+strconv.Itoa(i+1), x.Started.Add(x.Duration)
		ev.Execution = &Execution{
			N: i + 1, EdgeID: x.EdgeID, Credential: x.CredentialID, Account: x.AccountID, Endpoint: x.EndpointID,
			Model: x.Model, Protocol: string(x.Protocol), Status: string(x.Status), HTTPStatus: x.HTTPStatus, Error: x.Error,
			StartedAt: x.Started, FirstByteMS: x.FirstByte.Milliseconds(), DurationMS: x.Duration.Milliseconds(),
			Usage: usage(x.Usage), ExpectedAccounts: x.Expected, FallbackReason: x.Fallback,
			OwnerTenant: x.Owner.Tenant, OwnerUser: x.Owner.User,
		}
		evs = append(evs, ev)
	}
	if c := rec.Billing; c != nil {
		ev := base
		ev.Kind, ev.EventID, ev.OccurredAt = KindCharge, rec.RequestID+":charge", settled
		ev.Charge = &Charge{
			BillingAccount: c.Account, Plan: c.Plan, PriceVersion: c.PriceVersion, CostVersion: c.CostVersion,
			PriceMicros: c.Price, CostMicros: c.Cost, Currency: e.Currency, Unmeasured: c.Unmeasured,
		}
		evs = append(evs, ev)
	}
	if j := rec.Job; j != nil {
		evs = append(evs, jobEvents(base, j)...)
	}
	return evs
}

// jobEvents are one event per state the job is known to have reached: it
// was queued when the upstream accepted it, ran when first seen running,
// and ended in its final state. Its record is written when it ends, so all
// of them are published then.
func jobEvents(base Event, j *sluice.JobUsage) []Event {
	section := Job{State: string(j.State), SubmittedAt: j.Submitted, EndedAt: j.Ended, Seconds: j.Seconds}
	if math.IsNaN(j.Seconds) || math.IsInf(j.Seconds, 0) {
		section.Seconds = 0 // JSON has no such number, and an event that cannot be encoded would never leave the spool
	}
	if !j.Running.IsZero() {
		running := j.Running
		section.RunningAt = &running
	}
	type step struct {
		state sluice.JobState
		at    time.Time
	}
	steps := []step{{sluice.JobQueued, j.Submitted}}
	if section.RunningAt != nil {
		steps = append(steps, step{sluice.JobInProgress, j.Running})
	}
	steps = append(steps, step{j.State, j.Ended})
	evs := make([]Event, 0, len(steps))
	for _, s := range steps {
		ev := base
		ev.Kind, ev.EventID, ev.OccurredAt = KindJob, base.RequestID+":job:"+string(s.state), s.at
		js := section
		js.State = string(s.state)
		ev.Job = &js
		evs = append(evs, ev)
	}
	return evs
}

func usage(u sluice.Usage) Usage {
	return Usage{Measured: u.Measured, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens, TotalTokens: u.TotalTokens}
}

// Subject is where an event of kind for tenant is published:
// <prefix>.<kind>.<tenant token>.
func (e Encoder) Subject(kind, tenant string) string {
	return e.Prefix + "." + kind + "." + SubjectToken(tenant)
}

// NoTenant is the subject token of an event whose request had no tenant.
// No tenant escapes to it: that would be a tenant of one NUL byte, which no
// tenant ID can be.
const NoTenant = "%00"

// SubjectToken makes s one subject token: letters, digits, '-' and '_'
// stay, every other byte (the '.' of a tenant ID, which would split the
// token, '%' itself, '*', '>', spaces, any non-ASCII byte) becomes '%'
// and its two hex digits, upper case, as in a URL; "" becomes NoTenant.
// url.PathUnescape reverses it.
func SubjectToken(s string) string {
	if s == "" {
		return NoTenant
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return !plain(r) }) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(rune(c)) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func plain(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_'
}
