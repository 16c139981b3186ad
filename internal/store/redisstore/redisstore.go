// Package redisstore is the Redis implementation of the store interfaces
// (store.Claims, store.Waker, store.Inspector, store.Statuses, store.Jobs), shared by
// every replica of the gateway.
//
// Every capacity decision is one Lua function call (FCALL of the library
// in scripts.go; one EVALSHA for jobs and affinity) over keys that carry
// the same {d:<domain>} hash tag, so a domain lives on one Redis Cluster
// slot and a decision is atomic: Acquire and Release cost one round trip
// each, Renew one per batch. Scripts decide by the Redis clock (TIME),
// never by a replica's clock, and are idempotent by ticket or lease ID, so
// a go-redis retry after a timeout changes nothing. Every script first
// reaps expired leases and dead waiters (at most 64 of each per call) when
// one is due, which the unit hash's "\x00reap" field tells in the read
// acquire and release make anyway.
// Wake-ups are PUBLISHed by the scripts to <prefix>wake:<replica>: by a
// release or cancel for the unit it freed, and by any script for the units
// its reaping freed. They are hints (see Wake).
//
// Key layout, with P the prefix and D the domain (see lua/lib.lua):
//
//	P{d:D}:lease  HASH  lease → unit, credential, index, probe, base, max, tokens reserved, tpm, daily reserved, day, limits held
//	P{d:D}:exp    ZSET  lease → expiry (ms)
//	P{d:D}:gen    STRING generation of the domain's state (see Reassert)
//	P{d:D}:unit   HASH  "<unit>\x00<attr>" → in flight, cap, reserves, cooldown, level, probe, waiting by class, RPM/TPM TATs, learned cap, daily tokens, daily requests; and "\x00reap", when the next lease, waiter or limit is due
//	P{d:D}:cred   HASH  credential → in flight
//	P{d:D}:q      ZSET  "<queue>\x00<class><tag><seq><ticket>", score 0: lex order is (class, WFQ tag, arrival) per queue
//	P{d:D}:tix    HASH  ticket → queue, member, replica, units (and limits), tenant
//	P{d:D}:seen   ZSET  ticket → dead-waiter deadline (ms)
//	P{d:D}:uq     ZSET  "<unit>\x00<queue>", score 0: the queues that list a unit
//	P{d:D}:seq    STRING arrival counter
//	P{d:D}:fair   HASH  WFQ virtual time per queue class, finish tag per tenant in it
//	P{d:D}:lapse  ZSET  limit → when its windows lapse: idle limits to forget
//	P{d:D}:aff:<seed> STRING the account a session-affinity seed is bound to, expiring after its idle TTL (see affinity.go)
//	Pstatus:<kind> HASH id → JSON Status
//	P{jobs:N}:…    job bindings, in 16 shards by job ID (see jobs.go)
//
// IDs (domains, units, limits, credentials, queues, tickets, tenants) must not contain the
// bytes 0x00, 0x1e or 0x1f, which the scripts use as separators.
//
// It depends on package store and on go-redis; nothing else of Sluice.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
)

// Store implements store.Claims, store.Waker, store.Inspector,
// store.Statuses and store.Jobs on Redis. It is safe for concurrent use. One Store per
// replica; replicas share state by sharing the Redis server and prefix.
type Store struct {
	rdb    redis.UniversalClient
	pipe   *pipeliner // the capacity calls
	prefix string
	wake   any      // wakePrefix as a script argument, converted once
	doms   sync.Map // domain → *domainState

	mu     sync.Mutex
	hubs   map[string]*hub // replica → its one wake subscription
	closed bool
	wg     sync.WaitGroup // the hubs' fan-out goroutines
}

var (
	_ store.Claims     = (*Store)(nil)
	_ store.Waker      = (*Store)(nil)
	_ store.Inspector  = (*Store)(nil)
	_ store.Statuses   = (*Store)(nil)
	_ store.Jobs       = (*Store)(nil)
	_ store.Reasserter = (*Store)(nil)
)

// New returns a Store on client whose keys and wake channels all start with
// prefix (e.g. "sluice:"), so deployments and tests sharing a server stay
// apart. It does no I/O; call Load at startup to preload the scripts.
//
// The client must be built with ContextTimeoutEnabled: true: without it,
// go-redis ignores context deadlines and a stalled Redis holds a call for
// ReadTimeout instead of the caller's deadline. With the default
// DialerRetries (5) and MaxRetries (3), a refused connection takes about a
// second to fail; lower them to fail faster. The Store does not own the
// client: Close does not close it.
func New(client redis.UniversalClient, prefix string) *Store {
	s := &Store{rdb: client, pipe: newPipeliner(client), prefix: prefix, hubs: make(map[string]*hub)}
	s.wake = s.wakePrefix()
	return s
}

// Load preloads the capacity function library and every script (on every
// primary of a cluster), so the first decisions cost one round trip each.
// Without it, the first capacity call costs three (FCALL, FUNCTION LOAD,
// FCALL) and the first call of each script two (EVALSHA, NOSCRIPT, EVAL); so
// do the first calls after a restart without persistence (a failover keeps
// the functions, which replicate, but empties the script cache).
func (s *Store) Load(ctx context.Context) error {
	if err := capacityLib.load(ctx, s.rdb); err != nil {
		return unavailable("load functions", err)
	}
	for _, sc := range allScripts {
		var err error
		if cc, ok := s.rdb.(*redis.ClusterClient); ok {
			err = cc.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
				return sc.Load(ctx, shard).Err()
			})
		} else {
			err = sc.Load(ctx, s.rdb).Err()
		}
		if err != nil {
			return unavailable("load scripts", err)
		}
	}
	return nil
}

// Close ends every wake subscription and closes the channels Wake returned,
// then waits for the goroutines that fed them, and for the capacity calls
// in flight.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	hubs := s.hubs
	s.hubs = make(map[string]*hub)
	s.mu.Unlock()
	var errs []error
	for _, h := range hubs {
		errs = append(errs, h.ps.Close())
	}
	s.wg.Wait()
	s.pipe.close()
	return errors.Join(errs...)
}

// domainState is what a Store keeps of one capacity domain.
type domainState struct {
	// keys are the keys every capacity script declares, in the order of
	// lua/lib.lua; shared, never modified. keyArgs are the same as FCALL
	// arguments, converted once (see function.call).
	keys    []string
	keyArgs []any
	// gen is the generation of the domain's state this replica knows (0
	// before its first decision). The scripts refuse to decide for a
	// replica that knows another one: the state was lost since, and the
	// replica must reassert its leases first (see Reassert).
	gen atomic.Int64
}

// domain returns the state of domain, made once.
func (s *Store) domain(domain string) *domainState {
	if d, ok := s.doms.Load(domain); ok {
		return d.(*domainState)
	}
	tag := s.prefix + "{d:" + domain + "}:"
	d := &domainState{keys: []string{
		tag + "lease", tag + "exp", tag + "gen", tag + "unit", tag + "cred",
		tag + "q", tag + "tix", tag + "seen", tag + "uq", tag + "seq", tag + "fair", tag + "lapse",
	}}
	for _, k := range d.keys {
		d.keyArgs = append(d.keyArgs, k)
	}
	v, _ := s.doms.LoadOrStore(domain, d)
	return v.(*domainState)
}

// renewKeys is where the keys Renew touches start: the lease-expiry and
// generation keys, and the unit hash for its reap time.
const renewKeys = 1

// wakePrefix is the start of every wake channel; the scripts append the
// replica.
func (s *Store) wakePrefix() string { return s.prefix + "wake:" }

// unavailable wraps a failure of Redis so that errors.Is(err,
// store.ErrUnavailable) holds while the cause stays visible.
func unavailable(op string, err error) error {
	return fmt.Errorf("redisstore: %s: %w: %w", op, store.ErrUnavailable, err)
}

// separators are the bytes the scripts use between fields and list items.
const separators = "\x00\x1e\x1f"

// checkID rejects an ID that would corrupt a record. It is a caller bug,
// not an outage, so the error does not wrap store.ErrUnavailable.
func checkID(what, id string) error {
	if strings.ContainsAny(id, separators) {
		return fmt.Errorf("redisstore: %s %q contains a reserved byte (0x00, 0x1e or 0x1f)", what, id)
	}
	return nil
}
