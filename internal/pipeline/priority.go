package pipeline

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// class is the priority class a request runs in (its index in
// sluice.Priorities, which is its store.Acquire.Class): the key's default, or the
// class the caller asked for when it is no more urgent than that — a key
// may yield, never jump the queue.
func class(k *sluice.Key, req *sluice.Request) int {
	c := slices.Index(sluice.Priorities, k.Priority)
	if c < 0 {
		c = 1 // standard
	}
	if asked := slices.Index(sluice.Priorities, req.Priority); asked > c {
		return asked
	}
	return c
}

// Wait is how long a request of class c may wait for capacity.
func (s *Snapshot) Wait(c int) time.Duration { return s.wait[c] }
