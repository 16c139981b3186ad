package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

// A feature the benchmarked request does not use must cost it nothing. Each
// featureOff is catalogTemplate with one feature configured somewhere the
// key "bench" and the alias "bench" never reach: another endpoint, alias,
// key or tenant. The request measured is the same as on the plain
// catalog, so any allocation or CPU it costs more is the feature's price
// for being present.
type featureOff struct {
	name string
	// endpoints, credentials, models and keys are list items added to the
	// catalog's sections of those names; sections are new top-level
	// sections. Each is YAML at the catalog's indentation, "%[2]s" the
	// upstream's URL.
	endpoints, credentials, models, keys, sections string
}

// otherEndpoint is the simulator again under another ID, so that the
// features' credentials and aliases have edges of their own, none of them
// the alias "bench"'s.
const otherEndpoint = "  - {id: sim-other, base_url: %[2]s, protocols: [openai.chat]}\n"

// otherAccount is an account of its own on otherEndpoint, with the alias
// "bench-other" routed to it, for the features that name accounts.
const (
	otherCredential = "  - {id: other-1, account: other-acct, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim-other]}\n"
	otherAlias      = "  - alias: bench-other\n    deployments:\n      - {model: gpt-4o, endpoints: [sim-other]}\n"
)

var featuresOff = []featureOff{
	{
		// Costs of a model the alias does not run: a catalog that costs
		// but bills no one (a billing section with plans or accounts makes
		// every key need a billing account, so there is no billed catalog
		// in which the key "bench" is unbilled).
		name:        "billing",
		endpoints:   otherEndpoint,
		credentials: "  - {id: other-1, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim-other]}\n",
		models:      otherAlias,
		sections: "billing:\n  costs:\n" +
			"    - {model: gpt-4o, input: \"2.50\", output: \"10.00\", effective_from: \"2020-01-01T00:00:00Z\"}\n",
	},
	{
		// What deployments take, on another alias: a vision model first,
		// a text-only fallback.
		name: "input",
		models: "  - alias: bench-vision\n    deployments:\n" +
			"      - {model: gpt-4o, endpoints: [sim], input: [text, image]}\n" +
			"      - {model: gpt-4o-mini, endpoints: [sim], priority: 1, input: [text]}\n",
	},
	{
		name:   "affinity",
		models: "  - alias: bench-affinity\n    strategy: affinity\n    deployments:\n      - {model: gpt-4o-mini, endpoints: [sim]}\n",
	},
	{
		// Another tenant's own key, on an alias of its own.
		name:        "owners",
		endpoints:   otherEndpoint,
		credentials: "  - {id: other-own, owner: {tenant: other}, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim-other]}\n",
		models:      otherAlias,
	},
	{
		// Quota profiles, the default of another tenant; the key's tenant
		// has none and the request names none.
		name: "profiles",
		sections: "profiles:\n  - {id: free, user_limits: {max_inflight: 1, rpm: 10}, task_limits: {summarize: {daily_requests: 20}}}\n" +
			"task_types:\n  - {id: summarize}\n" +
			"tenants:\n  - {id: other, default_profile: free}\n",
	},
	{
		// A model unit under another account.
		name:        "model-units",
		endpoints:   otherEndpoint,
		credentials: otherCredential,
		models:      otherAlias,
		sections:    "accounts:\n  - {id: other-acct, max_inflight: 8, models: {gpt-4o: {max_inflight: 2}}}\n",
	},
	{
		// Every route policy mode, on other keys, and a task type routed
		// through a pool, which the key "bench" declares no task of.
		name:        "policies",
		endpoints:   otherEndpoint,
		credentials: otherCredential,
		models:      otherAlias,
		keys: "  - {id: other-strict, tenant: other, secret_env: BENCH_OTHER_KEY_1, policy: {mode: strict, accounts: [other-acct]}}\n" +
			"  - {id: other-preferred, tenant: other, secret_env: BENCH_OTHER_KEY_2, policy: {mode: preferred, accounts: [other-acct], fallback: any, wait: 100ms}}\n" +
			"  - {id: other-pool, tenant: other, secret_env: BENCH_OTHER_KEY_3, policy: {mode: pool, pool: shared}}\n",
		sections: "accounts:\n  - {id: other-acct, max_inflight: 8}\n" +
			"pools:\n  - {id: shared, accounts: [other-acct], max_inflight: 4, strategy: fill-first}\n" +
			"task_types:\n  - {id: batch, pool: shared}\n",
	},
	{
		// Redaction policies on another key, another tenant and another
		// alias: every detector and an operator pattern, restored.
		name:        "redaction",
		endpoints:   otherEndpoint,
		credentials: "  - {id: other-1, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim-other]}\n",
		models:      otherAlias + "    redaction: pii\n",
		keys:        "  - {id: other-redacted, tenant: other, secret_env: BENCH_OTHER_KEY_1, redaction: pii}\n",
		sections: "tenants:\n  - {id: other, redaction: pii}\n" +
			"redaction:\n  - id: pii\n    restore: true\n" +
			"    detectors: {email: mask, phone: mask, cn_id: block, card: block, iban: block, ipv4: log, ipv6: log, api_key: mask}\n" +
			"    patterns: [{name: ticket, regex: 'T-[0-9]+', action: log}]\n",
	},
	{
		// Response caches on another alias and on another key, forced.
		name:        "cache",
		endpoints:   otherEndpoint,
		credentials: "  - {id: other-1, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim-other]}\n",
		models:      otherAlias + "    cache: {ttl: 1m}\n",
		keys:        "  - {id: other-cached, tenant: other, secret_env: BENCH_OTHER_KEY_1, cache: {ttl: 1h, force: true, charge: none}}\n",
	},
}

// catalog is catalogTemplate with f's additions.
func (f featureOff) catalog() string {
	doc := catalogTemplate
	for _, add := range []struct{ section, items string }{
		{"\nendpoints:\n", f.endpoints}, {"\ncredentials:\n", f.credentials}, {"\nmodels:\n", f.models},
	} {
		doc = strings.Replace(doc, add.section, add.section+add.items, 1)
	}
	return doc + f.keys + f.sections // keys is catalogTemplate's last section
}

// TestFeatureOffCatalogsServe checks that each catalog of featuresOff
// passes validation and answers the benchmarked request: a catalog that
// no longer loads would leave its feature unmeasured.
func TestFeatureOffCatalogsServe(t *testing.T) {
	for _, f := range featuresOff {
		t.Run(f.name, func(t *testing.T) {
			r := newRigOf(t, "sluice-"+f.name, f.catalog())
			if err := r.post(r.url("sluice"), chatBody); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFeatureOffAllocs checks that a feature the request does not use adds
// no allocation to it: the default chat request (whole answer, and
// stream) on each catalog of featuresOff makes as many allocations in
// Sluice's code as on the plain catalog (see proxyAllocs). The slack is
// the measurement's noise: over 20 runs on one gateway the count spread
// over 0.3 for whole answers, and over 0.9 for streams, whose events reach
// the gateway merged or not by timing (net/http's chunk header for a
// chunk of 256 bytes or more allocates). So one allocation more fails the
// whole answer's check; a stream's needs two.
func TestFeatureOffAllocs(t *testing.T) {
	skipAllocsUnlessCounted(t)
	plain := newRig(t)
	modes := []struct {
		name, body string
		slack      float64
	}{
		{"json", chatBody, 0.5},
		{"stream", fmt.Sprintf(streamBody, streamWords), 1},
	}
	base := map[string]allocsPerRequest{}
	for _, m := range modes {
		base[m.name] = plain.proxyAllocs(t, "sluice", m.body)
	}
	for _, f := range featuresOff {
		t.Run(f.name, func(t *testing.T) {
			r := newRigOf(t, "sluice-"+f.name, f.catalog())
			for _, m := range modes {
				got, want := r.proxyAllocs(t, "sluice", m.body), base[m.name]
				if got.gateway > want.gateway+m.slack {
					// One count over the slack may be the noise of either
					// count: measure both again and keep the lower of each.
					got, want = fewer(got, r.proxyAllocs(t, "sluice", m.body)), fewer(want, plain.proxyAllocs(t, "sluice", m.body))
				}
				t.Logf("%s: %.2f allocs/request in Sluice's code, plain catalog %.2f (request path %.2f, %.2f; usage writer %.2f, %.2f)",
					m.name, got.gateway, want.gateway, got.request, want.request, got.writer, want.writer)
				if got.gateway > want.gateway+m.slack {
					t.Errorf("%s: %.2f allocs/request in Sluice's code with %s configured for others, %.2f without: "+
						"the feature costs requests that do not use it; find where with\n"+
						"\tgo test -run '^$' -bench 'FeatureOff/%s/%s' -benchtime 2000x -memprofile mem.out -memprofilerate 1 ./bench/\n"+
						"\tgo tool pprof -sample_index=alloc_objects -top bench.test mem.out",
						m.name, got.gateway, f.name, want.gateway, f.name, m.name)
				}
			}
		})
	}
}

// BenchmarkFeatureOff measures, for each feature of featuresOff, the
// default chat request on the plain catalog and on the catalog with the
// feature configured for others, both gateways running for the whole
// benchmark (as in BenchmarkBillingCPU, each iteration measures both in
// turn, b.N requests each). Per request it reports each side's own CPU
// (plain-cpu-ns/op, off-cpu-ns/op: getrusage, less the upstream alone's)
// and x-plain, their ratio; and each side's allocations (plain-allocs/op,
// off-allocs/op: measured one request at a time, see proxyAllocs) and
// extra-allocs/op, their difference. The CPU figures need a quiet machine;
// the allocation counts do not.
//
//	go test -run '^$' -bench FeatureOff -benchtime 2000x -count 5 ./bench/
func BenchmarkFeatureOff(b *testing.B) {
	plain := newRig(b)
	modes := []struct {
		name, body string
		callers    int
		behavior   simulator.Behavior
	}{
		{"json", chatBody, 64, simulator.Behavior{}},
		{"stream", fmt.Sprintf(streamBody, streamWords), streamCallers, simulator.Behavior{ChunkDelay: streamGap}},
	}
	plainAllocs := map[string]float64{}
	for _, m := range modes {
		plainAllocs[m.name] = plain.proxyAllocs(b, "sluice", m.body).total()
	}
	for _, f := range featuresOff {
		b.Run(f.name, func(b *testing.B) {
			r := newRigOf(b, "sluice-"+f.name, f.catalog()) // one feature's gateway at a time
			for _, m := range modes {
				offAllocs := r.proxyAllocs(b, "sluice", m.body).total()
				b.Run(m.name, func(b *testing.B) {
					plain.setBehavior(m.behavior)
					r.setBehavior(m.behavior)
					b.StopTimer()
					direct := usePerOp(b, plain, plain.url("direct"), m.body, m.callers)
					on := usePerOp(b, plain, plain.url("sluice"), m.body, m.callers).less(direct)
					off := usePerOp(b, r, r.url("sluice"), m.body, m.callers).less(direct)
					b.ReportMetric(on.cpu, "plain-cpu-ns/op")
					b.ReportMetric(off.cpu, "off-cpu-ns/op")
					b.ReportMetric(off.cpu/on.cpu, "x-plain")
					b.ReportMetric(plainAllocs[m.name], "plain-allocs/op")
					b.ReportMetric(offAllocs, "off-allocs/op")
					b.ReportMetric(offAllocs-plainAllocs[m.name], "extra-allocs/op")
				})
			}
		})
	}
}

// fewer is whichever of a and b counted fewer allocations in Sluice's code.
func fewer(a, b allocsPerRequest) allocsPerRequest {
	if b.gateway < a.gateway {
		return b
	}
	return a
}
