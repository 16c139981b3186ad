package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// deferral is one request refused at once under X-Sluice-Max-Wait: 0: the
// wait it was told, how long the refusal took, and how long a request
// that queued right after it really waited.
type deferral struct {
	estimate, took, actual time.Duration
}

// TestDontWaitRetryAfterMatchesTheRealWait: org-1 takes two requests at a
// time, each answered after 100ms. Workers loop: each first asks with
// X-Sluice-Max-Wait: 0 and, refused, at once asks again the same request
// without it — a request that queues where the refused one would have —
// and measures how long that one waited for capacity (its latency less
// the upstream's 100ms). Over 200 deferrals at steady load the estimate
// (X-Sluice-Retry-After-Ms) is within 30% of that wait at the median, and
// every refusal came back at once: it held no connection for its wait.
func TestDontWaitRetryAfterMatchesTheRealWait(t *testing.T) {
	h := newHarnessWith(t, chatWire.catalog(strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)), "{backend: memory}", simAccounts())
	const (
		workers   = 8
		service   = 100 * time.Millisecond // simAccounts' latency
		deferrals = 200
		warmUp    = time.Second // until the queue is steady and its service rate measured
	)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	measureFrom := time.Now().Add(warmUp)
	var (
		mu  sync.Mutex
		got []deferral
	)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				tag := fmt.Sprintf("w%d-%d", i, n)
				start := time.Now()
				status, hdr := h.maxWaitAsk(ctx, tag, "0")
				took := time.Since(start)
				if status == http.StatusOK || status == 0 {
					continue // room at once, or the test is over
				}
				if status != http.StatusTooManyRequests {
					t.Errorf("max wait 0 = %d, want 429 or 200", status)
					return
				}
				ms, err := strconv.Atoi(hdr.Get("X-Sluice-Retry-After-Ms"))
				secs, err2 := strconv.Atoi(hdr.Get("Retry-After"))
				if err != nil || err2 != nil || ms <= 0 || secs < 1 || secs != max(1, (ms+999)/1000) {
					t.Errorf("refusal headers Retry-After %q, X-Sluice-Retry-After-Ms %q: want whole seconds ≥ 1 rounding up the milliseconds",
						hdr.Get("Retry-After"), hdr.Get("X-Sluice-Retry-After-Ms"))
					return
				}
				twin := time.Now()
				if status, _ := h.maxWaitAsk(ctx, tag+"-twin", ""); status != http.StatusOK {
					if ctx.Err() == nil {
						t.Errorf("waiting twin = %d, want 200", status)
					}
					return
				}
				d := deferral{estimate: time.Duration(ms) * time.Millisecond, took: took, actual: max(time.Since(twin)-service, time.Millisecond)}
				mu.Lock()
				if start.After(measureFrom) && len(got) < deferrals {
					got = append(got, d)
				}
				enough := len(got) == deferrals
				mu.Unlock()
				if enough {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if len(got) < deferrals {
		t.Fatalf("only %d deferrals measured within 20s, want %d", len(got), deferrals)
	}
	errs := make([]float64, len(got))
	tooks := make([]time.Duration, len(got))
	actuals := make([]time.Duration, len(got))
	for i, d := range got {
		errs[i] = float64(d.estimate-d.actual) / float64(d.actual)
		if errs[i] < 0 {
			errs[i] = -errs[i]
		}
		tooks[i], actuals[i] = d.took, d.actual
	}
	slices.Sort(errs)
	slices.Sort(tooks)
	slices.Sort(actuals)
	q := func(p float64) int { return min(len(got)-1, int(p*float64(len(got)))) }
	t.Logf("%d deferrals: |estimate−actual|/actual p10 %.2f, p25 %.2f, median %.2f, p75 %.2f, p90 %.2f; actual wait median %v; refusal latency median %v, p90 %v, max %v",
		len(got), errs[q(.1)], errs[q(.25)], errs[q(.5)], errs[q(.75)], errs[q(.9)], actuals[q(.5)], tooks[q(.5)], tooks[q(.9)], tooks[len(tooks)-1])
	if m := errs[q(.5)]; m > 0.30 {
		t.Errorf("median |estimate−actual|/actual = %.2f, want ≤ 0.30", m)
	}
	// Zero connections held: a refusal costs the try, not the wait.
	if tooks[q(.5)] > actuals[q(.5)]/4 {
		t.Errorf("median refusal latency %v against a median wait of %v: the refused requests waited", tooks[q(.5)], actuals[q(.5)])
	}
}

// TestMaxWaitBoundsTheWait: a request with X-Sluice-Max-Wait: 300ms on a
// full account is refused after about that long, with a Retry-After; an
// invalid value is a 400 and reaches no upstream.
func TestMaxWaitBoundsTheWait(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newHarnessWith(t, chatWire.catalog(strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1)), state, simAccounts())
		for _, id := range []string{"k1", "k2", "k3"} {
			h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-1", Latency: 2 * time.Second})
		}
		var wg sync.WaitGroup
		for _, tag := range []string{"fill-1", "fill-2"} {
			wg.Go(func() { h.maxWaitAsk(t.Context(), tag, "") })
		}
		eventually(t, 2*time.Second, "org-1 full", func() bool { return h.simA.InFlight() == 2 })
		start := time.Now()
		status, hdr := h.maxWaitAsk(t.Context(), "bounded", "300ms")
		took := time.Since(start)
		if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || hdr.Get("X-Sluice-Retry-After-Ms") == "" {
			t.Errorf("bounded wait = %d %v, want 429 with Retry-After and X-Sluice-Retry-After-Ms", status, hdr)
		}
		if took < 250*time.Millisecond || took > 1500*time.Millisecond {
			t.Errorf("bounded wait took %v, want about 300ms (the class waits 10s)", took)
		}
		for _, v := range []string{"soon", "-1s", "5"} {
			if status, _ := h.maxWaitAsk(t.Context(), "invalid", v); status != http.StatusBadRequest {
				t.Errorf("X-Sluice-Max-Wait: %s = %d, want 400", v, status)
			}
		}
		wg.Wait()
		if n := len(h.simA.Requests()); n != 2 {
			t.Errorf("upstream calls = %d, want only the two fills", n)
		}
	})
}

// maxWaitAsk sends a chat request for "one" tagged tag, with
// X-Sluice-Max-Wait: maxWait unless it is "", and returns its status and
// headers (0 when the context ended).
func (h *harness) maxWaitAsk(ctx context.Context, tag, maxWait string) (int, http.Header) {
	hdr := map[string]string{}
	if maxWait != "" {
		hdr["X-Sluice-Max-Wait"] = maxWait
	}
	resp := h.send(ctx, chatCaller, keyWeb, "one", false, chatCaller.body("one", tag, false), hdr)
	if resp == nil {
		return 0, nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}
