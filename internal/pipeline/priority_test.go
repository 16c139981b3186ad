package pipeline

import (
	"testing"

	"github.com/sluicehq/sluice"
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := class(&sluice.Key{Priority: tt.key}, &sluice.Request{Priority: tt.asked})
			if got != tt.want {
				t.Errorf("class(key %q, asked %q) = %d, want %d", tt.key, tt.asked, got, tt.want)
			}
		})
	}
}
