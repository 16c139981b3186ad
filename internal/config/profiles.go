package config

import (
	"fmt"
	"slices"
	"sort"

	"github.com/sluicehq/sluice"
)

// Profile is a quota profile for end users (free, paid, enterprise …).
// The profile of a request is the one a trusted key asserts for it
// (X-Sluice-Profile), else the end user's entitlement valid now (set
// through the admin API), else its tenant's DefaultProfile, else none. When a
// profile applies, its UserLimits and TaskLimits replace the key's
// user_limits for that request; with none, the key's user_limits apply as
// before.
type Profile struct {
	ID string `yaml:"id"`
	// UserLimits hold for each end user of the profile, across every key
	// of the tenant: in flight, RPM, TPM and tokens per UTC day.
	UserLimits Limits `yaml:"user_limits"`
	// TaskLimits hold for each end user of the profile per task type
	// (task_types[].id): for example at most one heavy parse in flight.
	TaskLimits map[string]TaskLimits `yaml:"task_limits"`
	// PriorityBonus raises the class policy gives a request (the key's
	// priority, or the task type's table) by this many classes, towards
	// interactive and never past it: 0 (default), 1 or 2. A caller's
	// X-Sluice-Priority may still only lower the class that results.
	PriorityBonus int `yaml:"priority_bonus"`
	// Pool is the pool the profile's requests route through when the
	// key's policy does not fix one (pools[].id); an entitlement's pool
	// overrides it. "" = the key's routing.
	Pool string `yaml:"pool"`
}

// TaskLimits are the limits on one end user for one task type.
type TaskLimits struct {
	MaxInflight int `yaml:"max_inflight"`
	// DailyRequests bounds the requests of the task type an end user may
	// start per UTC day (each counts when admitted, even if it then fails);
	// 0 = no bound.
	DailyRequests int `yaml:"daily_requests"`
}

// profiles checks profiles[] and tenants[].default_profile: stable unique
// IDs, limits not negative, task types and pools that exist, a bonus
// within the classes.
func (v *validator) profiles() {
	ids := v.unique("profiles", "id", len(v.c.Profiles), func(i int) string { return v.c.Profiles[i].ID })
	for i := range v.c.Profiles {
		p := &v.c.Profiles[i]
		at := fmt.Sprintf("profiles[%d]", i)
		v.limitSet(at+".user_limits", p.UserLimits)
		tasks := make([]string, 0, len(p.TaskLimits))
		for task := range p.TaskLimits {
			tasks = append(tasks, task)
		}
		sort.Strings(tasks) // errors in a stable order
		for _, task := range tasks {
			tat := at + ".task_limits." + task
			if _, ok := v.tasks[task]; !ok {
				v.addf(tat, "unknown task type %q", task)
			}
			l := p.TaskLimits[task]
			if l.MaxInflight < 0 {
				v.addf(tat+".max_inflight", "must be >= 0")
			}
			if l.DailyRequests < 0 {
				v.addf(tat+".daily_requests", "must be >= 0")
			}
		}
		if maxBonus := len(sluice.Priorities) - 1; p.PriorityBonus < 0 || p.PriorityBonus > maxBonus {
			v.addf(at+".priority_bonus", "must be between 0 and %d (the classes above background), got %d", maxBonus, p.PriorityBonus)
		}
		if p.Pool != "" && !v.poolIDs[p.Pool] {
			v.addf(at+".pool", "unknown pool %q", p.Pool)
		}
	}
	for i, t := range v.c.Tenants {
		if _, ok := ids[t.DefaultProfile]; t.DefaultProfile != "" && !ok {
			v.addf(fmt.Sprintf("tenants[%d].default_profile", i), "unknown profile %q", t.DefaultProfile)
		}
	}
}

// Assertions a key may make about its requests (keys[].assert).
const (
	// AssertUser: the key speaks for its end users, so the end user its
	// requests name (X-Sluice-User, else the body's) selects that user's
	// entitlement. From other keys the end user still counts against
	// per-user limits but selects no entitlement: anyone could name a
	// premium user.
	AssertUser = "user"
	// AssertProfile: the key may name the profile of a request
	// (X-Sluice-Profile); from other keys that header is refused (403).
	AssertProfile = "profile"
)

// assertions checks keys[].assert.
func (v *validator) assertions(at string, asserts []string) {
	for j, a := range asserts {
		if a != AssertUser && a != AssertProfile {
			v.addf(fmt.Sprintf("%s[%d]", field(at, "assert"), j), "must be %s or %s, got %q", AssertUser, AssertProfile, a)
		} else if slices.Index(asserts, a) != j {
			v.addf(fmt.Sprintf("%s[%d]", field(at, "assert"), j), "duplicate %q", a)
		}
	}
}
