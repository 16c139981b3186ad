package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// cachedBody is chatBody at temperature 0, which the response cache keeps.
var cachedBody = strings.Replace(chatBody, `"temperature":0.2`, `"temperature":0`, 1)

// cachedCatalog is catalogTemplate with a response cache on alias bench.
var cachedCatalog = strings.Replace(catalogTemplate, "  - alias: bench\n", "  - alias: bench\n    cache: {ttl: 1h}\n", 1)

// BenchmarkCacheHitCPU compares the CPU of a response-cache hit with a
// passthrough request's (chatBody's whole answer, from 64 callers): the
// process's CPU per request as BenchmarkPassthroughCPU reads it. A
// passthrough's own is Sluice's less the upstream's alone (direct); a
// hit's own is Sluice's less a static server answering the same bytes
// (static: the caller's side and a server's least work), since a hit asks
// no upstream. x-passthrough is the ratio of the two.
//
//	go test -run '^$' -bench CacheHitCPU -benchtime 2000x -count 3 ./bench/
func BenchmarkCacheHitCPU(b *testing.B) {
	plain, cached := newRig(b), newRigOf(b, "sluice-cache", cachedCatalog)
	resp, err := cached.request(b.Context(), cached.url("sluice"), cachedBody) // the miss that stores the answer
	if err != nil {
		b.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(static.Close)
	if resp, err := cached.request(b.Context(), cached.url("sluice"), cachedBody); err != nil {
		b.Fatal(err)
	} else if resp.Body.Close(); resp.Header.Get("X-Sluice-Cache") != "hit" {
		b.Fatalf("X-Sluice-Cache %q, want hit", resp.Header.Get("X-Sluice-Cache"))
	}
	var direct, passthrough, stat, hit float64
	for _, side := range []struct {
		name string
		r    *rig
		url  string
		body string
		cpu  *float64
	}{
		{"direct", plain, plain.url("direct"), chatBody, &direct},
		{"passthrough", plain, plain.url("sluice"), chatBody, &passthrough},
		{"static", cached, static.URL + "/v1/chat/completions", cachedBody, &stat},
		{"hit", cached, cached.url("sluice"), cachedBody, &hit},
	} {
		b.Run(side.name, func(b *testing.B) {
			*side.cpu = cpuPerRequest(b, side.r, side.url, side.body, 64)
			b.ReportMetric(*side.cpu, "cpu-ns/op")
		})
	}
	b.ReportMetric(passthrough-direct, "passthrough-own-cpu-ns/op")
	b.ReportMetric(hit-stat, "hit-own-cpu-ns/op")
	b.ReportMetric((hit-stat)/(passthrough-direct), "x-passthrough")
}
