package metrics

import "github.com/prometheus/client_golang/prometheus"

// Affinity holds the collectors of session affinity and of the prompt
// cache it is for. Labels are catalog IDs and fixed words only: a seed
// never labels anything.
type Affinity struct {
	// Placements counts the requests of affinity aliases and pools that
	// carried a seed, by alias and outcome: hit (ran on the account its
	// seed was bound to), new (no binding: placed on the account with the
	// most free room), moved (bound, ran elsewhere). The hit rate is
	// hit / (hit + moved).
	Placements *prometheus.CounterVec // alias, outcome
	// Moves counts seeds moved to another account, by alias and reason:
	// no_room (the bound account stayed full for the class's wait),
	// cooling, disabled, breaker_open, failed:<class>.
	Moves *prometheus.CounterVec // alias, reason
	// CachedTokens sums the input tokens the upstream read from its prompt
	// cache, by account and alias, for every request (whatever its
	// strategy).
	CachedTokens *prometheus.CounterVec // account, alias
}

func newAffinity() *Affinity {
	return &Affinity{
		Placements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_affinity_placements_total",
			Help: "Requests with a session-affinity seed, by alias and outcome: hit (ran on its bound account), new (no binding yet), moved (bound, ran elsewhere). Hit rate = hit / (hit + moved).",
		}, []string{"alias", "outcome"}),
		Moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_affinity_moves_total",
			Help: "Session-affinity seeds moved to another account, by alias and reason (no_room, cooling, disabled, breaker_open, failed:<class>).",
		}, []string{"alias", "reason"}),
		CachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_cached_input_tokens_total",
			Help: "Input tokens the upstream read from its prompt cache, by account and alias.",
		}, []string{"account", "alias"}),
	}
}

func (a *Affinity) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.Placements, a.Moves, a.CachedTokens}
}
