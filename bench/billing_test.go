package bench

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// billingSection is the billing section of the billed catalogs, shared
// with bench/run.sh's sluice-billed.
//
//go:embed billing.yaml
var billingSection string

// billedCatalog is catalogTemplate billed (see billing.yaml): every request
// then goes through admission on the balance view, the billing:bench
// concurrency unit, pricing, and settlement, its charge written in the
// usage record's transaction.
var billedCatalog = strings.Replace(catalogTemplate,
	"{id: bench, tenant: bench, secret_env: BENCH_KEY}",
	"{id: bench, tenant: bench, secret_env: BENCH_KEY, billing_account: bench}", 1) + billingSection

// onPostgres is catalog (of catalogTemplate's layout) with its database in
// PostgreSQL, a schema of its own, when SLUICE_BENCH_DB is postgres, and
// unchanged otherwise. The spool stays on, in the rig's directory.
func onPostgres(tb testing.TB, catalog string) string {
	if os.Getenv("SLUICE_BENCH_DB") != "postgres" {
		return catalog
	}
	url := strings.ReplaceAll(testenv.Postgres(tb), "%", "%%")
	return strings.Replace(catalog, `database: {url: "sqlite://%[1]s"}`, `database: {url: "`+url+`", spool_dir: "%[1]s-spool"}`, 1)
}

// newBilledRig is a rig serving billedCatalog, its account topped up with
// far more than a benchmark spends, once the balance view has read it.
func newBilledRig(tb testing.TB) *rig {
	tb.Helper()
	r := newRigOf(tb, "sluice-billed", onPostgres(tb, billedCatalog))
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
// upstream (direct), through Sluice without billing (unbilled) and through
// Sluice serving billedCatalog (billed), both gateways running for the
// whole benchmark so that each side bears the other's background work.
// Each iteration of a mode measures the three in turn, b.N requests each,
// so that with -count every repetition is one interleaved comparison (a
// sub-benchmark per side would repeat each side -count times in a row, and
// the load of the machine would drift between them). Per request it
// reports the gateway's own CPU (…-cpu-ns/op: the process's, from
// getrusage, less direct's) and heap allocations and bytes (…-allocs/op,
// …-B/op: runtime.MemStats, less direct's), and x-unbilled, billed's CPU
// over unbilled's. Each measurement includes the writing of its requests'
// usage records and charges, which happens after their answers. ns/op is
// the wall time of the three measurements, not a figure to read.
//
// Both gateways keep their records and ledger in an SQLite file, whose
// work runs in their process; with SLUICE_BENCH_DB=postgres both use a
// PostgreSQL schema instead (testenv.Postgres): x-unbilled is then the
// gateway's own work alone, and with a server on this machine its CPU is
// read from /proc as well (…-db-cpu-ns/op, less direct's: the background
// work of both gateways), and x-unbilled-with-db is the ratio of gateway
// and database together.
//
//	go test -run '^$' -bench BillingCPU -benchtime 2000x -count 5 ./bench/
//	SLUICE_BENCH_DB=postgres go test -run '^$' -bench BillingCPU -benchtime 2000x -count 5 ./bench/
func BenchmarkBillingCPU(b *testing.B) {
	unbilled, billed := newRigOf(b, "sluice", onPostgres(b, catalogTemplate)), newBilledRig(b)
	postgres := os.Getenv("SLUICE_BENCH_DB") == "postgres"
	for _, mode := range []string{"json", "stream"} {
		b.Run(mode, func(b *testing.B) {
			body, callers, behavior := chatBody, 64, simulator.Behavior{}
			if mode == "stream" {
				body, callers, behavior = fmt.Sprintf(streamBody, streamWords), streamCallers, simulator.Behavior{ChunkDelay: streamGap}
			}
			unbilled.setBehavior(behavior)
			billed.setBehavior(behavior)
			b.StopTimer()
			direct := usePerOp(b, unbilled, unbilled.url("direct"), body, callers)
			off := usePerOp(b, unbilled, unbilled.url("sluice"), body, callers).less(direct)
			on := usePerOp(b, billed, billed.url("sluice"), body, callers).less(direct)
			b.ReportMetric(direct.cpu, "direct-cpu-ns/op")
			for _, side := range []struct {
				name string
				use  usePerRequest
			}{{"unbilled", off}, {"billed", on}} {
				b.ReportMetric(side.use.cpu, side.name+"-cpu-ns/op")
				b.ReportMetric(side.use.mallocs, side.name+"-allocs/op")
				b.ReportMetric(side.use.bytes, side.name+"-B/op")
			}
			b.ReportMetric(on.cpu/off.cpu, "x-unbilled")
			if postgres {
				// The database's work per request is the server's here, not
				// this process's: both counted, the ratio the gateway and its
				// database cost together.
				b.ReportMetric(off.db, "unbilled-db-cpu-ns/op")
				b.ReportMetric(on.db, "billed-db-cpu-ns/op")
				b.ReportMetric((on.cpu+on.db)/(off.cpu+off.db), "x-unbilled-with-db")
			}
		})
	}
}

// usePerRequest is what one request cost the process (CPU nanoseconds,
// heap allocations and bytes allocated) and the PostgreSQL server on this
// machine (CPU nanoseconds; 0 when none runs).
type usePerRequest struct{ cpu, mallocs, bytes, db float64 }

func (u usePerRequest) less(v usePerRequest) usePerRequest {
	return usePerRequest{u.cpu - v.cpu, u.mallocs - v.mallocs, u.bytes - v.bytes, u.db - v.db}
}

// postgresCPU is the CPU time the PostgreSQL server's processes on this
// machine have used, from /proc: their user and system clock ticks (USER_HZ,
// 100 on Linux). A backend that exits takes its time with it; the
// gateways' pools keep theirs open while they run. 0 where there is no
// /proc or no server.
func postgresCPU() time.Duration {
	const tick = 10 * time.Millisecond
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid … utime stime: the comm may hold spaces,
		// the fields after its closing parenthesis do not.
		comm, rest, ok := strings.Cut(string(stat), ") ")
		if !ok || !strings.HasSuffix(comm, "(postgres") {
			continue
		}
		if f := strings.Fields(rest); len(f) > 12 {
			user, _ := strconv.ParseInt(f[11], 10, 64)
			sys, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += user + sys
		}
	}
	return time.Duration(ticks) * tick
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
	start, dbStart := processCPU(), postgresCPU()
	b.StartTimer()
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
	cpu, db := processCPU()-start, postgresCPU()-dbStart
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	return usePerRequest{float64(cpu) / n, float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n, float64(db) / n}
}
