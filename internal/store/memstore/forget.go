package memstore

import (
	"container/heap"
	"time"
)

// forgetBatch bounds the limit units one call forgets; the rest wait for
// the next calls.
const forgetBatch = 16

// lapsing is a min-heap of limit units with no lease and no waiter, by the
// time their windows and day lapse: then they are as good as new and are
// forgotten, so a limit per end user does not keep every user ever seen.
type lapsing []lapse

type lapse struct {
	u  *unit
	at time.Time
}

func (h lapsing) Len() int           { return len(h) }
func (h lapsing) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h lapsing) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lapsing) Push(x any)        { *h = append(*h, x.(lapse)) }
func (h *lapsing) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = lapse{}
	*h = old[:len(old)-1]
	return x
}

// idle reports whether nothing refers to u but the domain's table of
// units: no lease holds a slot in it and no ticket lists it.
func (u *unit) idle() bool { return len(u.leases) == 0 && len(u.waiting) == 0 }

// lapses is when u's RPM and TPM windows are empty and its days (tokens,
// requests) are over (if it used any of them): from then on a new unit would decide the same.
func (u *unit) lapses() time.Time {
	at := latest(u.rtat, u.ttat)
	if u.used > 0 {
		at = latest(at, time.Unix((u.day+1)*secondsPerDay, 0))
	}
	if u.reqs > 0 {
		at = latest(at, time.Unix((u.reqDay+1)*secondsPerDay, 0))
	}
	return at
}

// forgetLater schedules limit unit u to be forgotten once it lapses, if it
// is idle and not scheduled already. A limit has no cooldown nor learned
// cap, so its windows and day are all its state.
func (d *domain) forgetLater(u *unit) {
	if !u.isLimit || u.lapsing || !u.idle() {
		return
	}
	u.lapsing = true
	heap.Push(&d.lapsing, lapse{u: u, at: u.lapses()})
}

// forget drops the scheduled limit units that have lapsed and are still
// idle, at most forgetBatch of them. One that is busy again is scheduled
// anew when it next becomes idle; one whose windows moved on is scheduled
// for their new end.
func (d *domain) forget(now time.Time) {
	for n := 0; n < forgetBatch && len(d.lapsing) > 0 && !d.lapsing[0].at.After(now); n++ {
		u := heap.Pop(&d.lapsing).(lapse).u
		u.lapsing = false
		d.reap(u, now)
		switch {
		case !u.idle(), !u.until.IsZero() || u.level > 0 || u.ecap > 0 || u.cooled > 0: // an ID that is also a unit's keeps its cooldown; one that ever cooled, its sum
		case u.lapses().After(now):
			d.forgetLater(u)
		default:
			delete(d.units, u.id)
		}
	}
}
