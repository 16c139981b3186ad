// Package periodic runs the background refresh loops of the gateway (keys,
// statuses, entitlements, balances, oauth tokens) the same way. It depends on
// no package of ours, so any stage may use it.
package periodic

import (
	"context"
	"time"
)

// Run calls f(ctx) every interval until ctx ends, then returns. It does not
// call f at once: a caller that wants a first refresh calls f before Run.
// Calls never overlap; one that outlasts the interval delays the next, and
// the ticks it missed are dropped. Run returns once ctx ends and any call in
// progress has returned, and never calls f after ctx has ended (a tick and
// the end of ctx arriving together would otherwise race). f reports its own
// failures: it knows what it refreshes, and ctx.Err() tells it whether one
// came only from the end of ctx. interval must be > 0.
func Run(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return
			}
			f(ctx)
		}
	}
}
