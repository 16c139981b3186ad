package sluice_test

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestKeyPathNames(t *testing.T) {
	names := sluice.KeyPathNames()
	for _, want := range []string{"responses", "responses_compact", "chat", "messages", "gemini"} {
		if !slices.Contains(names, want) {
			t.Errorf("KeyPathNames() = %v, want it to hold %q", names, want)
		}
	}
	if !slices.IsSorted(names) || len(names) != len(sluice.KeyPaths)+1 {
		t.Errorf("KeyPathNames() = %v, want KeyPaths' names and responses_compact, sorted", names)
	}
}

func TestKeyMayCall(t *testing.T) {
	tests := []struct {
		name     string
		paths    []string
		protocol sluice.Protocol
		compact  bool
		want     bool
		wantName string
	}{
		{"NoPathsEverything", nil, sluice.ProtocolOpenAIResponses, false, true, "responses"},
		{"ResponsesCoversCompact", []string{"responses"}, sluice.ProtocolOpenAIResponses, true, true, "responses"},
		{"CompactOnly", []string{"responses_compact"}, sluice.ProtocolOpenAIResponses, true, true, "responses_compact"},
		{"CompactOnlyNotCreation", []string{"responses_compact"}, sluice.ProtocolOpenAIResponses, false, false, "responses"},
		{"ChatNotCompact", []string{"chat"}, sluice.ProtocolOpenAIResponses, true, false, "responses"},
		{"ResponsesNotChat", []string{"responses"}, sluice.ProtocolOpenAIChat, false, false, "chat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &sluice.Key{KeySettings: sluice.KeySettings{Paths: tt.paths}}
			if name, ok := k.MayCall(tt.protocol, tt.compact); ok != tt.want || name != tt.wantName {
				t.Errorf("MayCall(%s, %v) = %q, %v; want %q, %v", tt.protocol, tt.compact, name, ok, tt.wantName, tt.want)
			}
		})
	}
}
