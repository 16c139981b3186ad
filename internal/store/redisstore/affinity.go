package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
)

var _ store.Affinity = (*Store)(nil)

// An affinity binding is a string key per seed, P{d:D}:aff:<seed> →
// account, with the binding's idle TTL as the key's: Redis forgets lapsed
// bindings on its own, and the capacity domain's hash tag keeps them on
// its slot. A bound request costs one round trip (GETEX), a new or moved
// one a second (the bind script).
func (s *Store) affinityKey(domain, seed string) string {
	return s.prefix + "{d:" + domain + "}:aff:" + seed
}

// Touch implements store.Affinity.
func (s *Store) Touch(ctx context.Context, domain, seed string, ttl time.Duration) (string, error) {
	account, err := s.rdb.GetEx(ctx, s.affinityKey(domain, seed), ttl).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", unavailable("affinity touch", err)
	}
	return account, nil
}

// Bind implements store.Affinity.
func (s *Store) Bind(ctx context.Context, domain, seed, from, to string, ttl time.Duration) (string, error) {
	account, err := affinityBindScript.Run(ctx, s.rdb, []string{s.affinityKey(domain, seed)}, from, to, ttl.Milliseconds()).Text()
	if err != nil {
		return "", unavailable("affinity bind", err)
	}
	return account, nil
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
