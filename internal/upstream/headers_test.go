package upstream

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestPassOnAllocatesNothing: passing a caller's headers on shares the
// caller's values and, with a header map that has room, allocates
// nothing; with nothing to pass it does not even look.
func TestPassOnAllocatesNothing(t *testing.T) {
	caller := http.Header{"Authorization": {"Bearer sk-sluice"}, "Anthropic-Beta": {"b1"}, "X-Stainless-Os": {"Linux"}, "Accept": {"*/*"}}
	rules := &sluice.HeaderRules{}
	h := make(http.Header, 8)
	allocs := testing.AllocsPerRun(100, func() {
		passOn(h, caller, AnthropicMessages.Pass, rules)
		passOn(h, caller, sluice.HeaderSet{}, rules)
	})
	if allocs != 0 {
		t.Errorf("passOn allocated %v times a call, want 0", allocs)
	}
	if len(h) != 2 || h["Anthropic-Beta"][0] != "b1" || h["X-Stainless-Os"][0] != "Linux" {
		t.Errorf("passOn set %v, want the caller's Anthropic-Beta and X-Stainless-Os only", h)
	}
}

// TestAnthropicVersion: an Anthropic upstream is asked for the caller's
// API version when it was passed on, else for Sluice's.
func TestAnthropicVersion(t *testing.T) {
	h := http.Header{}
	anthropicAuth(h, nil, "sk-ant")
	if got := h.Get("Anthropic-Version"); got != anthropicVersion[0] {
		t.Errorf("nothing passed on: Anthropic-Version = %q, want %q", got, anthropicVersion[0])
	}
	h = http.Header{"Anthropic-Version": {"2024-01-01"}}
	anthropicTokenAuth(h, nil, "token")
	if got := h.Get("Anthropic-Version"); got != "2024-01-01" {
		t.Errorf("passed on: Anthropic-Version = %q, want the caller's 2024-01-01", got)
	}
}
