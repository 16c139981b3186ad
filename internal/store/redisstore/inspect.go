package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/store"
)

// Units reports the state of each unit in ids, in order, after reaping
// expired leases and dead waiters (bounded, as in every script; waiters
// that reaping made room for are woken). Cap is the
// last Cap an Acquire passed for the unit; Waiting counts queued tickets
// listing it across every queue, and WaitingByClass splits them by class.
// OldestByClass and WaitingByTenant come from a bounded scan (see
// lua/units.lua): of at most 64 queues listing the unit, the first 256
// tickets of each class; beyond that they under-report.
func (s *Store) Units(ctx context.Context, domain string, ids []string) ([]store.UnitState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	v, err := s.fcall(ctx, unitsScript, s.idArgs(unitsScript, domain, ids)).Slice()
	if err != nil {
		return nil, unavailable("units", err)
	}
	out := make([]store.UnitState, len(ids))
	p := unitsReply{v: v}
	for i, id := range ids {
		var r [10 + store.Classes + 1]int64 // see lua/units.lua
		for j := range r {
			r[j] = p.int()
		}
		u := store.UnitState{ID: id, InFlight: int(r[0]), Cap: int(r[1]), Level: int(r[3]), EffectiveCap: int(r[8]),
			Cooled: time.Duration(r[9]) * time.Millisecond}
		for c := range store.Classes {
			u.WaitingByClass[c] = int(r[5+c])
			u.Waiting += int(r[5+c])
			if ms := r[10+c]; ms != 0 {
				u.OldestByClass[c] = time.UnixMilli(ms)
			}
		}
		for range r[10+store.Classes] {
			if p.err != nil {
				break
			}
			if u.WaitingByTenant == nil {
				u.WaitingByTenant = make(map[string]int)
			}
			tenant := p.str()
			u.WaitingByTenant[tenant] += int(p.int())
		}
		if r[2] != 0 {
			u.CoolingUntil = time.UnixMilli(r[2])
		}
		switch r[4] {
		case 1:
			u.Probe = "available"
		case 2:
			u.Probe = "in_flight"
		}
		out[i] = u
	}
	if p.err == nil && p.i != len(v) {
		p.err = fmt.Errorf("%d values left over", len(v)-p.i)
	}
	if p.err != nil {
		return nil, fmt.Errorf("redisstore: units: reply for %d units: %w", len(ids), p.err)
	}
	return out, nil
}

// unitsReply reads the flat reply of lua/units.lua; the first malformed or
// missing value sets err, and later reads return zero values.
type unitsReply struct {
	v   []any
	i   int
	err error
}

func (p *unitsReply) next() any {
	if p.err != nil {
		return nil
	}
	if p.i >= len(p.v) {
		p.err = fmt.Errorf("reply too short (%d values)", len(p.v))
		return nil
	}
	x := p.v[p.i]
	p.i++
	return x
}

func (p *unitsReply) int() int64 {
	x := p.next()
	if p.err != nil {
		return 0
	}
	n, ok := x.(int64)
	if !ok {
		p.err = fmt.Errorf("value %d is %T, want an integer", p.i-1, x)
	}
	return n
}

func (p *unitsReply) str() string {
	x := p.next()
	if p.err != nil {
		return ""
	}
	s, ok := x.(string)
	if !ok {
		p.err = fmt.Errorf("value %d is %T, want a string", p.i-1, x)
	}
	return s
}

// CredentialInFlight counts the live leases of each credential in ids.
func (s *Store) CredentialInFlight(ctx context.Context, domain string, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	v, err := s.fcall(ctx, credentialsScript, s.idArgs(credentialsScript, domain, ids)).Int64Slice()
	if err != nil {
		return nil, unavailable("credential in flight", err)
	}
	if len(v) != len(ids) {
		return nil, fmt.Errorf("redisstore: credential in flight: %d counts for %d credentials", len(v), len(ids))
	}
	for i, id := range ids {
		out[id] = int(v[i])
	}
	return out, nil
}

// idArgs is the ARGV of the inspector scripts: the wake prefix (they reap,
// and announce what reaping freed), then the IDs.
func (s *Store) idArgs(f *function, domain string, ids []string) []any {
	args := f.call(s.domain(domain).keyArgs, 1+len(ids))
	args = append(args, s.wake)
	for _, id := range ids {
		args = append(args, id)
	}
	return args
}
