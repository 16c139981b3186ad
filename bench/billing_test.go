package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// billedCatalog is catalogTemplate billed: the key is bound to the billing
// account "bench", whose plan prices the alias per token and per request,
// with the deployment's model costed, and whose concurrency (max_inflight)
// is far above the benchmark's callers, so that no request waits for it.
// Every request then goes through admission on the balance view, the
// billing:bench concurrency unit, pricing, and settlement, its charge
// written in the usage record's transaction.
var billedCatalog = strings.Replace(catalogTemplate,
	"{id: bench, tenant: bench, secret_env: BENCH_KEY}",
	"{id: bench, tenant: bench, secret_env: BENCH_KEY, billing_account: bench}", 1) + `billing:
  currency: USD
  plans:
    - id: standard
      prices:
        - {alias: bench, input: "0.60", output: "2.40", request: "0.0001", effective_from: "2020-01-01T00:00:00Z"}
  costs:
    - {model: gpt-4o-mini, input: "0.15", output: "0.60", effective_from: "2020-01-01T00:00:00Z"}
  accounts:
    - {id: bench, plan: standard, max_inflight: 1024}
`

// newBilledRig is a rig serving billedCatalog, its account topped up with
// far more than a benchmark spends, once the balance view has read it.
func newBilledRig(tb testing.TB) *rig {
	tb.Helper()
	r := newRigOf(tb, billedCatalog)
	req, err := http.NewRequest(http.MethodPost, "http://"+r.gw.AdminAddr()+"/admin/billing/accounts/bench/topup",
		strings.NewReader(`{"amount":"1000000.00"}`))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+benchEnv["BENCH_ADMIN_TOKEN"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		tb.Fatalf("top-up: status %d", resp.StatusCode)
	}
	// The view reads balances every second: until then the key is refused.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := r.post(r.url("sluice"), chatBody)
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("billed request after the top-up: %v", err)
		}
	}
}

// settleWait outlasts the usage writer's flush interval (200 ms), so that
// the records, and the charges written with them, of the requests a
// measurement sent are written within it.
const settleWait = 300 * time.Millisecond

// BenchmarkBillingCPU measures what billing costs a request: the same chat
// passthrough load (whole answers from 64 concurrent callers, streams from
// streamCallers, as in BenchmarkPassthroughCPU) sent straight to the
// upstream ("direct"), through Sluice without billing ("unbilled") and
// through Sluice with billedCatalog ("billed"), both gateways running for
// the whole benchmark so that each side bears the other's background work.
// Per request it reports the process's CPU (cpu-ns/op, getrusage) and heap
// allocations (mallocs/op, MemStats), and the gateway's own (proxy-…: less
// direct's); x-unbilled is billed's own CPU over unbilled's from this same
// run. Each measurement includes the writing of its requests' usage
// records (and charges), which happens after their answers.
//
//	go test -run '^$' -bench BillingCPU -benchtime 2000x -count 3 ./bench/
func BenchmarkBillingCPU(b *testing.B) {
	rigs := map[string]*rig{"unbilled": newRig(b), "billed": newBilledRig(b)}
	for _, mode := range []string{"json", "stream"} {
		b.Run(mode, func(b *testing.B) {
			body, callers, behavior := chatBody, 64, simulator.Behavior{}
			if mode == "stream" {
				body, callers, behavior = fmt.Sprintf(streamBody, streamWords), streamCallers, simulator.Behavior{ChunkDelay: streamGap}
			}
			for _, r := range rigs {
				r.setBehavior(behavior)
			}
			var direct, unbilled usePerRequest
			for _, side := range []string{"direct", "unbilled", "billed"} {
				b.Run(side, func(b *testing.B) {
					r, url := rigs["unbilled"], rigs["unbilled"].url("direct")
					if side != "direct" {
						r = rigs[side]
						url = r.url("sluice")
					}
					use := usePerOp(b, r, url, body, callers)
					b.ReportMetric(use.cpu, "cpu-ns/op")
					b.ReportMetric(use.mallocs, "mallocs/op")
					if side == "direct" {
						direct = use
						return
					}
					own := use.less(direct)
					b.ReportMetric(own.cpu, "proxy-cpu-ns/op")
					b.ReportMetric(own.mallocs, "proxy-mallocs/op")
					b.ReportMetric(own.bytes, "proxy-B/op")
					if side == "unbilled" {
						unbilled = own
					} else {
						b.ReportMetric(own.cpu/unbilled.cpu, "x-unbilled")
					}
				})
			}
		})
	}
}

// usePerRequest is what one request cost the process: CPU nanoseconds,
// heap allocations and bytes allocated.
type usePerRequest struct{ cpu, mallocs, bytes float64 }

func (u usePerRequest) less(v usePerRequest) usePerRequest {
	return usePerRequest{u.cpu - v.cpu, u.mallocs - v.mallocs, u.bytes - v.bytes}
}

// usePerOp sends b.N requests of body to url from about callers concurrent
// callers, each answer read whole, and returns what each cost the process,
// the writing of their usage records included: unlike cpuPerRequest it
// stops counting settleWait after the last answer, not at it, as a
// charge's write (the cost billing adds after the answer) would otherwise
// fall partly outside the measurement, and partly into the next one.
func usePerOp(b *testing.B, r *rig, url, body string, callers int) usePerRequest {
	for range 20 { // warm the connection pools
		if err := r.post(url, body); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(settleWait)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := processCPU()
	b.ResetTimer()
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "client")))
		for pb.Next() {
			if err := r.post(url, body); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	time.Sleep(settleWait)
	cpu := processCPU() - start
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	return usePerRequest{float64(cpu) / n, float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n}
}
