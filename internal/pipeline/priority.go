package pipeline

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// class is the priority class a request runs in (its index in
// sluice.Priorities, which is its store.Acquire.Class): the class policy
// gives it (see policyClass), or the class the caller asked for when it is
// no more urgent than that — a caller may yield, never jump the queue.
func (s *Snapshot) class(k *sluice.Key, task, profile, asked string) int {
	c := s.policyClass(k, task, profile)
	if a := slices.Index(sluice.Priorities, asked); a > c {
		return a
	}
	return c
}

// policyClass is the class the catalog gives a request: its task type's
// priority table's entry for the request's profile, else the table's
// default entry (task_types[].priority), else its key's priority
// (standard when unset); then raised by the request's profile's
// priority_bonus, never past interactive. With no table and no bonus in
// the catalog it is the key's priority, at no cost beyond that.
func (s *Snapshot) policyClass(k *sluice.Key, task, profile string) int {
	c := slices.Index(sluice.Priorities, k.Priority)
	if c < 0 {
		c = 1 // standard
	}
	tp := s.taskPolicy
	if tp == nil {
		return c
	}
	if byProfile, ok := tp.classes[task]; ok {
		if tc, ok := byProfile.Class(profile); ok {
			c = slices.Index(sluice.Priorities, tc) // validated: always found
		}
	}
	return max(0, c-tp.bonus[profile])
}

// Wait is how long a request of class c may wait for capacity.
func (s *Snapshot) Wait(c int) time.Duration { return s.wait[c] }
