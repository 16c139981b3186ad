package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestUsage checks that Anthropic's usage, whose input counts only the
// uncached prompt, and Sluice's, whose prompt includes the cache reads and
// writes, convert both ways.
func TestUsage(t *testing.T) {
	a := Usage{InputTokens: 12, CacheCreationInputTokens: 100, CacheReadInputTokens: 1800, OutputTokens: 95, OutputTokensDetails: &OutputTokensDetails{ThinkingTokens: 40}}
	want := sluice.Usage{PromptTokens: 1912, CompletionTokens: 95, CachedTokens: 1800, CacheWriteTokens: 100, ReasoningTokens: 40, TotalTokens: 2007, Measured: true}
	got := a.Sluice()
	if got != want {
		t.Errorf("Sluice() = %+v, want %+v", got, want)
	}
	a.OutputTokensDetails = nil // Anthropic's usage has no field for Sluice's reasoning count
	if back := UsageOf(got); back != a {
		t.Errorf("UsageOf(%+v) = %+v, want %+v", got, back, a)
	}
}

// TestAddUsage checks how a stream's usage objects add up: the counts an
// event carries replace earlier ones, the others stay.
func TestAddUsage(t *testing.T) {
	start := sluice.Usage{PromptTokens: 117, CompletionTokens: 1, CachedTokens: 100, CacheWriteTokens: 5, TotalTokens: 118, Measured: true}
	tests := []struct {
		name string
		from sluice.Usage
		give string
		want sluice.Usage
	}{
		{"message_start", sluice.Usage{}, `{"input_tokens":12,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}`, start},
		{"output only keeps the prompt", start, `{"output_tokens":95}`,
			sluice.Usage{PromptTokens: 117, CompletionTokens: 95, CachedTokens: 100, CacheWriteTokens: 5, TotalTokens: 212, Measured: true}},
		{"input replaces the prompt", start, `{"input_tokens":20,"output_tokens":3}`, sluice.Usage{PromptTokens: 20, CompletionTokens: 3, TotalTokens: 23, Measured: true}},
		{"not an object", start, `7`, start},
		{"a whole answer's", sluice.Usage{}, `{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":95,"service_tier":"standard"}`,
			sluice.Usage{PromptTokens: 1812, CompletionTokens: 95, CachedTokens: 1800, TotalTokens: 1907, Measured: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.from
			AddUsage(&got, []byte(tt.give))
			if got != tt.want {
				t.Errorf("AddUsage(%+v, %s) = %+v, want %+v", tt.from, tt.give, got, tt.want)
			}
		})
	}
	if u := UsageValue(nil); u.Measured {
		t.Errorf("UsageValue(nil) = %+v, want unmeasured", u)
	}
}

// FuzzReadUsage checks the plain read of a usage object against
// encoding/json.
func FuzzReadUsage(f *testing.F) {
	for _, s := range []string{`{"input_tokens":12,"cache_read_input_tokens":1800,"output_tokens":95}`, `{"output_tokens":95}`,
		`{"input_tokens":1e2}`, `{"Input_tokens":1}`, `{"input_tokens":null}`, `{}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		got, ok := readUsage([]byte(give))
		if !ok {
			return
		}
		want := eventUsage{-1, -1, -1, -1}
		if err := json.Unmarshal([]byte(give), &want); err != nil || got != want {
			t.Fatalf("readUsage(%q) = %+v, encoding/json reads %+v, %v", give, got, want, err)
		}
	})
}

// TestUsageValueDoesNotAllocate guards the read every answer and every
// stream event that carries usage goes through.
func TestUsageValueDoesNotAllocate(t *testing.T) {
	v := []byte(`{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":95}`)
	if n := testing.AllocsPerRun(100, func() { _ = UsageValue(v) }); n != 0 {
		t.Errorf("reading usage allocates %v times, want 0", n)
	}
}
