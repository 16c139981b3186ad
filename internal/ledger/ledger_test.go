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

func TestBillingAccountDefaults(t *testing.T) {
	for _, tt := range []struct{ in, want ledger.BillingAccount }{
		{ledger.BillingAccount{ID: "a"}, ledger.BillingAccount{ID: "a", MaxInflight: 1, OnLimit: "wait"}},
		{ledger.BillingAccount{ID: "a", MaxInflight: 4, OnLimit: "refuse", Allowance: 5, Cycle: "day"},
			ledger.BillingAccount{ID: "a", MaxInflight: 4, OnLimit: "refuse", Allowance: 5, Cycle: "day"}},
		{ledger.BillingAccount{ID: "a", Allowance: 5}, ledger.BillingAccount{ID: "a", MaxInflight: 1, OnLimit: "wait", Allowance: 5, Cycle: "month"}},
		{ledger.BillingAccount{ID: "a", MaxInflight: -1}, ledger.BillingAccount{ID: "a", MaxInflight: -1, OnLimit: "wait"}}, // for Validate to name
	} {
		if got := tt.in.WithDefaults(); got != tt.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
