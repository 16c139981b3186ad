package config

import (
	"fmt"
	"time"
)

// Cache turns on the exact-match response cache for an alias's or a key's
// requests (docs/cache.md); a key's wins over its alias's.
type Cache struct {
	TTL Duration `yaml:"ttl"` // how long an answer is served; required
	// Backend is where answers are kept: memory (default: this replica's
	// own) or redis (the state backend's Redis, shared by the replicas).
	Backend string `yaml:"backend"`
	// MaxEntryBytes bounds an answer's body; a larger one is not stored.
	// 0 = DefaultCacheEntryBytes.
	MaxEntryBytes int64 `yaml:"max_entry_bytes"`
	// Charge is what a hit is billed: full (default: the original usage at
	// the price), none, or cached_rate (the original usage with every
	// prompt token at the price's cache_read rate).
	Charge string `yaml:"charge"`
	// Force caches requests that do not ask for temperature 0.
	Force bool `yaml:"force"`
}

// DefaultCacheEntryBytes is the largest answer a cache stores by default.
const DefaultCacheEntryBytes = 1 << 20

// Cache backends and charges.
const (
	CacheMemory = "memory"
	CacheRedis  = "redis"

	CacheChargeFull       = "full"
	CacheChargeNone       = "none"
	CacheChargeCachedRate = "cached_rate"
)

// EntryBytes is the largest answer c stores.
func (c *Cache) EntryBytes() int64 {
	if c.MaxEntryBytes == 0 {
		return DefaultCacheEntryBytes
	}
	return c.MaxEntryBytes
}

// caches checks the cache blocks of models[] and keys[].
func (v *validator) caches() {
	check := func(at string, c *Cache) {
		if c == nil {
			return
		}
		at += ".cache"
		if c.TTL.D() <= 0 {
			v.addf(at+".ttl", "required: how long an answer is served (e.g. 10m)")
		} else if c.TTL.D() < time.Second {
			v.addf(at+".ttl", "at least 1s")
		}
		switch c.Backend {
		case "", CacheMemory:
		case CacheRedis:
			if v.c.State.Backend != "redis" {
				v.addf(at+".backend", "redis needs state.backend: redis, whose Redis it uses")
			}
		default:
			v.addf(at+".backend", "unknown backend %q (memory | redis)", c.Backend)
		}
		if c.MaxEntryBytes < 0 {
			v.addf(at+".max_entry_bytes", "must not be negative")
		}
		switch c.Charge {
		case "", CacheChargeFull, CacheChargeNone, CacheChargeCachedRate:
		default:
			v.addf(at+".charge", "unknown charge %q (full | none | cached_rate)", c.Charge)
		}
	}
	for i := range v.c.Models {
		check(fmt.Sprintf("models[%d]", i), v.c.Models[i].Cache)
	}
	for i := range v.c.Keys {
		check(fmt.Sprintf("keys[%d]", i), v.c.Keys[i].Cache)
	}
}
