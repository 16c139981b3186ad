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
func (s *Store) Units(ctx context.Context, domain string, ids []string) ([]store.UnitState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	v, err := unitsScript.Run(ctx, s.rdb, s.domainKeys(domain), s.idArgs(ids)...).Int64Slice()
	if err != nil {
		return nil, unavailable("units", err)
	}
	const width = 9 // integers per unit, see lua/units.lua
	if len(v) != width*len(ids) {
		return nil, fmt.Errorf("redisstore: units: %d integers for %d units", len(v), len(ids))
	}
	out := make([]store.UnitState, len(ids))
	for i, id := range ids {
		r := v[i*width : (i+1)*width]
		u := store.UnitState{ID: id, InFlight: int(r[0]), Cap: int(r[1]), Level: int(r[3]), EffectiveCap: int(r[8])}
		for c := range store.Classes {
			u.WaitingByClass[c] = int(r[5+c])
			u.Waiting += int(r[5+c])
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
	return out, nil
}

// CredentialInFlight counts the live leases of each credential in ids.
func (s *Store) CredentialInFlight(ctx context.Context, domain string, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	v, err := credentialsScript.Run(ctx, s.rdb, s.domainKeys(domain), s.idArgs(ids)...).Int64Slice()
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
func (s *Store) idArgs(ids []string) []any {
	args := make([]any, 0, 1+len(ids))
	args = append(args, s.wakePrefix())
	for _, id := range ids {
		args = append(args, id)
	}
	return args
}
