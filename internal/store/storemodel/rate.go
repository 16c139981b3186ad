package storemodel

import (
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// window is the RPM/TPM window and the GCRA's burst tolerance (Unit.RPM).
const window = time.Minute

// interval is cost·window/limit: the GCRA emission interval of cost.
func interval(cost, limit int) time.Duration {
	return time.Duration(float64(cost) * float64(window) / float64(limit))
}

// gcra moves tat for a grant of cost under limit: "TAT to max(TAT, now) +
// c·interval, and is allowed only if that is at most now + 1 minute"; a
// cost above the limit counts as the limit. When refused, at is when it
// would pass.
func gcra(tat time.Time, limit, cost int, now time.Time) (next time.Time, ok bool, at time.Time) {
	cost = min(max(cost, 0), limit)
	next = latest(tat, now).Add(interval(cost, limit))
	if next.Sub(now) <= window {
		return next, true, time.Time{}
	}
	return next, false, next.Add(-window)
}

const day = 24 * time.Hour

// utcDay is the UTC day of now, in days since the epoch.
func utcDay(now time.Time) int64 { return now.Unix() / int64(day/time.Second) }

func nextMidnight(now time.Time) time.Time {
	return time.Unix((utcDay(now)+1)*int64(day/time.Second), 0)
}

// rateRoom reports whether u's RPM, TPM and daily limits (from lim) admit
// one more request of tokens; when not, at is when all of them would.
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
	if lim.DailyTokens > 0 && u.tokensToday(now)+min(max(tokens, 0), lim.DailyTokens) > lim.DailyTokens {
		ok, at = false, latest(at, nextMidnight(now))
	}
	if lim.DailyRequests > 0 && u.requestsToday(now) >= lim.DailyRequests {
		ok, at = false, latest(at, nextMidnight(now))
	}
	return ok, at
}

func (u *unit) tokensToday(now time.Time) int {
	if u.day != utcDay(now) {
		return 0
	}
	return u.used
}

func (u *unit) requestsToday(now time.Time) int {
	if u.reqDay != utcDay(now) {
		return 0
	}
	return u.reqs
}

// take takes a grant's request and tokens from u's windows and day.
func (u *unit) take(lim store.Unit, tokens int, now time.Time) hold {
	h := hold{u: u}
	if lim.RPM > 0 {
		u.rtat, _, _ = gcra(u.rtat, lim.RPM, 1, now)
	}
	if lim.TPM > 0 {
		u.ttat, _, _ = gcra(u.ttat, lim.TPM, tokens, now)
		h.tokens, h.tpm = min(max(tokens, 0), lim.TPM), lim.TPM
	}
	if lim.DailyTokens > 0 {
		h.daily, h.day = min(max(tokens, 0), lim.DailyTokens), utcDay(now)
		u.used, u.day = u.tokensToday(now)+h.daily, h.day
	}
	if lim.DailyRequests > 0 {
		u.reqs, u.reqDay = u.requestsToday(now)+1, utcDay(now) // "never given back"
	}
	return h
}

// correct moves the TPM window from h's reservation to used tokens ("may
// give tokens back (never past now) or take more"), and the day's count
// likewise when reserved today ("same day only").
func (h hold) correct(used int, now time.Time) {
	if used <= 0 {
		return
	}
	u := h.u
	if h.tpm > 0 {
		u.ttat = latest(u.ttat.Add(interval(used-h.tokens, h.tpm)), now)
	}
	if h.day != 0 && u.day == h.day && utcDay(now) == h.day {
		u.used = max(0, u.used+used-h.daily)
	}
}
