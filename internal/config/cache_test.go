package config

import (
	"testing"
	"time"
)

func TestValidateCache(t *testing.T) {
	with := func(change func(c *Catalog)) func(c *Catalog) {
		return func(c *Catalog) {
			c.Models[0].Cache = &Cache{TTL: Duration(time.Minute)}
			c.Keys[0].Cache = &Cache{TTL: Duration(time.Hour), Charge: CacheChargeCachedRate, Force: true, MaxEntryBytes: 1 << 16}
			change(c)
		}
	}
	checkValidate(t, []validateCase{
		{"Valid", with(func(*Catalog) {}), ""},
		{"RedisWithRedisState", with(func(c *Catalog) {
			c.State.Backend, c.State.Redis.URL, c.Models[0].Cache.Backend = "redis", "redis://127.0.0.1:6379/0", CacheRedis
		}), ""},
		{"NoTTL", with(func(c *Catalog) { c.Models[0].Cache.TTL = 0 }), "models[0].cache.ttl: required"},
		{"ShortTTL", with(func(c *Catalog) { c.Keys[0].Cache.TTL = Duration(time.Millisecond) }), "keys[0].cache.ttl: at least 1s"},
		{"RedisWithoutRedis", with(func(c *Catalog) { c.Models[0].Cache.Backend = CacheRedis }), "models[0].cache.backend: redis needs state.backend: redis"},
		{"UnknownBackend", with(func(c *Catalog) { c.Models[0].Cache.Backend = "disk" }), `models[0].cache.backend: unknown backend "disk"`},
		{"NegativeSize", with(func(c *Catalog) { c.Keys[0].Cache.MaxEntryBytes = -1 }), "keys[0].cache.max_entry_bytes: must not be negative"},
		{"UnknownCharge", with(func(c *Catalog) { c.Keys[0].Cache.Charge = "half" }), `keys[0].cache.charge: unknown charge "half"`},
	})
}
