package config

import (
	"fmt"
	"slices"
	"sort"

	"github.com/sluicehq/sluice"
)

// TaskPriority is a task type's priority table (task_types[].priority):
// the class (interactive, standard or background) of the task type's
// requests by the quota profile they run under (profiles[].id), with
// TaskPriorityDefault for a request under any other profile or none. A
// request's class is the table's entry when one applies, else its key's
// priority; then its profile's priority_bonus raises it, and a caller's
// X-Sluice-Priority may only lower what results.
type TaskPriority map[string]string

// TaskPriorityDefault is the entry of a TaskPriority for requests under a
// profile the table does not name, or under none.
const TaskPriorityDefault = "default"

// Class returns the class t gives a request under profile ("" = none):
// its entry, else the default entry; false when neither is there.
func (t TaskPriority) Class(profile string) (string, bool) {
	if c, ok := t[profile]; ok && profile != "" {
		return c, true
	}
	c, ok := t[TaskPriorityDefault]
	return c, ok
}

// taskPolicies checks task_types[].pool and .priority: pools that exist,
// tables keyed by profiles that exist (or default) with classes that do.
// It runs after profiles.
func (v *validator) taskPolicies() {
	for i := range v.c.TaskTypes {
		tt := &v.c.TaskTypes[i]
		at := fmt.Sprintf("task_types[%d]", i)
		if tt.Pool != "" && !v.poolIDs[tt.Pool] {
			v.addf(at+".pool", "unknown pool %q", tt.Pool)
		}
		keys := make([]string, 0, len(tt.Priority))
		for k := range tt.Priority {
			keys = append(keys, k)
		}
		sort.Strings(keys) // errors in a stable order
		for _, k := range keys {
			pat := at + ".priority." + k
			if k != TaskPriorityDefault && !slices.ContainsFunc(v.c.Profiles, func(p Profile) bool { return p.ID == k }) {
				v.addf(pat, "unknown profile %q (a profiles[].id, or %s)", k, TaskPriorityDefault)
			}
			if c := tt.Priority[k]; !slices.Contains(sluice.Priorities, c) {
				v.addf(pat, "must be interactive, standard or background, got %q", c)
			}
		}
	}
}

// submitRates checks credentials[].submit_rpm.
func (v *validator) submitRates() {
	for i, cr := range v.c.Credentials {
		if cr.SubmitRPM < 0 {
			v.addf(fmt.Sprintf("credentials[%d].submit_rpm", i), "must be >= 0")
		}
	}
}
