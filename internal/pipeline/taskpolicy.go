package pipeline

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// taskPolicy is what the catalog says about a request beyond its key: its
// class by task type and profile (task_types[].priority), its profile's
// priority bonus (profiles[].priority_bonus), and the pool its task type
// or profile routes it through (task_types[].pool, profiles[].pool). A
// snapshot whose catalog says none of it has none (nil), so requests pay
// nothing for it.
type taskPolicy struct {
	classes map[string]config.TaskPriority // task type → its priority table
	bonus   map[string]int                 // profile → its priority_bonus
	// taskPools and profilePools are the pool policies of the task types
	// and profiles that name a pool.
	taskPools    map[string]*routePolicy
	profilePools map[string]*routePolicy
}

// compileTaskPolicy compiles task_types[].priority and .pool and
// profiles[].priority_bonus and .pool into s.taskPolicy, after the pools.
func (s *Snapshot) compileTaskPolicy(c *config.Catalog) error {
	tp := &taskPolicy{classes: map[string]config.TaskPriority{}, bonus: map[string]int{},
		taskPools: map[string]*routePolicy{}, profilePools: map[string]*routePolicy{}}
	pool := func(id string) (*routePolicy, error) {
		rp, err := s.compilePolicy(config.Policy{Mode: sluice.PolicyPool, Pool: id})
		return &rp, err
	}
	var err error
	for _, tt := range c.TaskTypes {
		if len(tt.Priority) > 0 {
			tp.classes[tt.ID] = tt.Priority
		}
		if tt.Pool != "" {
			if tp.taskPools[tt.ID], err = pool(tt.Pool); err != nil {
				return fmt.Errorf("task_types[%s].pool: %w", tt.ID, err)
			}
		}
	}
	for _, p := range c.Profiles {
		if p.PriorityBonus > 0 {
			tp.bonus[p.ID] = p.PriorityBonus
		}
		if p.Pool != "" {
			if tp.profilePools[p.ID], err = pool(p.Pool); err != nil {
				return fmt.Errorf("profiles[%s].pool: %w", p.ID, err)
			}
		}
	}
	if len(tp.classes)+len(tp.bonus)+len(tp.taskPools)+len(tp.profilePools) > 0 {
		s.taskPolicy = tp
	}
	return nil
}

// policy returns the route policy of a request of key kp with task type
// task, quota profile profile and entitlement pool entitled ("" = none).
// A key whose policy is strict, preferred or pool fixes it: the key's. A
// default key's request routes through its task type's pool
// (task_types[].pool), else its end user's entitlement's pool, else its
// profile's (profiles[].pool), else by the key's default policy. It is
// shared, never copied, so that the lookups on every request allocate
// nothing: callers must not change it.
func (s *Snapshot) policy(kp *keyPolicy, task, profile, entitled string) *routePolicy {
	rp := kp.route
	if rp == nil {
		rp = &defaultPolicy // a key the snapshot does not know
	}
	tp := s.taskPolicy
	if rp.mode != sluice.PolicyDefault || tp == nil && entitled == "" {
		return rp
	}
	if tp != nil {
		if p := tp.taskPools[task]; p != nil {
			return p
		}
	}
	if p := s.profiles.pools[entitled]; p != nil { // the end user's entitlement's (profiles.go)
		return p
	}
	if tp != nil {
		if p := tp.profilePools[profile]; p != nil {
			return p
		}
	}
	return rp
}
