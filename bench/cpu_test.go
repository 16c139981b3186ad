package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// passthrough is one protocol served as it is: its path and the bodies of
// a whole answer and of a stream, each about the same conversation and
// the same length of answer as chatBody's and streamBody's.
type passthrough struct {
	name, path   string
	json, stream string
}

// streamWords is the length of each benchmark stream's answer: 16 text
// deltas, so 20 events for chat (role, 16 words, finish, usage, [DONE]),
// 24 for Messages and for Responses (their framing events around the
// deltas; upstream.BenchmarkPassthroughEvents counts them and their bytes).
const streamWords = 16

// passthroughs are the protocols Sluice passes through zero-copy. The
// Responses request sets store false, as Codex does: a stored response
// costs a job-store write (its id is bound to the edge), which is not
// passthrough.
var passthroughs = []passthrough{
	{name: "chat", path: "/v1/chat/completions", json: chatBody, stream: fmt.Sprintf(streamBody, streamWords)},
	{
		name: "messages", path: "/v1/messages",
		json: `{"model":"bench-claude","max_tokens":100,"temperature":0.2,` +
			`"system":"You are a concise assistant for a travel agency. Answer in plain prose, without lists, and mention prices only when asked.","messages":[` +
			`{"role":"user","content":"We are two adults with a dog, arriving by train on Friday evening."},` +
			`{"role":"assistant","content":"Noted: two adults and a dog, arriving Friday evening by train. What kind of weekend would you like?"},` +
			`{"role":"user","content":"Suggest a quiet weekend itinerary near a river, with one museum, one long walk and a dog-friendly restaurant."}]}`,
		stream: fmt.Sprintf(`{"model":"bench-claude","stream":true,"max_tokens":%d,`+
			`"system":"You are a concise assistant for a travel agency.",`+
			`"messages":[{"role":"user","content":"Suggest a quiet weekend itinerary near a river."}]}`, streamWords),
	},
	{
		name: "responses", path: "/v1/responses",
		json: `{"model":"bench-responses","store":false,"max_output_tokens":100,"temperature":0.2,` +
			`"instructions":"You are a concise assistant for a travel agency. Answer in plain prose, without lists, and mention prices only when asked.","input":[` +
			`{"role":"user","content":"We are two adults with a dog, arriving by train on Friday evening."},` +
			`{"role":"assistant","content":"Noted: two adults and a dog, arriving Friday evening by train. What kind of weekend would you like?"},` +
			`{"role":"user","content":"Suggest a quiet weekend itinerary near a river, with one museum, one long walk and a dog-friendly restaurant."}]}`,
		stream: fmt.Sprintf(`{"model":"bench-responses","store":false,"stream":true,"max_output_tokens":%d,`+
			`"instructions":"You are a concise assistant for a travel agency.",`+
			`"input":[{"role":"user","content":"Suggest a quiet weekend itinerary near a river."}]}`, streamWords),
	},
}

// streamGap spaces a benchmark stream's events, so that each reaches the
// proxy on a read of its own, as a model's tokens do (real gaps are
// 10–50 ms; shorter keeps the benchmark short without merging events).
// streamCallers streams run at once: few enough that no core is saturated,
// which would let reads merge events and flatter the bare hop's copy loop.
const (
	streamGap     = 2 * time.Millisecond
	streamCallers = 24
)

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPassthroughCPU measures the CPU one request costs each proxy,
// for each protocol Sluice passes through, whole answers (json) and
// streams (stream): the callers, the proxy and the upstream share this
// process, so the process's CPU time per request (cpu-ns/op, from
// getrusage: other processes on the machine do not count, unlike in
// ns/op) is taken for each proxy and for the upstream alone ("direct"),
// and their difference is the proxy's own (proxy-cpu-ns/op). Sluice's is
// also reported as a ratio, both from this same run: x-bare to the bare
// hop's, and x-chat to Sluice's on chat in the same mode. Whole answers
// come from 64 concurrent callers; streams from streamCallers, their
// events spaced by streamGap (one stream is streamWords text deltas).
//
//	go test -run '^$' -bench PassthroughCPU -benchtime 400x -count 3 ./bench/
func BenchmarkPassthroughCPU(b *testing.B) {
	r := newRig(b)
	r.setBehavior(simulator.Behavior{})
	for _, mode := range []string{"json", "stream"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "stream" {
				r.setBehavior(simulator.Behavior{ChunkDelay: streamGap})
				defer r.setBehavior(simulator.Behavior{})
			}
			sluiceChat := 0.0 // Sluice's own CPU per chat request in this mode, for x-chat
			for _, pt := range passthroughs {
				body, callers := pt.json, 64
				if mode == "stream" {
					body, callers = pt.stream, streamCallers
				}
				b.Run(pt.name, func(b *testing.B) {
					var direct, bare float64
					for _, p := range append([]string{"direct"}, proxies...) {
						b.Run(p, func(b *testing.B) {
							perOp := cpuPerRequest(b, r, r.urlOf(p, pt.path), body, callers)
							b.ReportMetric(perOp, "cpu-ns/op")
							switch p {
							case "direct":
								direct = perOp
								return
							case "bare":
								bare = perOp - direct
							}
							own := perOp - direct
							b.ReportMetric(own, "proxy-cpu-ns/op")
							if p != "sluice" {
								return
							}
							b.ReportMetric(own/bare, "x-bare")
							if pt.name == "chat" {
								sluiceChat = own
							} else if sluiceChat > 0 {
								b.ReportMetric(own/sluiceChat, "x-chat")
							}
						})
					}
				})
			}
		})
	}
}

// cpuPerRequest sends b.N requests of body to url from about callers
// concurrent callers, each answer read whole, and returns the process's CPU
// nanoseconds per request.
func cpuPerRequest(b *testing.B, r *rig, url, body string, callers int) float64 {
	for range 20 { // warm the connection pools
		if err := r.post(url, body); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	b.ResetTimer()
	start := processCPU()
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
	return float64(processCPU()-start) / float64(b.N)
}
