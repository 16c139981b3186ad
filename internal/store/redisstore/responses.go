package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/respcache"
)

// Responses is the response cache's shared backend: one key per entry,
// <prefix>resp:<key>, its value the entry's compact encoding, expiring
// with the entry's time to live.
type Responses struct{ s *Store }

var _ respcache.Backend = Responses{}

// Responses returns the response cache's backend on s's Redis and prefix.
func (s *Store) Responses() Responses { return Responses{s} }

func (r Responses) name(key string) string { return r.s.prefix + "resp:" + key }

// Get returns the entry under key; an entry that does not decode (a
// later layout's) is a miss.
func (r Responses) Get(ctx context.Context, key string) (*respcache.Entry, error) {
	b, err := r.s.rdb.Get(ctx, r.name(key)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, err
	}
	e, err := respcache.Decode(b)
	if err != nil {
		return nil, nil
	}
	return e, nil
}

func (r Responses) Put(ctx context.Context, key string, e *respcache.Entry, ttl time.Duration) error {
	return r.s.rdb.Set(ctx, r.name(key), e.Encode(), ttl).Err()
}
