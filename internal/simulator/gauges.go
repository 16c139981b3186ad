package simulator

import (
	"sync"
	"time"
)

// gauges counts requests in flight per key, per account and overall, and
// enforces the concurrency caps. One mutex, because a request must be checked
// against its key's and its account's cap and then counted in both at once.
// Safe for concurrent use.
type gauges struct {
	mu        sync.Mutex
	total     int
	peak      int
	keys      map[string]int // entries are deleted at zero so many keys don't grow it
	accounts  map[string]int // Behavior.Account != "" only
	acctPeaks map[string]int
}

func (g *gauges) init() {
	g.keys = make(map[string]int)
	g.accounts = make(map[string]int)
	g.acctPeaks = make(map[string]int)
}

// rejection says which cap refused a request, for the 429's headers.
type rejection struct {
	limit      int
	retryAfter time.Duration
}

// admit counts the request in flight unless that would exceed the key's or
// the account's cap. Rejected requests are not counted.
func (g *gauges) admit(key string, b Behavior, acct AccountLimits, hasAcct bool) (bool, rejection) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b.MaxInflight > 0 && g.keys[key] >= b.MaxInflight {
		return false, rejection{b.MaxInflight, b.RetryAfter}
	}
	if hasAcct && acct.MaxInflight > 0 && g.accounts[b.Account] >= acct.MaxInflight {
		return false, rejection{acct.MaxInflight, acct.RetryAfter}
	}
	g.keys[key]++
	g.total++
	g.peak = max(g.peak, g.total)
	if b.Account != "" {
		n := g.accounts[b.Account] + 1
		g.accounts[b.Account] = n
		g.acctPeaks[b.Account] = max(g.acctPeaks[b.Account], n)
	}
	return true, rejection{}
}

// release undoes a successful admit.
func (g *gauges) release(key, account string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if n := g.keys[key] - 1; n > 0 {
		g.keys[key] = n
	} else {
		delete(g.keys, key)
	}
	if account != "" {
		if n := g.accounts[account] - 1; n > 0 {
			g.accounts[account] = n
		} else {
			delete(g.accounts, account)
		}
	}
}

// remaining returns how many more requests key's cap and its account's cap
// would admit now, and the smaller cap, for x-ratelimit-* headers on
// admitted requests. ok is false when neither cap is set.
func (g *gauges) remaining(key string, b Behavior, acct AccountLimits) (limit, left int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b.MaxInflight > 0 {
		limit, left, ok = b.MaxInflight, b.MaxInflight-g.keys[key], true
	}
	if acct.MaxInflight > 0 {
		if l := acct.MaxInflight - g.accounts[b.Account]; !ok || l < left {
			limit, left, ok = acct.MaxInflight, l, true
		}
	}
	return limit, max(left, 0), ok
}

func (g *gauges) resetPeaks() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.peak = g.total
	clear(g.acctPeaks)
	for a, n := range g.accounts {
		g.acctPeaks[a] = n
	}
}

// InFlight returns how many requests are admitted and not yet finished.
// Safe for concurrent use.
func (s *Simulator) InFlight() int {
	s.gauges.mu.Lock()
	defer s.gauges.mu.Unlock()
	return s.gauges.total
}

// MaxInFlight returns the peak number of concurrent requests of account
// since New or Reset, or across all keys when account is "". Requests
// rejected by a cap never count. Safe for concurrent use.
func (s *Simulator) MaxInFlight(account string) int {
	s.gauges.mu.Lock()
	defer s.gauges.mu.Unlock()
	if account == "" {
		return s.gauges.peak
	}
	return s.gauges.acctPeaks[account]
}
