package simulator

import (
	"cmp"
	"sync"
	"time"
)

// promptCache models a provider's prompt cache (Options.PromptCache): per
// owner (the key's Account, else the key itself) it remembers the prefixes
// of the prompts it served, message by message, for a TTL refreshed on
// every hit, as providers do. A request's cached input tokens are those of
// its longest prefix the owner served within the TTL, so a conversation's
// next turn reads its whole previous prompt from the cache, on the account
// that served it, and nothing anywhere else.
type promptCache struct {
	ttl time.Duration

	mu      sync.Mutex
	entries map[cacheEntry]time.Time // → expiry
	swept   int                      // entries after the last sweep of expired ones
}

type cacheEntry struct {
	owner  string
	prefix uint64 // the conversation seed (convo.seed) after the prefix's last message
}

// prefixPoint is a prompt prefix ending at a message: its seed and tokens.
type prefixPoint struct {
	seed   uint64
	prompt int
}

// read returns the cached tokens of a prompt whose prefixes are points
// (shortest first, the whole prompt last) for owner, and caches them all.
func (pc *promptCache) read(owner string, points []prefixPoint) int {
	now := time.Now()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	cached := 0
	for i := len(points) - 1; i >= 0; i-- {
		if exp, ok := pc.entries[cacheEntry{owner, points[i].seed}]; ok && now.Before(exp) {
			cached = points[i].prompt
			break
		}
	}
	for _, p := range points {
		pc.entries[cacheEntry{owner, p.seed}] = now.Add(pc.ttl)
	}
	if len(pc.entries) > 2*pc.swept+1024 { // bounded: sweep when it doubled
		for k, exp := range pc.entries {
			if !now.Before(exp) {
				delete(pc.entries, k)
			}
		}
		pc.swept = len(pc.entries)
	}
	return cached
}

// promptCached sets a.cached from the simulator's prompt cache, when it
// models one: a's prefixes (convo.points) and a's whole prompt.
func (c *call) promptCached(a *answer) {
	if c.sim.cache == nil {
		return
	}
	a.modelled = true
	a.cached = c.sim.cache.read(cmp.Or(c.b.Account, c.rec.Key), append(a.points, prefixPoint{a.seed, a.prompt}))
}

// tracks reports whether prompts are split into prefixes for the cache.
func (c *call) tracks() bool { return c.sim.cache != nil }
