package authn

import (
	"time"

	"github.com/sluicehq/sluice"
)

// errStale answers every key while the keyring's view is older than its
// bound: the keys, and the suspensions, it would judge by may have changed.
var errStale = &sluice.Error{Code: sluice.CodeStateUnavailable, RetryAfter: time.Second,
	Msg: "the gateway cannot read its keys right now; retry after the Retry-After"}

// FailClosed makes Authenticate refuse every token with 503
// state_unavailable while the last successful refresh of the stored keys and
// suspensions is older than bound() — the catalog's keys too, because the
// suspensions they are judged by are as old. bound is read on each call,
// so a reloaded catalog's bound holds at once; 0 or less never refuses.
// Call it once, before use.
func (kr *Keyring) FailClosed(bound func() time.Duration) { kr.staleness = bound }

// RefreshedAt is when the stored keys and suspensions were last read
// successfully (by Refresh or after a write through the keyring); zero
// before the first.
func (kr *Keyring) RefreshedAt() time.Time {
	if ns := kr.refreshed.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// stale reports whether the view is too old to judge a request at now.
func (kr *Keyring) stale(now time.Time) bool {
	if kr.staleness == nil {
		return false
	}
	bound := kr.staleness()
	return bound > 0 && now.UnixNano()-kr.refreshed.Load() > int64(bound)
}
