package config

import "testing"

func TestValidateTaskPolicy(t *testing.T) {
	withTask := func(tt TaskType) func(c *Catalog) {
		return func(c *Catalog) {
			c.Profiles = []Profile{{ID: "paid"}, {ID: "free"}}
			c.TaskTypes = append(c.TaskTypes, tt)
		}
	}
	checkValidate(t, []validateCase{
		{"pool and table", withTask(TaskType{ID: "parse", Pool: "background",
			Priority: TaskPriority{"paid": "interactive", "free": "standard", "default": "background"}}), ""},
		{"unknown pool", withTask(TaskType{ID: "parse", Pool: "nope"}), `task_types[0].pool: unknown pool "nope"`},
		{"unknown profile", withTask(TaskType{ID: "parse", Priority: TaskPriority{"gold": "interactive"}}),
			`task_types[0].priority.gold: unknown profile "gold" (a profiles[].id, or default)`},
		{"unknown class", withTask(TaskType{ID: "parse", Priority: TaskPriority{"default": "urgent"}}),
			`task_types[0].priority.default: must be interactive, standard or background, got "urgent"`},
		{"submit rpm negative", func(c *Catalog) { c.Credentials[0].SubmitRPM = -1 }, "credentials[0].submit_rpm: must be >= 0"},
	})
}

func TestTaskPriorityClass(t *testing.T) {
	table := TaskPriority{"paid": "interactive", "default": "background"}
	tests := []struct {
		profile string
		want    string
		wantOK  bool
	}{
		{"paid", "interactive", true},
		{"free", "background", true},
		{"", "background", true},
	}
	for _, tt := range tests {
		if got, ok := table.Class(tt.profile); got != tt.want || ok != tt.wantOK {
			t.Errorf("Class(%q) = %q, %v; want %q, %v", tt.profile, got, ok, tt.want, tt.wantOK)
		}
	}
	if got, ok := (TaskPriority{"paid": "interactive"}).Class("free"); ok {
		t.Errorf("Class(free) without a default = %q, true; want false", got)
	}
}
