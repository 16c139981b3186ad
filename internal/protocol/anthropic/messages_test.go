package anthropic

import (
	"encoding/json"
	"testing"
)

func TestContentRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{"String", `"hi"`},
		{"Blocks", `[{"type":"text","text":"hi"},{"type":"tool_result","tool_use_id":"t","content":"ok","is_error":true}]`},
		{"NoBlocks", `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Content
			if err := json.Unmarshal([]byte(tt.give), &c); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(c)
			if err != nil || string(got) != tt.give {
				t.Errorf("Marshal(Unmarshal(%s)) = %s, %v", tt.give, got, err)
			}
		})
	}
}
