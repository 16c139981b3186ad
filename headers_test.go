package sluice_test

import (
	"testing"

	"github.com/sluicehq/sluice"
)

func TestHeaderSetHas(t *testing.T) {
	set := sluice.NewHeaderSet("anthropic-beta", "x-stainless-*", "Session_id")
	tests := []struct {
		give string // canonical, as net/http keys a caller's header
		want bool
	}{
		{"Anthropic-Beta", true},
		{"Anthropic-Version", false},
		{"X-Stainless-Os", true},
		{"X-Stainless-", true},
		{"X-Stainless", false},
		{"Session_id", true},
		{"Session-Id", false},
	}
	for _, tt := range tests {
		if got := set.Has(tt.give); got != tt.want {
			t.Errorf("Has(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
	if every := sluice.NewHeaderSet("*"); !every.Has("X-Anything") || every.Empty() {
		t.Error(`NewHeaderSet("*") should hold every name`)
	}
	if empty := (sluice.HeaderSet{}); !empty.Empty() || empty.Has("User-Agent") {
		t.Error("the zero HeaderSet should be empty")
	}
}

func TestNeverForwarded(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"Authorization", true},
		{"X-Api-Key", true},
		{"X-Goog-Api-Key", true},
		{"Api-Key", true},
		{"Cookie", true},
		{"X-Sluice-Priority", true},
		{"X-Amz-Security-Token", true},
		{"Connection", true},
		{"Content-Length", true},
		{"Host", true},
		{"Openai-Organization", true},
		{"Anthropic-Beta", false},
		{"X-Stainless-Os", false},
		{"User-Agent", false},
	}
	for _, tt := range tests {
		if got := sluice.NeverForwarded(tt.give); got != tt.want {
			t.Errorf("NeverForwarded(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestNeverForwardedPattern(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"authorization", true},
		{"x-sluice-*", true},
		{"X-SLUICE-USER", true},
		{"x-sluice-u*", true},
		{"x-*", false}, // wider: what it covers beyond them is forwarded
		{"*", false},
		{"x-app", false},
	}
	for _, tt := range tests {
		if got := sluice.NeverForwardedPattern(tt.give); got != tt.want {
			t.Errorf("NeverForwardedPattern(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}
