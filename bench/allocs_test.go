package bench

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// allocsPerRequest is what one request costs a proxy in heap allocations:
// on its request path (its server's connection, its transport's
// connections towards the upstream), the part of those made in Sluice's
// own code (gateway), in the usage writer (Sluice's records, written after
// the answers in batches), and the bytes of request path and writer.
type allocsPerRequest struct {
	request, gateway, writer, bytes float64
}

func (a allocsPerRequest) total() float64 { return a.request + a.writer }

// proxyAllocs measures the heap allocations one request costs the proxy
// itself. The caller, the proxy and the upstream all run in this process,
// so testing's allocs/op counts all three, and runtime.MemStats counts
// the gateway's background loops as well, which allocate by the clock
// (about 500 a second) and not by the request. Instead every allocation is
// recorded with its stack (runtime.MemProfileRate 1) while n requests are
// sent one at a time straight to the upstream and n through the proxy,
// and each allocation is sorted by its stack (see readAllocs): the
// caller's and the gateway's periodic loops' are left out, the usage
// writer's are counted apart, and the rest (the servers' connections and
// the transports') less the upstream alone's batch is the proxy's request
// path. No garbage collection runs meanwhile: one empties the sync.Pools
// (net/http's, bufio's, …), and refilling them would be counted as the
// requests' own, more or less of it by when the collections fell.
//
// What is left is not quite exact. Over 20 runs on one gateway the
// request path's count spread over 1.2 (a timer net/http's transport
// makes only when a response beats the confirmation of its request's
// write; tiny allocations, under 16 bytes, which the profile sees only
// when they open a new 16-byte block), the usage writer's over 6 (its
// batches are cut by the clock), and the gateway code's over 0.1.
func (r *rig) proxyAllocs(tb testing.TB, proxy, body string) allocsPerRequest {
	tb.Helper()
	const n = 500
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	measure := func(url string) allocsByRole {
		for range 50 { // warm the connection pools and caches
			if err := r.post(url, body); err != nil {
				tb.Fatal(err)
			}
		}
		time.Sleep(settleWait)
		before := readAllocs()
		for range n {
			if err := r.post(url, body); err != nil {
				tb.Fatal(err)
			}
		}
		time.Sleep(settleWait) // the usage writer flushes the batch's records
		return readAllocs().less(before)
	}
	direct := measure(r.url("direct"))
	through := measure(r.url(proxy)).less(direct)
	return allocsPerRequest{
		request: float64(through.request.objects) / n,
		gateway: float64(through.gateway.objects) / n,
		writer:  float64(through.writer.objects) / n,
		bytes:   float64(through.request.bytes+through.writer.bytes) / n,
	}
}

type allocCount struct{ objects, bytes int64 }

func (c *allocCount) add(rec *runtime.MemProfileRecord) {
	c.objects += rec.AllocObjects
	c.bytes += rec.AllocBytes
}

func (c allocCount) less(d allocCount) allocCount {
	return allocCount{c.objects - d.objects, c.bytes - d.bytes}
}

// allocsByRole counts allocations by what made them (see readAllocs).
type allocsByRole struct{ request, gateway, writer allocCount }

func (a allocsByRole) less(b allocsByRole) allocsByRole {
	return allocsByRole{a.request.less(b.request), a.gateway.less(b.gateway), a.writer.less(b.writer)}
}

// Where the frames of an allocation's stack are, for readAllocs.
const (
	sluicePkgs    = "github.com/sluicehq/sluice/"
	simulatorPkg  = "github.com/sluicehq/sluice/internal/simulator."
	callerRoot    = "testing.tRunner"
	backgroundFn  = "github.com/sluicehq/sluice/internal/app.(*Gateway).background"
	writerFn      = "github.com/sluicehq/sluice/internal/settle.(*Recorder).run"
	databasePkg   = "database/sql."
	sqliteDrivers = "modernc.org/sqlite"
)

// readAllocs is the process's allocations so far, from the heap profile
// (which a collection brings up to date), sorted by the frames of their
// stacks: the caller's goroutine and the gateway's periodic loops are left
// out; the usage writer's, and the database's goroutines, are the
// writer's; the rest is the request path's, and those of it with a frame
// of Sluice's (not the simulator's) are also the gateway code's. A
// profile keeps the 32 innermost frames of a stack; a deeper stack that
// lost its outer frames is sorted by those it kept.
func readAllocs() allocsByRole {
	runtime.GC()
	var recs []runtime.MemProfileRecord
	for n, ok := runtime.MemProfile(nil, true); !ok; {
		recs = make([]runtime.MemProfileRecord, n+64)
		n, ok = runtime.MemProfile(recs, true)
		recs = recs[:min(n, len(recs))]
	}
	var out allocsByRole
	for i := range recs {
		rec := &recs[i]
		var caller, background, writer, gateway bool
		frames := runtime.CallersFrames(rec.Stack())
		for {
			f, more := frames.Next()
			fn := f.Function
			caller = caller || fn == callerRoot
			background = background || strings.HasPrefix(fn, backgroundFn)
			writer = writer || fn == writerFn || strings.HasPrefix(fn, databasePkg) || strings.HasPrefix(fn, sqliteDrivers)
			gateway = gateway || strings.HasPrefix(fn, sluicePkgs) && !strings.HasPrefix(fn, simulatorPkg)
			if !more {
				break
			}
		}
		switch {
		case caller, background:
		case writer:
			out.writer.add(rec)
		default:
			out.request.add(rec)
			if gateway {
				out.gateway.add(rec)
			}
		}
	}
	return out
}
