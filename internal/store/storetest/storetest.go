// Package storetest is the contract suite every implementation of the store
// interfaces must pass: memstore in one process and redisstore against a
// real Redis run the same cases.
//
// The cases use only the interfaces of package store, real time with short
// durations (each case takes at most about 2 s), and names unique to each
// case and run, so they may share one server with other runs. Expectations
// on times tolerate clockSlop, for a backend whose clock is not the test's
// (Redis TIME). It is imported by tests only, and must not depend on any
// implementation.
package storetest

import (
	"testing"

	"github.com/sluicehq/sluice/internal/store"
)

// Stores is what one replica sees of a store backend.
type Stores interface {
	store.Claims
	store.Waker
	store.Inspector
	store.Statuses
}

// Run checks the behaviour every store backend must have. newBackend is
// called once per case with that case's t; it returns a constructor of
// replica handles that all share one backend. The constructor may be called
// several times: Replicas and NoOverAdmission use several handles.
//
// Beyond the doc comments of package store, the suite relies on:
//   - Wake being subscribed when it returns: a hint published right after
//     is delivered (hints may be lost only on failures of the backend);
//   - Units returning one state per requested ID, in order, zero valued
//     (apart from ID) for a unit the store has not seen;
//   - Status.Since round-tripping with millisecond precision.
func Run(t *testing.T, newBackend func(t *testing.T) func() Stores) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"GrantWithinCap", testGrantWithinCap},
		{"QueueWhenFull", testQueueWhenFull},
		{"CredentialInnerCap", testCredentialInnerCap},
		{"AccountCapAcrossCredentials", testAccountCapAcrossCredentials},
		{"IdempotentAcquire", testIdempotentAcquire},
		{"ReleaseExactlyOnce", testReleaseExactlyOnce},
		{"LeaseExpires", testLeaseExpires},
		{"NoBarging", testNoBarging},
		{"FIFO", testFIFO},
		{"Cooldown", testCooldown},
		{"BackoffWithoutRetryAfter", testBackoffWithoutRetryAfter},
		{"CooledCountsOverlapOnce", testCooledCountsOverlapOnce},
		{"ProbeHolderDies", testProbeHolderDies},
		{"ProbeSucceededKeepsLease", testProbeSucceededKeepsLease},
		{"CooldownIsPerUnit", testCooldownIsPerUnit},
		{"SkipsToNextCandidate", testSkipsToNextCandidate},
		{"Cancel", testCancel},
		{"DeadWaiterReaped", testDeadWaiterReaped},
		{"Replicas", testReplicas},
		{"NoOverAdmission", testNoOverAdmission},
		{"Inspector", testInspector},
		{"PriorityOrder", testPriorityOrder},
		{"InteractiveNewcomerBeatsWaitingBackground", testInteractiveNewcomerBeatsWaitingBackground},
		{"SameClassNoBarging", testSameClassNoBarging},
		{"ReservedShare", testReservedShare},
		{"BackgroundNeverProbesWhileInteractiveWaits", testBackgroundNeverProbesWhileInteractiveWaits},
		{"BackgroundPausesAfterRateLimit", testBackgroundPausesAfterRateLimit},
		{"WaitingByClass", testWaitingByClass},
		{"QueueVisibility", testQueueVisibility},
		{"RPMWindow", testRPMWindow},
		{"TPMReservation", testTPMReservation},
		{"TPMCorrection", testTPMCorrection},
		{"TwoReplicasShareWindows", testTwoReplicasShareWindows},
		{"HiddenCapLearned", testHiddenCapLearned},
		{"EffectiveCapCreepsBack", testEffectiveCapCreepsBack},
		{"LimitsAllMustFit", testLimitsAllMustFit},
		{"LimitsSharedAcrossUnits", testLimitsSharedAcrossUnits},
		{"LimitStateLapses", testLimitStateLapses},
		{"RefuseLimitNeverWaits", testRefuseLimitNeverWaits},
		{"DailyTokens", testDailyTokens},
		{"DailyRequests", testDailyRequests},
		{"ScopedCooldown", testScopedCooldown},
		{"FairShareBetweenTenants", testFairShareBetweenTenants},
		{"WeightedShare", testWeightedShare},
		{"SingleTenantStaysFIFO", testSingleTenantStaysFIFO},
		{"Statuses", testStatuses},
		{"SpanningLimitNoOverAdmission", testSpanningLimitNoOverAdmission},
		{"SpanningLimitOrder", testSpanningLimitOrder},
		{"SpanningLimitGivenBackOnAbandon", testSpanningLimitGivenBackOnAbandon},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newFixture(t, newBackend(t)))
		})
	}
}
