package pipeline

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// policySink keeps the policy a lookup returns escaping, as it does in
// an admission.
var policySink *routePolicy

// TestPolicyLookupAllocatesNothing: every request looks up its key's route
// policy; the lookup must not copy the compiled key onto the heap.
func TestPolicyLookupAllocatesNothing(t *testing.T) {
	live, scoped := admissionLive(t)
	snap := live.Load()
	unknown := &sluice.Key{ID: "unknown"}
	for _, k := range []*sluice.Key{scoped, unknown} {
		kp := snap.keys[k.ID]
		if n := testing.AllocsPerRun(100, func() { policySink = snap.policy(&kp, "", "", "") }); n != 0 {
			t.Errorf("policy(%s) allocates %v times, want 0", k.ID, n)
		}
	}
	if policySink.mode != "default" {
		t.Errorf("policy(unknown key) = %+v, want mode default", policySink)
	}
}
