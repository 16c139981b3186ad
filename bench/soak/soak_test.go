package main

import (
	"bytes"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestSoakBriefly runs the whole driver for a few seconds against a
// private redis-server: every workload must succeed and the report must
// hold its tables, so the tool cannot rot. SOAK_SLUICE names a sluice
// binary to use instead of building one.
func TestSoakBriefly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gateway binary for several seconds")
	}
	redisURL := testenv.StartRedis(t).URL()
	bin := os.Getenv("SOAK_SLUICE")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "sluice")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/sluice").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	// 150 workloads: one and a half rounds of the weights (which sum to
	// 100), so each workload runs at least once.
	c := config{sluice: bin, redisURL: redisURL, dir: t.TempDir(), duration: 6 * time.Second, rate: 25,
		every: time.Second, window: 3 * time.Second, threshold: 2, logLevel: "info"}
	res, err := run(t.Context(), c, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	if res.errors != 0 {
		t.Errorf("%d of %d exchanges failed; want none:\n%s", res.errors, res.exchanges, res.text)
	}
	want := []string{"video submit", "video poll"}
	for _, w := range workloads() {
		if w.protocol != protoVideos {
			want = append(want, w.name)
		}
	}
	for _, name := range want {
		if res.succeeded[name] == 0 {
			t.Errorf("workload %q never succeeded; report:\n%s", name, res.text)
		}
	}
	if res.samples < 3 {
		t.Errorf("%d samples in 6s at one a second; want at least 3", res.samples)
	}
	for _, row := range []string{"| gateway RSS | ", "| Redis used_memory | ", "| gateway RSS: Go heap arenas | ", "### Where the RSS is",
		"| after the load | ", "The binary is resident for", "| 0–3s | ", "- Affinity", "- Billing", "- Video jobs: ",
		"### Where Redis's memory is", "| Redis used_memory: dataset | ", "| Redis slow log entries | ", "| `{jobs:N}:job:ID` | "} {
		if !strings.Contains(res.text, row) {
			t.Errorf("the report has no %q:\n%s", row, res.text)
		}
	}
}

func TestKeyGroup(t *testing.T) {
	for key, want := range map[string]string{
		"{d:default}:unit":          "{d:default}:unit",
		"{jobs:13}:job:vid_9f:x":    "{jobs:N}:job:ID",
		"{jobs:0}:exp":              "{jobs:N}:exp",
		"{d:pool.a}:aff:k1\x00s-42": "{d:pool.a}:aff:SEED",
		"status:credential":         "status:credential",
	} {
		if got := keyGroup(key); got != want {
			t.Errorf("keyGroup(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestRedisParts(t *testing.T) {
	values := map[string]float64{}
	info := map[string]string{"used_memory_dataset": "1000", "used_memory_overhead": "900", "mem_clients_normal": "300", "used_memory_scripts": "200"}
	if err := redisParts(values, info); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{redisDataset: 1000, redisClients: 300, redisScripts: 200, redisOtherOverhead: 400}
	if !maps.Equal(values, want) {
		t.Errorf("parts %v, want %v", values, want)
	}
	delete(info, "used_memory_scripts")
	if err := redisParts(values, info); err == nil {
		t.Error("a missing field was not an error")
	}
}

// The soak's own process is a Go binary like the gateway: its mappings,
// sorted into regions, must add up to its RSS, and its arenas must hold
// what the runtime counts in them.
func TestRegionsOfThisProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keep := make([][]byte, 64) // some heap to find, written so that it is resident
	for i := range keep {
		keep[i] = bytes.Repeat([]byte{1}, 64<<10)
	}
	maps, err := readSmaps(os.Getpid(), "/nonexistent/sluice.db")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	addRegions(values, maps)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p, err := procStatus(os.Getpid(), "/nonexistent/sluice.db")
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for r := range regionNames {
		sum += values[region(r).gaugeName()]
	}
	if math.Abs(sum-p.rss) > 0.1*p.rss {
		t.Errorf("regions add up to %.0f bytes, VmRSS is %.0f", sum, p.rss)
	}
	arenas, most := values[goArenas.gaugeName()], float64(ms.HeapSys+ms.StackSys)
	if raceDetector {
		most = math.Inf(1) // the race runtime's own mappings can look like arenas
	}
	if arenas < float64(ms.HeapInuse)/2 || arenas > most {
		t.Errorf("Go heap arenas hold %.0f bytes resident; the runtime has %d in use of %d (stacks %d)", arenas, ms.HeapInuse, ms.HeapSys, ms.StackSys)
	}
	if values[binaryFile.gaugeName()] == 0 {
		t.Errorf("nothing resident of the binary %s in %d mappings", exe, len(maps))
	}
	runtime.KeepAlive(keep)
}

// whereSection shows the end of warm-up, every window's end after it and
// the sample after the load, and finds the mapping that grew.
func TestWhereSection(t *testing.T) {
	begin := time.Unix(0, 0)
	var samples []sample
	for i := range 62 { // a sample a minute for an hour, and one after the load
		grew := float64(i) * (1 << 20)
		samples = append(samples, sample{at: begin.Add(time.Duration(i) * time.Minute),
			values: map[string]float64{"gateway RSS": 40<<20 + grew, otherAnon.gaugeName(): 10<<20 + grew},
			maps:   []mapping{{start: 0x7f0000000000, size: 100 << 20, rss: 10<<20 + grew, where: otherAnon}, {start: 0xc000000000, rss: 30 << 20, where: goArenas}}})
	}
	var b strings.Builder
	whereSection(&b, samples, begin, 10*time.Minute, 5*time.Minute, time.Hour)
	var rows []string
	for line := range strings.Lines(b.String()) {
		if label, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |"); ok && strings.HasPrefix(line, "| ") {
			rows = append(rows, label)
		}
	}
	want := []string{"at", "---", "10m", "15m", "20m", "25m", "30m", "35m", "40m", "45m", "50m", "55m", "after the load", // the regions
		"mapping", "---", "0x7f0000000000"} // the mappings that grew: only one did
	if !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q:\n%s", rows, want, b.String())
	}
	if !strings.Contains(b.String(), "the RSS changed by +51.00 MiB") {
		t.Errorf("no RSS change of +51 MiB (from 10m to 61m):\n%s", b.String())
	}
}

func TestParseSmaps(t *testing.T) {
	text := `00400000-01a00000 r-xp 00000000 08:01 123 /tmp/soak/sluice
Size:              22528 kB
Rss:               15000 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
32c6f4000000-32c6f4800000 rw-p 00000000 00:00 0 
Size:               8192 kB
Rss:                8000 kB
32c6f4800000-32c6f8000000 ---p 00000000 00:00 0 
Size:              57344 kB
Rss:                   0 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 
Size:               1024 kB
Rss:                1024 kB
7f0000100000-7f0000180000 ---p 00000000 00:00 0 
Size:                512 kB
Rss:                   0 kB
7f0000200000-7f0000208000 rw-s 00000000 08:01 456 /tmp/soak/sluice.db-shm
Size:                 32 kB
Rss:                  32 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
Size:                  8 kB
Rss:                   4 kB
`
	maps, err := parseSmaps(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		start uint64
		rss   float64
		where region
	}{{0x400000, 15000 << 10, binaryFile}, {0x32c6f4000000, 8000 << 10, goArenas}, {0x32c6f4800000, 0, goArenas},
		// Begins on a 64 MiB boundary, ends off one: not an arena.
		{0x7f0000000000, 1 << 20, otherAnon}, {0x7f0000100000, 0, otherAnon},
		{0x7f0000200000, 32 << 10, dbFiles}, {0x7ffd00000000, 4 << 10, otherFiles}}
	if len(maps) != len(want) {
		t.Fatalf("parseSmaps found %d mappings, want %d: %+v", len(maps), len(want), maps)
	}
	classify(maps, "/tmp/soak/sluice", "/tmp/soak/sluice.db")
	for i, w := range want {
		if m := maps[i]; m.start != w.start || m.rss != w.rss || m.where != w.where {
			t.Errorf("mapping %d = %#x %v bytes in %s, want %#x %v in %s", i, m.start, m.rss, regionNames[m.where], w.start, w.rss, regionNames[w.where])
		}
	}
}

func TestVerdict(t *testing.T) {
	hours := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i) / 60 // a sample a minute
		}
		return x
	}
	tests := []struct {
		name string
		y    func(i int, x float64) float64
		want string
	}{
		{"constant", func(int, float64) float64 { return 100 }, "flat"},
		{"within threshold", func(_ int, x float64) float64 { return 100 + 1.5*x }, "flat"},
		{"steady growth", func(_ int, x float64) float64 { return 100 + 10*x }, "DRIFT"},
		{"steady shrinking", func(_ int, x float64) float64 { return 100 - 10*x }, "DRIFT"},
		// A slope beyond the threshold, within the noise of samples that
		// jump by 20 % from one to the next.
		{"noise", func(i int, x float64) float64 { return 100 + 5*x + float64(20*(i%2)) }, "inconclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := hours(31)
			y := make([]float64, len(x))
			for i := range x {
				y[i] = tt.y(i, x[i])
			}
			var samples []sample
			start := time.Unix(0, 0)
			for i := range x {
				samples = append(samples, sample{at: start.Add(time.Duration(x[i] * float64(time.Hour))), values: map[string]float64{"g": y[i]}})
			}
			f := fitGauge(gauge{name: "g", scale: 1}, samples, start)
			if got := f.verdict(2); got != tt.want {
				t.Errorf("verdict = %q (slope %.2f ± %.2f %%/h), want %q", got, f.slopePct, f.stdErrPct, tt.want)
			}
		})
	}
}

func TestLeastSquaresOnALine(t *testing.T) {
	b, se := leastSquares([]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11})
	if b != 2 || se != 0 {
		t.Errorf("leastSquares = %v ± %v, want 2 ± 0", b, se)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
sluice_affinity_placements_total{alias="sticky",outcome="hit"} 7
sluice_affinity_placements_total{alias="sticky",outcome="new"} 3
sluice_affinity_placements_total{alias="other",outcome="hit"} 1
`
	hit := `sluice_affinity_placements_total{alias="sticky",outcome="hit"}`
	got, err := parseMetrics(strings.NewReader(text), "go_goroutines", hit, "sluice_affinity_placements_total")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"go_goroutines": 42, hit: 7, "sluice_affinity_placements_total": 11}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("parseMetrics = %v, want only %v", got, want)
	}
}

func TestShort(t *testing.T) {
	tests := []struct {
		give time.Duration
		want string
	}{
		{0, "0"},
		{20 * time.Second, "20s"},
		{5 * time.Minute, "5m"},
		{150 * time.Second, "2m30s"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
	}
	for _, tt := range tests {
		if got := short(tt.give); got != tt.want {
			t.Errorf("short(%v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
