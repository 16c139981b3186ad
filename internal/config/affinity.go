package config

import (
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// Affinity tunes strategy affinity of an alias or a pool: each
// conversation (its seed) is bound to the account it last ran on, so its
// turns find the upstream prompt cache that account holds.
type Affinity struct {
	// TTL is how long a binding outlives its last use (an idle TTL,
	// refreshed on every request of the seed); default 1h. Match it to
	// the provider's prompt-cache lifetime: past it the cache is cold and
	// affinity buys nothing.
	TTL Duration `yaml:"ttl"`
	// Wait is how long a request of each priority class waits for its
	// bound account when that account is full, before it moves to another
	// (and the seed with it); default interactive 300ms, standard 1s,
	// background 2s. 0 moves at once. A cooling, disabled or failing
	// account is left at once whatever the wait.
	Wait map[string]Duration `yaml:"wait"`
	// FallbackStrategy orders the requests that carry no seed (embeddings,
	// an empty conversation); default least-inflight. Any strategy but
	// affinity.
	FallbackStrategy string `yaml:"fallback_strategy"`
}

// Set reports whether the affinity block says anything.
func (a *Affinity) Set() bool {
	return a.TTL != 0 || len(a.Wait) > 0 || a.FallbackStrategy != ""
}

// Affinity defaults.
const (
	DefaultAffinityTTL      = Duration(time.Hour)
	defaultAffinityFallback = "least-inflight"
)

// defaultAffinityWait is the wait of each priority class whose wait is
// not set: an interactive caller feels 300ms, background work can afford
// more to keep its cache.
var defaultAffinityWait = map[string]Duration{
	"interactive": Duration(300 * time.Millisecond),
	"standard":    Duration(time.Second),
	"background":  Duration(2 * time.Second),
}

// applyAffinityDefaults fills the affinity block of an alias or a pool
// whose strategy is affinity; others keep theirs for Validate to refuse
// if set.
func applyAffinityDefaults(a *Affinity, strategy string) {
	if strategy != "affinity" {
		return
	}
	setDuration(&a.TTL, DefaultAffinityTTL)
	setString(&a.FallbackStrategy, defaultAffinityFallback)
	if a.Wait == nil {
		a.Wait = make(map[string]Duration, len(defaultAffinityWait))
	}
	for class, d := range defaultAffinityWait {
		if _, ok := a.Wait[class]; !ok {
			a.Wait[class] = d
		}
	}
}

// affinity checks the affinity block at path of an alias or pool with
// strategy: only strategy affinity reads it.
func (v *validator) affinity(path, strategy string, a *Affinity) {
	if strategy != "affinity" {
		if a.Set() {
			v.addf(path, "is read only with strategy affinity, not %q", strategy)
		}
		return
	}
	if a.TTL <= 0 {
		v.addf(path+".ttl", "must be positive")
	}
	for _, class := range slices.Sorted(maps.Keys(a.Wait)) {
		if !slices.Contains(sluice.Priorities, class) {
			v.addf(path+".wait."+class, "unknown priority class; must be one of %v", sluice.Priorities)
		}
	}
	others := slices.DeleteFunc(slices.Clone(strategies), func(s string) bool { return s == "affinity" })
	if !slices.Contains(others, a.FallbackStrategy) {
		v.addf(path+".fallback_strategy", "must be one of %v (it orders the requests without a seed), got %q", others, a.FallbackStrategy)
	}
}

// WaitFor is the affinity wait of a priority class (an index of
// sluice.Priorities).
func (a *Affinity) WaitFor(class int) time.Duration {
	if class < 0 || class >= len(sluice.Priorities) {
		return 0
	}
	return a.Wait[sluice.Priorities[class]].D()
}
