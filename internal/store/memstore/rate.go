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
	if lim.DailyTokens > 0 && u.today(now)+min(max(tokens, 0), lim.DailyTokens) > lim.DailyTokens {
		ok, at = false, latest(at, time.Unix((day(now)+1)*secondsPerDay, 0))
	}
	if lim.DailyRequests > 0 && u.requestsToday(now) >= lim.DailyRequests {
		ok, at = false, latest(at, time.Unix((day(now)+1)*secondsPerDay, 0))
	}
	return ok, at
}

const secondsPerDay = 24 * 60 * 60

// day is the UTC day of now, in days since the epoch.
func day(now time.Time) int64 { return now.Unix() / secondsPerDay }

// today is the tokens reserved and used on u's daily limit today.
func (u *unit) today(now time.Time) int {
	if u.day != day(now) {
		return 0
	}
	return u.used
}

// requestsToday is the grants counted on u's DailyRequests today.
func (u *unit) requestsToday(now time.Time) int {
	if u.reqDay != day(now) {
		return 0
	}
	return u.reqs
}

// reserve takes one request and tokens from u's windows and its day
// (which rateRoom said admit them) and returns the hold recording what it
// reserved.
func (u *unit) reserve(lim store.Unit, tokens int, now time.Time) hold {
	h := hold{u: u}
	if lim.RPM > 0 {
		u.rtat, _, _ = gcra(u.rtat, lim.RPM, 1, now)
	}
	if lim.TPM > 0 {
		u.ttat, _, _ = gcra(u.ttat, lim.TPM, tokens, now)
		h.tokens, h.tpm = min(max(tokens, 0), lim.TPM), lim.TPM
	}
	if lim.DailyTokens > 0 {
		h.daily, h.day = min(max(tokens, 0), lim.DailyTokens), day(now)
		u.used = u.today(now) + h.daily
		u.day = h.day
	}
	if lim.DailyRequests > 0 {
		u.reqs, u.reqDay = u.requestsToday(now)+1, day(now) // never given back
	}
	return h
}

// correct moves h's unit's TPM window from the reservation of h to used
// tokens: back (never before now) for fewer, forward for more; and its
// daily count likewise, if the reservation was made today (never below 0).
func (h hold) correct(used int, now time.Time) {
	if used <= 0 {
		return
	}
	u := h.u
	if h.tpm > 0 {
		u.ttat = latest(u.ttat.Add(interval(used-h.tokens, h.tpm)), now)
	}
	if h.day != 0 && u.day == h.day && day(now) == h.day {
		u.used = max(0, u.used+used-h.daily)
	}
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
