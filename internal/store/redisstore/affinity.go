package redisstore

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
)

var _ store.Affinity = (*Store)(nil)

// An affinity binding is a string key per seed, P{d:D}:aff:<seed> →
// account, with the binding's idle TTL as the key's: Redis forgets lapsed
// bindings on its own, and the capacity domain's hash tag keeps them on
// its slot. Each owner's bindings are indexed by last use in a sorted set,
// P{d:D}:affk:<key> and P{d:D}:afft:<tenant>, which hold the bounds (see
// affinity_bind.lua). A use costs one round trip (the touch script), a new
// or moved binding a second (the bind script), and a binding past a bound
// a third, which deletes what the bind script let go.
func (s *Store) affinityKey(domain, seed string) string {
	return s.prefix + "{d:" + domain + "}:aff:" + seed
}

// affinityIndexes are the keys of owner's indexes in domain: its key's,
// then its tenant's.
func (s *Store) affinityIndexes(domain string, owner store.SeedOwner) (key, tenant string) {
	return s.prefix + "{d:" + domain + "}:affk:" + owner.Key, s.prefix + "{d:" + domain + "}:afft:" + owner.Tenant
}

// Touch implements store.Affinity.
func (s *Store) Touch(ctx context.Context, domain string, owner store.SeedOwner, seed string, ttl time.Duration) (string, error) {
	k, t := s.affinityIndexes(domain, owner)
	account, err := affinityTouchScript.Run(ctx, s.rdb, []string{s.affinityKey(domain, seed), k, t},
		ttl.Milliseconds(), seed, time.Now().UnixMilli(), owner.Key).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", unavailable("affinity touch", err)
	}
	return account, nil
}

// Bind implements store.Affinity.
func (s *Store) Bind(ctx context.Context, domain string, owner store.SeedOwner, seed, from, to string, ttl time.Duration) (string, error) {
	k, t := s.affinityIndexes(domain, owner)
	out, err := affinityBindScript.Run(ctx, s.rdb, []string{s.affinityKey(domain, seed), k, t},
		from, to, ttl.Milliseconds(), seed, time.Now().UnixMilli(), owner.Key, store.MaxKeyBindings, store.MaxTenantBindings).StringSlice()
	if err != nil || len(out) == 0 {
		return "", unavailable("affinity bind", cmp.Or(err, errors.New("empty answer")))
	}
	if gone := out[1:]; len(gone) > 0 {
		// The bindings past a bound: their keys, and their entries in
		// their key's index (the tenant's index let them go already).
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, member := range gone {
				key, seed, _ := strings.Cut(member, "\x00")
				p.Del(ctx, s.affinityKey(domain, seed))
				p.ZRem(ctx, s.prefix+"{d:"+domain+"}:affk:"+key, seed)
			}
			return nil
		})
		if err != nil {
			return "", unavailable("affinity forget", err)
		}
	}
	return out[0], nil
}

// Binding implements store.Affinity.
func (s *Store) Binding(ctx context.Context, domain, seed string) (store.Binding, bool, error) {
	key := s.affinityKey(domain, seed)
	var get *redis.StringCmd
	var ttl *redis.DurationCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get, ttl = p.Get(ctx, key), p.PTTL(ctx, key)
		return nil
	})
	switch {
	case errors.Is(err, redis.Nil):
		return store.Binding{}, false, nil
	case err != nil:
		return store.Binding{}, false, unavailable("affinity binding", err)
	}
	return store.Binding{Account: get.Val(), TTL: ttl.Val()}, true, nil
}
