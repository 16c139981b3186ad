package authn

import (
	"fmt"
	"testing"
	"time"
)

func TestThrottleRefusesASourceOverItsBudget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := NewThrottle(3, 10*time.Second, func() time.Time { return now })
	for i := range 3 {
		if wait, refused := th.Refused("a"); refused {
			t.Fatalf("try %d refused (%s) within the burst", i, wait)
		}
		th.Failed("a")
	}
	wait, refused := th.Refused("a")
	if !refused || wait != 10*time.Second {
		t.Fatalf("after the burst: Refused = %s, %t; want 10s, true", wait, refused)
	}
	if _, refused := th.Refused("b"); refused {
		t.Error("another source is refused")
	}
	th.Refused("a")
	now = now.Add(10 * time.Second) // one failure refilled
	if _, refused := th.Refused("a"); refused {
		t.Fatal("refused after a refill")
	}
	if got := th.Failed("a"); got != 2 {
		t.Errorf("Failed after two refusals = %d, want 2 (for its log line)", got)
	}
	if _, refused := th.Refused("a"); !refused {
		t.Error("not refused again once the refill is spent")
	}
}

func TestThrottleForgetsWholeSources(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := NewThrottle(1, time.Second, func() time.Time { return now })
	for i := range maxSources {
		th.Failed(fmt.Sprint(i))
	}
	now = now.Add(time.Second)
	th.Failed("new")
	if n := len(th.sources); n != 1 {
		t.Errorf("%d sources remembered, want 1 once the others refilled", n)
	}
}
