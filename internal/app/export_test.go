package app

import "time"

// SkewBillingCycles moves the clock g closes allowance cycles by forward
// by d, so that a test takes it across a cycle's end without waiting.
func SkewBillingCycles(g *Gateway, d time.Duration) { g.totals.skew.Store(int64(d)) }

// CatalogPoll is how often a replica following the store polls it.
const CatalogPoll = catalogPoll
