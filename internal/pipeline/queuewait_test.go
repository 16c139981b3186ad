package pipeline

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Every request observes its wait for capacity once, under its class: one
// that found room at once waited about nothing, one that queued behind it
// on an account of one slot about as long as the first one ran.
func TestQueueWaitIsObservedOncePerRequest(t *testing.T) {
	const upstreamLatency = 300 * time.Millisecond
	sim := simulator.New(simulator.Options{Default: simulator.Behavior{Latency: upstreamLatency}})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	env := func(string) (string, bool) { return "sk-upstream", true }
	snap := compileCatalog(t, `version: 1
endpoints: [{id: ep, base_url: `+srv.URL+`, protocols: [openai.chat]}]
accounts: [{id: one-slot, max_inflight: 1}]
credentials: [{id: c1, account: one-slot, secret_env: UP, endpoints: [ep]}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
keys: [{id: web, tenant: web, secret_env: KEY}]
`, env)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := memstore.New()
	live := &Live{}
	live.Swap(snap)
	m := metrics.New()
	engine := capacity.New(mem, mem, "r", time.Minute, log)
	go engine.Run(t.Context()) // wakes the waiter when the slot is released
	h := NewHandler(Stages{
		Live: live, Capacity: engine, Statuses: capacity.NewStatuses(mem, log),
		Caller: upstream.New(log, &upstream.Protocols{Dialects: map[sluice.Protocol]*upstream.Dialect{sluice.ProtocolOpenAIChat: upstream.OpenAIChat}, Endings: map[sluice.Protocol]*upstream.Ending{sluice.ProtocolOpenAIChat: upstream.OpenAIEnding}}, func(string) upstream.BreakerSettings { return upstream.BreakerSettings{Failures: 5, Open: time.Minute} }, nil),
		Usage:  &records{}, Metrics: m, Log: log,
	})
	var wg sync.WaitGroup
	var secondTook time.Duration // from arrival to answer: its wait, then its upstream call
	var firstDone, secondArrived time.Time
	for i, id := range []string{"first", "second"} {
		if i > 0 {
			for deadline := time.Now().Add(5 * time.Second); sim.InFlight() == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first request never reached the upstream")
				}
			}
			secondArrived = time.Now() // the first holds the slot
		}
		wg.Go(func() {
			w := httptest.NewRecorder()
			req := &sluice.Request{ID: id, Protocol: sluice.ProtocolOpenAIChat, Model: "fast",
				Body: []byte(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`), Received: time.Now()}
			if _, err := h.Serve(t.Context(), w, req, &sluice.Principal{Key: snap.StaticKeys[0]}); err != nil || w.Code != 200 {
				t.Errorf("%s: Serve = %v, %d %s", id, err, w.Code, w.Body)
			}
			if id == "second" {
				secondTook = time.Since(req.Received)
			} else {
				firstDone = time.Now()
			}
		})
	}
	wg.Wait()
	got := map[string]*dto.Histogram{}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "sluice_queue_wait_seconds" {
			for _, s := range f.GetMetric() {
				got[s.GetLabel()[0].GetValue()] = s.GetHistogram()
			}
		}
	}
	std := got["standard"]
	if len(got) != len(sluice.Priorities) || std.GetSampleCount() != 2 || got["interactive"].GetSampleCount() != 0 {
		t.Fatalf("queue wait series = %v, want one per class, 2 observations of class standard", got)
	}
	// The second waited for the rest of the first's upstream call — from
	// its arrival until the first released its slot, just before its
	// answer — and not for its own; the first did not wait. (Bounds, not
	// sleeps: a loaded machine stretches every step.)
	sum := time.Duration(std.GetSampleSum() * float64(time.Second))
	if least := firstDone.Sub(secondArrived) - 100*time.Millisecond; sum < least || sum > secondTook-upstreamLatency+10*time.Millisecond {
		t.Errorf("waits sum to %s, want at least %s (until the first's answer) and at most the second's %s less its own upstream call", sum, least, secondTook)
	}
	if first := std.GetBucket()[0]; first.GetUpperBound() > 0.01 || first.GetCumulativeCount() != 1 {
		t.Errorf("first bucket = %v, want the first request's wait (≈0) alone in it", first)
	}
}
