package config

import "testing"

func TestValidateProfiles(t *testing.T) {
	checkValidate(t, []validateCase{
		{"Valid", func(c *Catalog) {
			c.TaskTypes = []TaskType{{ID: "parse"}}
			c.Profiles = []Profile{{ID: "free", UserLimits: Limits{MaxInflight: 1, RPM: 10}, TaskLimits: map[string]TaskLimits{"parse": {MaxInflight: 1, DailyRequests: 20}},
				PriorityBonus: 2, Pool: "background"}}
			c.Tenants = []Tenant{{ID: "acme", DefaultProfile: "free"}}
			c.Keys[0].Assert = []string{AssertUser, AssertProfile}
		}, ""},
		{"UnknownTaskType", func(c *Catalog) {
			c.Profiles = []Profile{{ID: "free", TaskLimits: map[string]TaskLimits{"parse": {MaxInflight: 1}}}}
		}, `profiles[0].task_limits.parse: unknown task type "parse"`},
		{"UnknownPool", func(c *Catalog) { c.Profiles = []Profile{{ID: "free", Pool: "gold"}} }, `profiles[0].pool: unknown pool "gold"`},
		{"NegativeUserLimit", func(c *Catalog) { c.Profiles = []Profile{{ID: "free", UserLimits: Limits{RPM: -1}}} }, "profiles[0].user_limits.rpm: must be >= 0"},
		{"NegativeTaskLimit", func(c *Catalog) {
			c.TaskTypes = []TaskType{{ID: "parse"}}
			c.Profiles = []Profile{{ID: "free", TaskLimits: map[string]TaskLimits{"parse": {MaxInflight: -1}}}}
		}, "profiles[0].task_limits.parse.max_inflight: must be >= 0"},
		{"NegativeDailyRequests", func(c *Catalog) {
			c.TaskTypes = []TaskType{{ID: "parse"}}
			c.Profiles = []Profile{{ID: "free", TaskLimits: map[string]TaskLimits{"parse": {DailyRequests: -1}}}}
		}, "profiles[0].task_limits.parse.daily_requests: must be >= 0"},
		{"BonusAboveTheClasses", func(c *Catalog) { c.Profiles = []Profile{{ID: "free", PriorityBonus: 3}} }, "profiles[0].priority_bonus: must be between 0 and 2"},
		{"NegativeBonus", func(c *Catalog) { c.Profiles = []Profile{{ID: "free", PriorityBonus: -1}} }, "profiles[0].priority_bonus: must be between 0 and 2"},
		{"DuplicateID", func(c *Catalog) { c.Profiles = []Profile{{ID: "free"}, {ID: "free"}} }, `profiles[1].id: duplicate id "free"`},
		{"UnknownDefaultProfile", func(c *Catalog) { c.Tenants = []Tenant{{ID: "acme", DefaultProfile: "gold"}} }, `tenants[0].default_profile: unknown profile "gold"`},
		{"UnknownAssertion", func(c *Catalog) { c.Keys[0].Assert = []string{"tenant"} }, `keys[0].assert[0]: must be user or profile, got "tenant"`},
		{"DuplicateAssertion", func(c *Catalog) { c.Keys[0].Assert = []string{"user", "user"} }, `keys[0].assert[1]: duplicate "user"`},
	})
}
