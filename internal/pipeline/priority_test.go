package pipeline

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

func TestClassYieldsButNeverJumps(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		asked string
		want  int
	}{
		{"key default", "interactive", "", 0},
		{"interactive key yields to background", "interactive", "background", 2},
		{"background key cannot jump", "background", "interactive", 2},
		{"standard key asks standard", "standard", "standard", 1},
		{"unknown asked class ignored", "standard", "urgent", 1},
		{"key without priority is standard", "", "", 1},
	}
	snap := &Snapshot{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := snap.class(&sluice.Key{Priority: tt.key}, "", "", tt.asked)
			if got != tt.want {
				t.Errorf("class(key %q, asked %q) = %d, want %d", tt.key, tt.asked, got, tt.want)
			}
		})
	}
}

// TestClassFromTaskTable: a task type's table gives the class by profile
// (its default entry for the others), over the key's priority, up or
// down; a task without a table keeps the key's; the caller may still only
// lower what the table gives.
func TestClassFromTaskTable(t *testing.T) {
	snap := &Snapshot{
		keys: map[string]keyPolicy{"backend": {task: "quick_parse"}},
		taskPolicy: &taskPolicy{classes: map[string]config.TaskPriority{
			"section_generation": {"paid": "interactive", "default": "standard"},
			"quick_parse":        {"free": "standard", "paid": "interactive"},
			"product_parse":      {"default": "background"},
		}},
	}
	key := &sluice.Key{ID: "backend", Priority: "standard"}
	tests := []struct {
		task, profile, asked string
		want                 int
	}{
		{"section_generation", "paid", "", 0},
		{"section_generation", "free", "", 1},
		{"section_generation", "", "", 1},
		{"", "paid", "", 0},              // the key's default task: quick_parse
		{"", "enterprise", "", 1},        // no entry, no default: the key's
		{"product_parse", "paid", "", 2}, // down from the key's standard
		{"summarize", "paid", "", 1},     // no table: the key's
		{"section_generation", "paid", "background", 2},
		{"product_parse", "paid", "interactive", 2},
	}
	for _, tt := range tests {
		task, _ := snap.Task(key, tt.task)
		got := snap.class(key, task, tt.profile, tt.asked)
		if got != tt.want {
			t.Errorf("class(task %q, profile %q, asked %q) = %d, want %d", tt.task, tt.profile, tt.asked, got, tt.want)
		}
	}
}

// TestClassProfileBonus: a profile's priority_bonus raises what policy
// gives (the key's priority or the task table's), never past interactive;
// the caller may still lower the result.
func TestClassProfileBonus(t *testing.T) {
	snap := &Snapshot{taskPolicy: &taskPolicy{
		classes: map[string]config.TaskPriority{"product_parse": {"default": "background"}},
		bonus:   map[string]int{"paid": 1, "premium": 2},
	}}
	key := &sluice.Key{ID: "k", Priority: "standard"}
	tests := []struct {
		task, profile, asked string
		want                 int
	}{
		{"chat", "paid", "", 0},
		{"chat", "premium", "", 0}, // never past interactive
		{"product_parse", "paid", "", 1},
		{"product_parse", "premium", "", 0},
		{"product_parse", "free", "", 2},
		{"chat", "premium", "background", 2},
	}
	for _, tt := range tests {
		got := snap.class(key, tt.task, tt.profile, tt.asked)
		if got != tt.want {
			t.Errorf("class(task %q, profile %q, asked %q) = %d, want %d", tt.task, tt.profile, tt.asked, got, tt.want)
		}
	}
}
