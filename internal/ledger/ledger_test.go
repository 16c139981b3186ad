package ledger_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/ledger"
)

func TestPolicyCountOnExpected(t *testing.T) {
	tests := []struct {
		name string
		give ledger.PolicyCount
		want bool
	}{
		{"AnyAccountMeant", ledger.PolicyCount{AccountID: "org-2"}, true},
		{"OnTheBoundAccount", ledger.PolicyCount{AccountID: "org-2", Expected: []string{"org-1", "org-2"}}, true},
		{"OutsideWithoutReason", ledger.PolicyCount{AccountID: "org-3", Expected: []string{"org-1", "org-2"}}, false},
		{"Fallback", ledger.PolicyCount{AccountID: "org-3", Expected: []string{"org-1"}, Fallback: "cooling"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.give.OnExpected(); got != tt.want {
				t.Errorf("OnExpected() = %v, want %v", got, tt.want)
			}
		})
	}
}
