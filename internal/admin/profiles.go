package admin

import (
	"net/http"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// Profile is a quota profile of the serving catalog as GET /admin/profiles
// shows it: what an entitlement to it gives an end user, and the tenants
// whose end users without an entitlement get it. Profiles are declared in
// the catalog only; the admin API reads them, for the entitlements that
// name them.
type Profile struct {
	ID            string                `json:"id"`
	UserLimits    sluice.Limits         `json:"user_limits"`
	TaskLimits    map[string]TaskLimits `json:"task_limits"` // by task type
	PriorityBonus int                   `json:"priority_bonus"`
	Pool          string                `json:"pool,omitempty"`
	DefaultFor    []string              `json:"default_for"` // tenants with it as default_profile
}

// TaskLimits are a profile's limits on one end user for one task type.
type TaskLimits struct {
	MaxInflight   int `json:"max_inflight,omitempty"`
	DailyRequests int `json:"daily_requests,omitempty"`
}

// profileView is p as the admin API shows it, with the tenants of
// tenants that default to it.
func profileView(p config.Profile, tenants []config.Tenant) Profile {
	out := Profile{ID: p.ID, UserLimits: p.UserLimits, TaskLimits: make(map[string]TaskLimits, len(p.TaskLimits)),
		PriorityBonus: p.PriorityBonus, Pool: p.Pool, DefaultFor: []string{}}
	for task, l := range p.TaskLimits {
		out.TaskLimits[task] = TaskLimits{MaxInflight: l.MaxInflight, DailyRequests: l.DailyRequests}
	}
	for _, t := range tenants {
		if t.DefaultProfile == p.ID {
			out.DefaultFor = append(out.DefaultFor, t.ID)
		}
	}
	slices.Sort(out.DefaultFor)
	return out
}

// listProfiles handles GET /admin/profiles: the serving catalog's quota
// profiles, in its order.
func (s *server) listProfiles(w http.ResponseWriter, _ *http.Request) error {
	if s.entitlements == nil {
		return errNoEntitlements
	}
	profiles, tenants := s.entitlements.Profiles()
	out := make([]Profile, 0, len(profiles))
	for _, p := range profiles {
		out = append(out, profileView(p, tenants))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
