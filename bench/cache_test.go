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
	// One benchmark, the four sides in turn, b.N requests each, so that
	// the ratio is reported with the measurements it comes from.
	cpu := func(r *rig, url, body string) float64 { return cpuPerRequest(b, r, url, body, 64) }
	direct := cpu(plain, plain.url("direct"), chatBody)
	passthrough := cpu(plain, plain.url("sluice"), chatBody) - direct
	stat := cpu(cached, static.URL+"/v1/chat/completions", cachedBody)
	hit := cpu(cached, cached.url("sluice"), cachedBody) - stat
	b.ReportMetric(passthrough, "passthrough-own-cpu-ns/op")
	b.ReportMetric(hit, "hit-own-cpu-ns/op")
	b.ReportMetric(hit/passthrough, "x-passthrough")
}
