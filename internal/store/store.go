// Package store defines the hot shared state of the gateway behind small
// interfaces: capacity claims (leases) on upstream accounts and credentials,
// the wait queue, per-account cooldowns with a single probe, and the status
// of credentials and accounts (disabled, draining). memstore holds it in one
// process; redisstore shares it between replicas through Redis (one Lua
// script per decision, keys hash-tagged by capacity domain). storetest is
// the contract suite both pass. This package depends only on the standard
// library and package sluice.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// Unit is one capacity unit a request claims a slot in: an upstream account
// (quota_scope account) or a credential acting as its own account
// (quota_scope credential, or a credential without an account). Cooldowns
// apply to the whole unit.
type Unit struct {
	ID   string        // stable: the account ID, or the credential ID for credential scope
	Cap  int           // max in-flight claims; 0 = unlimited
	Base time.Duration // cooldown after a rate limit without retry-after: Base·2^level …
	Max  time.Duration // … capped at Max; a retry-after is honoured up to Max as well
	// Reserve[k] is the number of the unit's slots that tickets of classes
	// less urgent than k (Acquire.Class > k) may not use: a ticket of class
	// c may take a slot only if InFlight < Cap - Σ_{k<c} Reserve[k]. E.g.
	// Cap 4, Reserve [1]: class 0 may use all 4 slots, classes 1 and 2
	// only 3. A nil or short slice means 0 for the missing entries;
	// negative entries count as 0. Ignored when Cap is 0 (unlimited). It
	// applies to the post-cooldown probe as well.
	Reserve []int
	// RPM and TPM limit the requests and the tokens the unit admits in a
	// rolling one-minute window; 0 = unlimited. Each is a GCRA with an
	// emission interval of one minute / limit and a burst tolerance of one
	// minute: a grant of cost c (1 request for RPM, Acquire.Tokens for TPM)
	// moves the dimension's theoretical arrival time TAT to max(TAT, now) +
	// c·interval, and is allowed only if that is at most now + 1 minute. So
	// over any minute the unit admits about RPM requests and TPM tokens,
	// burst included, and as the check and the reservation are one atomic
	// step, replicas sharing a store never exceed a limit together by more
	// than one request's reservation.
	RPM int
	TPM int
	// DailyTokens limits the tokens the unit admits per UTC day; 0 =
	// unlimited. A grant is allowed only if the tokens reserved and used
	// today plus Acquire.Tokens is at most DailyTokens (an estimate above
	// DailyTokens counts as DailyTokens, as with TPM, so it can still run
	// alone on a fresh day); it reserves Acquire.Tokens for the day, and
	// Outcome.Tokens corrects the reservation on Release (same day only).
	// A unit refused for its day gets Grant.RetryAt at the next UTC
	// midnight.
	DailyTokens int
	// DailyRequests limits the grants of the unit per UTC day (by the
	// store's clock); 0 = unlimited. Each grant counts one request at the
	// grant and is never given back: a request admitted counts even if it
	// fails, as with RPM. A unit refused for its day gets Grant.RetryAt at
	// the next UTC midnight, as with DailyTokens.
	DailyRequests int
	// BackgroundPause holds background back after a rate limit: a ticket
	// of the background class (Acquire.Class 2) is granted a slot of the
	// unit only once BackgroundPause has passed since the unit's last rate
	// limit (a Release with Outcome.RateLimited of any lease of the unit,
	// one scoped to a limit included), so background runs only while the
	// unit's recent 429 rate is zero; its Grant.RetryAt is then the end of
	// the pause. 0 = no pause. Ignored on Candidate.Limits.
	BackgroundPause time.Duration
	// Base and Max of a limit (Candidate.Limits) are its cooldown, as a
	// unit's, for the rate limits a Release scopes to it (Outcome.Cool);
	// a limit nothing ever cools needs none.
	//
	// Refuse makes a limit (Candidate.Limits) one that is never waited
	// for: when it lists a Refuse limit with no free slot (in flight at
	// Cap, Cap > 0), Acquire grants nothing and does not queue the ticket
	// (it takes a queued one out of Queue), whatever room the units have,
	// and returns Grant.Refused. Its windows and day are waited for as
	// any limit's. Ignored on Candidate.Unit.
	Refuse bool
	// Domain, on a limit (Candidate.Limits), is the capacity domain the
	// limit is held in when that is not the Acquire's: a limit that spans
	// capacity domains (a tenant's requests run on accounts of several)
	// lives in a domain of its own, where the capacity engine takes it
	// first, as a claim of its own, before it claims the account (see
	// package capacity). "" = the Acquire's domain. Stores ignore it: the
	// engine passes them only the limits of the domain they decide in.
	Domain string
}

// Candidate is one edge a waiting request could run on, in preference order.
type Candidate struct {
	Unit          Unit
	Credential    string // the credential's stable ID
	CredentialCap int    // optional inner limit of the credential; 0 = none
	// Limits are further limits the request must fit in as well, besides
	// Unit: pool, tenant, key, end user, task type, model — each with its
	// own Cap, RPM, TPM and DailyTokens (no Reserve, no hidden-cap
	// learning, and no cooldown unless a Release scopes a rate limit to
	// one, see Outcome.Cool: they are Sluice's own limits, or an
	// upstream's per-model quota under the Unit's account). The candidate is
	// granted only if Unit and every limit have room, atomically; the
	// lease holds a slot and reserves its request and tokens in each, and
	// Release frees and corrects each. A limit is a unit like any other for
	// no-barging, wake-ups and the Inspector: a ticket lists the IDs of its
	// candidates' limits among its units, and a release of a limit's lease
	// wakes the first waiter listing it.
	Limits []Unit
}

// Acquire asks for a slot on the first candidate that has room.
type Acquire struct {
	Domain     string        // capacity domain: every key this request touches shares it (Redis hash tag)
	Ticket     string        // unique per request attempt; makes Acquire idempotent
	Queue      string        // wait queue (the model alias), shared by all replicas; ordered by (Class, WFQ tag, arrival)
	Candidates []Candidate   // in preference order; never empty
	LeaseTTL   time.Duration // a granted lease expires unless renewed
	Replica    string        // who waits; grants for this replica are announced on its wake channel
	Class      int           // priority class: 0 interactive, 1 standard, 2 background (lower is more urgent)
	// Tenant and Weight share a class of a queue fairly between tenants
	// (weighted fair queueing): a queued ticket of tenant t gets the
	// virtual finish tag max(V, F_t) + 1000000/Weight, where V is the
	// class's virtual time (the largest tag granted from it) and F_t the
	// tag of t's previous ticket in it, and F_t becomes that tag. Within a
	// class, tickets are ordered by (tag, arrival). A tenant's burst thus
	// cannot starve a tenant arriving later, whose first ticket lands near
	// the front, and over time tenants waiting together are granted in
	// proportion to their weights. One tenant alone (or every ticket with
	// Tenant "") is FIFO. Weight ≤ 0 counts as 1. V and the F_t are
	// forgotten when the class of the queue has no ticket left (and F_t
	// when t has none left in it), so a tenant's cancelled tickets do not
	// count against it later.
	Tenant string
	Weight int
	// Tokens is the estimated tokens this request will use (prompt estimate
	// + max output), reserved against the granted unit's TPM (Unit.TPM) at
	// the grant, and against every DailyTokens and TPM of the granted
	// candidate's Limits; 0 reserves nothing. An estimate above TPM is reserved as
	// TPM: such a request is granted only when the unit's token window is
	// otherwise empty, so it can still run, alone, rather than never.
	Tokens int
}

// Classes is the number of priority classes; Acquire.Class is clamped to
// [0, Classes-1].
const Classes = 3

// Grant is the answer to Acquire.
type Grant struct {
	Granted bool
	Index   int       // the candidate granted (when Granted)
	Lease   string    // lease ID, = Ticket (when Granted)
	Expires time.Time // lease expiry (when Granted)
	Probe   bool      // this lease is the unit's single post-cooldown probe
	// When not granted: the ticket waits in Queue. Position is its place (0 =
	// head); RetryAt is the earliest time a cooling candidate reopens or a
	// candidate skipped for its (or only for its Limits') RPM/TPM window or
	// daily tokens would pass that check (the next UTC midnight for a day;
	// zero if none), when the waiter should try again without a wake: a
	// rolling window or a new day frees room without any release to
	// announce it.
	Position int
	RetryAt  time.Time
	// Cooling says, when not granted, that every candidate's unit, or
	// one of its limits that has a cooldown (Base > 0, see Outcome.Cool),
	// is closed by a cooldown (not over yet, or over with its single
	// probe out): the request waits for rate limits, not for free slots.
	Cooling bool
	// Refused says the ticket was refused rather than queued: a Refuse
	// limit of a candidate is full (see Unit.Refuse).
	Refused bool
}

// Outcome is how the claimed call ended, as far as the unit's state cares.
type Outcome struct {
	RateLimited bool          // a 429 rate limit: cool the unit
	RetryAfter  time.Duration // the upstream's hint with RateLimited; 0 = none
	Success     bool          // a successful call: resets the backoff level, ends a probe
	// Cool scopes a rate limit to one of the lease's limits
	// (Candidate.Limits), by ID: that limit alone cools, with its own
	// Base, Max and backoff level, as a unit would (closed until the
	// cooldown ends, then exactly one probe lease, granted to a candidate
	// listing it, with Grant.Probe; the probe's success, at
	// ProbeSucceeded or Release, opens it), while the candidate's Unit
	// and its hidden cap are left as they are: a per-model quota under an
	// account. "" or any other ID cools the Unit.
	Cool string
	// Tokens is the tokens the call really used, when measured (> 0): the
	// unit's TPM window is corrected from the lease's reservation
	// (Acquire.Tokens, capped at TPM) to this, which may give tokens back
	// (never past now) or take more. 0 leaves the reservation as it is.
	Tokens int
}

// Claims are leases on capacity units. Implementations must be safe for
// concurrent use by many goroutines and (for shared stores) many replicas.
//
// Acquire semantics, atomic per call:
//   - A ticket that already holds a lease gets the same grant again; a ticket
//     already queued keeps its place.
//   - Candidates are skipped when their unit is cooling (until the cooldown
//     ends; then exactly one probe lease is granted unit-wide and no other
//     claim until the probe is released), their unit is at Cap, their
//     credential is at CredentialCap, or granting would exceed the unit's
//     RPM (one request) or TPM (Acquire.Tokens) window (see Unit.RPM) or
//     its DailyTokens or DailyRequests, or any of the candidate's Limits lacks a slot or
//     room in those windows or day; a grant reserves its request and
//     tokens in those windows and days, the unit's and every limit's. A disabled or draining credential is
//     never passed in as a candidate (the caller filters by Status).
//   - Priority: Queue is ordered by (Class, tag, arrival). A queued ticket
//     of a class is ahead of every queued ticket of a less urgent class,
//     whenever it arrived; within a class, order is by WFQ tag (see
//     Acquire.Tenant), then FIFO. A ticket keeps the Class, tag and
//     candidates of its first Acquire while it waits.
//   - No barging: a candidate is granted only if no live ticket ahead of
//     this one in Queue lists the same unit among its candidates (the
//     earlier ticket has the first right to it). A newcomer (not queued) of
//     class k is placed where its tag would put it: behind every queued
//     ticket of a more urgent class and those of class k with a tag up to
//     its own, ahead of the rest. At most 64 live tickets ahead
//     are looked at; with more, every unit counts as taken.
//   - Reserved shares: a ticket of class c is granted a slot of a unit only
//     while the unit's in-flight count is below Cap - Σ_{k<c} Unit.Reserve[k]
//     (probes included).
//   - Background is throttled first on a cooling unit: a ticket of class 2
//     takes the post-cooldown probe only if no ticket of a more urgent class
//     waits for the unit (in any queue).
//   - Background pauses after a rate limit: a ticket of class 2 takes no
//     slot of a unit within Unit.BackgroundPause of the unit's last rate
//     limit.
//   - If nothing can be granted, the ticket is queued in Queue behind
//     every ticket of its class with a tag up to its own, and
//     Grant.Granted is false; Grant.Position counts
//     the live tickets ahead of it in (Class, tag, arrival) order.
//
// Hidden caps (AIMD): a unit's Cap may exceed the upstream's real
// concurrency cap. Each unit keeps an effective cap ecap (0 = none). A
// Release with Outcome.RateLimited, k being the unit's in-flight count
// including the released lease, sets ecap = max(1, k-1) when Cap is 0 or
// k-1 < Cap, and never raises it that way. Each ecap successful Releases
// since its last change raise it by one (additive increase); once it
// reaches Cap it is dropped (0), and with Cap 0 once it exceeds the k of
// its last decrease. Room checks (Cap, Reserve, wake-ups) use min(Cap,
// ecap) where ecap is set.
//
// Release removes the lease exactly once (a second Release, or a Release of
// an expired lease, is a no-op and returns nil), applies the Outcome to the
// unit (cooldown state machine; with Outcome.Tokens > 0 the TPM window is
// corrected from the lease's reservation to the tokens used), and announces on the wake channel of every
// replica with a ticket that could now be granted: in each queue listing the
// unit, the first tickets in (Class, tag, arrival) order that list it, as many as
// the unit has room for given their class's Reserve. Renew pushes the expiry
// of the given leases to now+ttl; unknown or expired leases are ignored.
// Cancel removes a queued ticket (a caller that gave up); if the ticket was
// granted meanwhile, its lease is released as if with a zero Outcome.
//
// ProbeSucceeded ends the probe state of the unit whose post-cooldown probe
// is lease, as a Release with Outcome.Success would (the cooldown and the
// backoff level are cleared and waiters woken), while the lease itself stays
// held, its slot counted, until it is released: a probe that is a long
// stream proves the account open at its first byte, not at its end. The
// lease is no longer the probe, so its Release is that of an ordinary lease.
// For a lease that is not the unit's live probe it does nothing.
//
// Limit state is bounded: a limit (Candidate.Limits) with no lease, no
// waiter and nothing left in its windows and day is forgotten, so that
// per-end-user limits do not grow the store with every user ever seen.
type Claims interface {
	Acquire(ctx context.Context, a Acquire) (Grant, error)
	Release(ctx context.Context, domain, lease string, out Outcome) error
	Renew(ctx context.Context, domain string, leases []string, ttl time.Duration) error
	Cancel(ctx context.Context, domain, queue, ticket string) error
	ProbeSucceeded(ctx context.Context, domain, lease string) error
}

// Held is a lease a replica holds, as it was granted, so that it can be
// claimed again after the store lost its state.
type Held struct {
	Lease     string
	Candidate Candidate     // the candidate granted, its Limits included
	Tokens    int           // Acquire.Tokens of the grant
	TTL       time.Duration // how long the lease is to live from now on
}

// Reasserter is a shared store that can lose its state while replicas run
// (Redis restarted empty, or flushed). Once it has, its Acquire and Renew
// fail with ErrStateLost for a replica until that replica reasserts the
// leases it still holds: so the leases of calls in flight count against
// their caps again before anything new is admitted.
type Reasserter interface {
	// Reassert makes each lease of held live again with its slots and
	// reservations in its unit and limits, unless it is still live (then
	// it is left as it is), and accepts the store's new state. Leases are
	// not reasserted as probes: a store that lost its state has no
	// cooldown either.
	Reassert(ctx context.Context, domain string, held []Held) error
}

// InProcess is implemented by a store that lives in this process (memstore):
// its calls never wait on I/O, so the capacity engine makes them inline
// rather than in the background.
type InProcess interface{ InProcess() }

// Waker delivers wake-ups: a hint that a ticket of this replica may now be
// granted, so its waiter calls Acquire again at once. Hints may be lost or
// duplicated; waiters also retry at Grant.RetryAt and on a slow safety tick.
type Waker interface {
	// Wake returns a channel of ticket IDs woken for replica. It is closed
	// when ctx ends.
	Wake(ctx context.Context, replica string) (<-chan string, error)
}

// UnitState is what an operator sees of a unit.
type UnitState struct {
	ID       string
	InFlight int
	Cap      int
	Waiting  int // tickets queued that list this unit
	// WaitingByClass splits Waiting by priority class (Acquire.Class).
	WaitingByClass [Classes]int
	CoolingUntil   time.Time // zero when not cooling
	Level          int       // backoff level
	Probe          string    // "", "available" (cooldown over, probe not taken) or "in_flight"
	// Cooled sums the cooldowns the unit's rate limits have set since the
	// store has known it: each rate limit adds the time it moved
	// CoolingUntil forward (from now, or from the end of the cooldown
	// already running), at once. It never decreases while the store
	// keeps its state (a unit that has cooled is never forgotten), so it
	// reads as a counter of the unit's time closed by cooldowns. The wait
	// for the probe after CoolingUntil is not in it.
	Cooled time.Duration
	// EffectiveCap is the hidden concurrency cap learned from rate limits
	// (AIMD, see Claims); 0 = none, Cap applies.
	EffectiveCap int
	// OldestByClass is when the oldest live queued ticket of each class
	// that lists the unit arrived (its first Acquire); zero when none.
	// Stores may bound the tickets they look at (see each store's Units).
	OldestByClass [Classes]time.Time
	// WaitingByTenant counts the live queued tickets listing the unit by
	// tenant (Acquire.Tenant; "" for none); nil when none wait. It has a
	// map, so UnitState is not comparable.
	WaitingByTenant map[string]int
}

// Inspector reads unit and credential state for the admin API and metrics.
type Inspector interface {
	Units(ctx context.Context, domain string, ids []string) ([]UnitState, error)
	// CredentialInFlight counts live leases per credential ID.
	CredentialInFlight(ctx context.Context, domain string, ids []string) (map[string]int, error)
}

// Status values of credentials and accounts that every replica must see.
type Status struct {
	State  sluice.UpstreamStatus
	Reason string // why (e.g. "auth: 401 invalid_api_key", "billing: insufficient_quota", "operator")
	Since  time.Time
}

// Statuses hold the operator- and failure-driven state of credentials and
// accounts, shared by every replica. Kind is "credential" or "account".
type Statuses interface {
	SetStatus(ctx context.Context, kind, id string, s Status) error
	// Statuses returns every non-active status of kind, by ID (active is
	// the default and is not stored).
	Statuses(ctx context.Context, kind string) (map[string]Status, error)
}

// ErrUnavailable wraps failures of the store itself (Redis down), so the
// pipeline can answer 503 rather than blame the upstream.
var ErrUnavailable = errors.New("state store unavailable")

// ErrStateLost says the store lost its state since this replica last saw it
// (see Reasserter). It wraps ErrUnavailable: until reasserted, the store
// cannot be trusted with a decision.
var ErrStateLost = fmt.Errorf("state store lost its state: %w", ErrUnavailable)
