package memstore

import (
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// window is the rolling window of the RPM and TPM limits, and the burst
// tolerance of their GCRA.
const window = time.Minute

// interval is the GCRA emission interval of n units of cost under limit
// per window: n·window/limit.
func interval(n, limit int) time.Duration {
	return time.Duration(float64(n) * float64(window) / float64(limit))
}

// gcra returns the new TAT of a grant of cost under limit (per window)
// given the current tat, and whether it passes: the new TAT is at most
// now + window. When it does not, at is the earliest time it would. A cost
// above limit counts as limit, so it passes when the window is empty.
func gcra(tat time.Time, limit, cost int, now time.Time) (next time.Time, ok bool, at time.Time) {
	cost = min(max(cost, 0), limit)
	next = latest(tat, now).Add(interval(cost, limit))
	if next.Sub(now) <= window {
		return next, true, time.Time{}
	}
	return next, false, next.Add(-window)
}

// rateRoom reports whether u's RPM and TPM windows (limits from lim) admit
// one more request of tokens now; when not, at is the earliest time both
// would.
func (u *unit) rateRoom(lim store.Unit, tokens int, now time.Time) (ok bool, at time.Time) {
	ok = true
	if lim.RPM > 0 {
		if _, pass, t := gcra(u.rtat, lim.RPM, 1, now); !pass {
			ok, at = false, t
		}
	}
	if lim.TPM > 0 {
		if _, pass, t := gcra(u.ttat, lim.TPM, tokens, now); !pass {
			ok, at = false, latest(at, t)
		}
	}
	return ok, at
}

// reserve takes one request and tokens from u's windows (which rateRoom
// said admit them) and returns the tokens reserved against TPM.
func (u *unit) reserve(lim store.Unit, tokens int, now time.Time) int {
	if lim.RPM > 0 {
		u.rtat, _, _ = gcra(u.rtat, lim.RPM, 1, now)
	}
	if lim.TPM <= 0 {
		return 0
	}
	u.ttat, _, _ = gcra(u.ttat, lim.TPM, tokens, now)
	return min(max(tokens, 0), lim.TPM)
}

// correct moves u's TPM window from the reservation of l to used tokens:
// back (never before now) for fewer, forward for more.
func (u *unit) correct(l *lease, used int, now time.Time) {
	if used <= 0 || l.tpm <= 0 {
		return
	}
	u.ttat = latest(u.ttat.Add(interval(used-l.tokens, l.tpm)), now)
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
